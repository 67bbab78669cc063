"""Fixtures of the C++ code generation tests (helpers: cpp_harness.py)."""
import pytest


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    """A code-cache directory of the test module's own: its programs compile afresh."""
    return tmp_path_factory.mktemp("cpp-cache")
