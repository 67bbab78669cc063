"""Run captured graphs before and after passes on the eager executor, on the same inputs.

A graph's inputs are made from its recorded types (random values; index-like int64 tensors hold
small non-negative ints unless a source is given a tensor in `overrides`), so any captured graph
can be executed without resolving its sources. Mutated inputs (batch_norm's running statistics)
are compared too: each run gets its own clone of the inputs.
"""
import operator
import re

import torch

from ember import ops
from ember._C import passes

_INPUT = re.compile(r'%(\d+): (\w+)\[([^\]]*)\]\{([^}]*)\} (\S+)( grad)? "((?:[^"\\]|\\.)*)"')
_DTYPES = {
    "b8": torch.bool, "u8": torch.uint8, "i8": torch.int8, "i16": torch.int16, "i32": torch.int32,
    "i64": torch.int64, "f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32, "f64": torch.float64,
}


def graph_inputs(text):
    """[(source, dtype, sizes, strides)] of a graph, or None when a type is symbolic or unusual."""
    header = text[: text.index("{\n")] if "{\n" in text else text.splitlines()[0]
    out = []
    for m in _INPUT.finditer(header):
        dt = _DTYPES.get(m.group(2))
        try:
            sizes = [int(s) for s in m.group(3).split(",") if s.strip()]
            strides = [int(s) for s in m.group(4).split(",") if s.strip()]
        except ValueError:
            return None
        if dt is None or m.group(5) != "cpu":
            return None
        out.append((m.group(7), dt, sizes, strides))
    return out


def make_inputs(spec, seed, overrides=None):
    g = torch.Generator().manual_seed(seed)
    tensors = []
    for source, dt, sizes, strides in spec:
        if overrides and source in overrides:
            tensors.append(overrides[source])
            continue
        span = 1 + sum((s - 1) * st for s, st in zip(sizes, strides) if s > 0) if all(sizes) else 0
        if dt.is_floating_point:
            flat = torch.randn(max(span, 1), generator=g).to(dt)
        elif dt == torch.bool:
            flat = torch.rand(max(span, 1), generator=g) > 0.5
        else:
            flat = torch.randint(0, 3, (max(span, 1),), generator=g).to(dt)
        tensors.append(torch.as_strided(flat, sizes, strides))
    return tensors


# Capture records a Tensor method's varargs form under the core op (`permute(%x, 2, 0, 1)`),
# which the torch.* target refuses; the eager backend keeps the method the frame called. The
# Tensor method of the same name takes both forms, self first.
_METHOD_FORMS = {"view", "reshape", "permute", "expand", "flatten", "unsqueeze", "squeeze", "transpose"}
# An attribute read the trace recorded as a call (`x.T`, `x.mT`): the target is the attrgetter's repr,
# which names no importable object.
_ATTRGETTER = re.compile(r"operator\.attrgetter\('(\w+)'\)")


def callables(text):
    out = []
    for kind, name in passes.node_callables(text):
        if kind == "torch":
            getter = _ATTRGETTER.fullmatch(name)
            out.append(operator.attrgetter(getter.group(1)) if getter else ops.table.resolve(name))
        elif kind in _METHOD_FORMS:
            out.append(getattr(torch.Tensor, kind))
        else:
            out.append(ops.op_callables[kind])
    return out


def run(text, inputs):
    """Outputs of the graph, and the inputs after the run (clones: in-place writes stay here)."""
    mine = [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]
    torch.manual_seed(0)
    outs = passes.run_graph(text, callables(text), mine, ops.table)
    return outs, mine


def lower(text, names=("canonicalize", "decompose")):
    for name in names:
        text = passes.run_pass(text, name)
    return text


def compare(before, after, inputs, **tol):
    """Runs both graphs on the same inputs; asserts equal outputs and mutated inputs."""
    out_a, in_a = run(before, inputs)
    out_b, in_b = run(after, inputs)
    assert len(out_a) == len(out_b)
    for a, b in zip(out_a, out_b):
        torch.testing.assert_close(b, a, equal_nan=True, **tol)
    for a, b in zip(in_a, in_b):
        torch.testing.assert_close(b, a, equal_nan=True, **tol)
