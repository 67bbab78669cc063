"""Builds primitive-form graph IR text while running every node through torch, for lowering tests.

Each `GraphBuilder` method appends one node and computes its value with eager torch, so the
result types the text records (dtype, sizes, strides) are exactly torch's, and the expected
outputs are known when the graph is done.
"""
import torch

SHORT = {torch.bool: "b8", torch.uint8: "u8", torch.int8: "i8", torch.int16: "i16", torch.int32: "i32",
         torch.int64: "i64", torch.float16: "f16", torch.bfloat16: "bf16", torch.float32: "f32",
         torch.float64: "f64"}


def type_of(t):
    sizes = ", ".join(str(s) for s in t.shape)
    strides = ", ".join(str(s) for s in t.stride())
    return f"{SHORT[t.dtype]}[{sizes}]{{{strides}}} cpu"


def lit(v):
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, float):
        return repr(v) if "." in repr(v) or "e" in repr(v) else repr(v) + ".0"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(lit(x) for x in v) + "]"
    if isinstance(v, torch.dtype):
        return "torch." + str(v).split(".")[1]
    return str(v)


class GraphBuilder:
    def __init__(self):
        self.inputs, self.lines, self.values, self.outputs = [], [], [], []

    def input(self, t):
        vid = len(self.values)
        self.values.append(t)
        self.inputs.append(f"%{vid}: {type_of(t)} \"L['a{vid}']\"")
        return Ref(vid)

    def arg(self, a):
        if isinstance(a, Ref):
            return f"%{a.id}"
        if isinstance(a, list) and a and isinstance(a[0], Ref):
            return "[" + ", ".join(f"%{r.id}" for r in a) + "]"
        return lit(a)

    def node(self, op, result, *args, **kwargs):
        """Appends `op(args, kwargs)` whose eager result is `result` (a tensor or a tuple)."""
        results = list(result) if isinstance(result, tuple) else [result]
        ids = []
        for t in results:
            ids.append(len(self.values))
            self.values.append(t)
        text = ", ".join([self.arg(a) for a in args] + [f"{k}={self.arg(v)}" for k, v in kwargs.items()])
        lhs = ", ".join(f"%{i}" for i in ids)
        if isinstance(result, tuple):
            types = "tuple(" + ", ".join(type_of(t) for t in results) + ")"
        else:
            types = type_of(result)
        callee = op if not op.startswith("torch.") else f'torch "{op}"'
        self.lines.append(f"  {lhs} = {callee}({text}) : {types}")
        return [Ref(i) for i in ids] if isinstance(result, tuple) else Ref(ids[0])

    def effect(self, op, *args):
        """A torch node with no result (an in-place call whose result is unused)."""
        text = ", ".join(self.arg(a) for a in args)
        self.lines.append(f'  torch "{op}"({text})')

    def text(self):
        outs = ", ".join(f"%{r.id}" for r in self.outputs)
        return "graph @g(" + ", ".join(self.inputs) + ") {\n" + "\n".join(self.lines) + f"\n  return ({outs})\n}}\n"


class Ref:
    def __init__(self, id):
        self.id = id
