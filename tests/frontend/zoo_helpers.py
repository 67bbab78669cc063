"""Library-style code for test_zoo_constructs.py: a function that imports relatively, as diffusers' decorators
do (`from . import USE_PEFT_BACKEND` inside a wrapper), inlined by the compiled frame from this module."""
SCALE = 3.0


def scale_by_package_constant(x):
    from . import zoo_helpers
    from .zoo_helpers import SCALE as scale

    return x * scale + zoo_helpers.SCALE
