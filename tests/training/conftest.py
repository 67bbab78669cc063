import contextlib

import pytest

import ember
from ember.testing import DEVICE


@pytest.fixture
def fresh():
    """A clean Ember, and tensors and modules on the test device (EMBER_TEST_DEVICE=cuda on the GPU machine).
    Test files opt in with `pytestmark = pytest.mark.usefixtures("fresh")`."""
    ember.reset()
    with DEVICE if DEVICE.type != "cpu" else contextlib.nullcontext():
        yield
    ember.reset()
