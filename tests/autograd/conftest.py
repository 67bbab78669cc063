import pytest

import ember


@pytest.fixture(autouse=True)
def fresh_ember():
    """Each test starts and ends with empty caches and zero counters (the counters are asserted)."""
    ember.reset()
    yield
    ember.reset()
