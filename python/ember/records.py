"""Rebuilding the model outputs a compiled frame returns (src/frontend/interp/interp_records.cpp).

The trace models a model output (transformers' ModelOutput, diffusers' BaseOutput) as its fields; the compiled frame returns their values as a tuple planned
like a namedtuple, whose type is a `Rebuilder`: after the graph runs, the runtime calls `_make(values)`,
which constructs the output by keyword, as the model's own code did (or, for a class with construction
code of its own, with the arguments that code was given). Needs no torch.
"""
import functools


class Rebuilder:
    """Stands where a namedtuple type would: `_make(values)` -> cls(*values[:positional], **dict(zip(fields,
    values[positional:]))). A record the trace modelled passes every field by keyword (positional 0); one
    whose class has construction code of its own gets the arguments the model's code passed, as it passed
    them."""

    __slots__ = ("cls", "fields", "positional")

    def __init__(self, cls, fields, positional=0):
        self.cls = cls
        self.fields = tuple(fields)
        self.positional = positional

    def _make(self, values):
        values = tuple(values)
        if len(values) != self.positional + len(self.fields):
            raise ValueError(f"ember: {self.cls.__name__} takes {self.positional + len(self.fields)} values, "
                             f"got {len(values)}")
        return self.cls(*values[:self.positional], **dict(zip(self.fields, values[self.positional:])))

    def __repr__(self):
        return f"ember.records.Rebuilder({self.cls.__module__}.{self.cls.__qualname__})"


@functools.lru_cache(maxsize=None)
def rebuilder(cls, fields, positional=0):
    return Rebuilder(cls, fields, positional)
