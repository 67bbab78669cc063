"""Library-style code for test_model_constructs.py: module globals that hold objects, a Mapping with Python
__getitem__, read by functions that the compiled frame inlines from this other module."""
from collections.abc import Mapping


class Holder:
    """A context holder as transformers' CompileableContextVar: set() and reset() write attributes."""

    def __init__(self):
        self.value = None
        self.active = False

    def set(self, value):
        self.value = value
        self.active = True

    def reset(self):
        self.value = None
        self.active = False


HOLDER = Holder()


def run_with_holder(x):
    HOLDER.set(3)
    y = x * 2
    HOLDER.reset()
    return y


class Interface(Mapping):
    """A registry with Python __getitem__, as transformers' AttentionInterface."""

    _global_mapping = {"double": lambda t: t * 2, "neg": lambda t: -t}

    def __init__(self):
        self._local_mapping = {}

    def __getitem__(self, key):
        if key in self._local_mapping:
            return self._local_mapping[key]
        return self._global_mapping[key]

    def __iter__(self):
        return iter(self._global_mapping)

    def __len__(self):
        return len(self._global_mapping)


FUNCTIONS = Interface()


def apply(name, x):
    if name in FUNCTIONS:
        return FUNCTIONS[name](x)
    return x
