"""Rebuilding the model outputs a compiled frame returns (src/frontend/interp/interp_records.cpp).

The trace models a model output (transformers' ModelOutput, diffusers' BaseOutput) as its fields; the compiled frame returns their values as a tuple planned
like a namedtuple, whose type is a `Rebuilder`: after the graph runs, the runtime calls `_make(values)`,
which constructs the output by keyword, as the model's own code did. Needs no torch.
"""
import functools


class Rebuilder:
    """Stands where a namedtuple type would: `_make(values)` -> cls(**dict(zip(fields, values)))."""

    __slots__ = ("cls", "fields")

    def __init__(self, cls, fields):
        self.cls = cls
        self.fields = tuple(fields)

    def _make(self, values):
        values = tuple(values)
        if len(values) != len(self.fields):
            raise ValueError(f"ember: {self.cls.__name__} has {len(self.fields)} fields, got {len(values)} values")
        return self.cls(**dict(zip(self.fields, values)))

    def __repr__(self):
        return f"ember.records.Rebuilder({self.cls.__module__}.{self.cls.__qualname__})"


@functools.lru_cache(maxsize=None)
def rebuilder(cls, fields):
    return Rebuilder(cls, fields)
