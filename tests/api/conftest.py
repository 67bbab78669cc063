import pytest

import ember


@pytest.fixture(autouse=True)
def fresh_ember():
    """Each API test starts and ends with empty caches and zero counters."""
    ember.reset()
    yield
    ember.reset()
