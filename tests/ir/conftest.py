import pytest


@pytest.fixture(scope="session")
def ir():
    import ember._C.ir as ir_module
    return ir_module
