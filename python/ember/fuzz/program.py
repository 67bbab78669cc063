"""A fuzz program as data: sizes, inputs, statements and outputs, rendered to Python source.

A program is kept as data rather than text so that the minimizer can shrink it: sizes live in one
table (`dims`) that inputs refer to by index, so shrinking a size shrinks every input that uses it
together; statements are expression trees or blocks with simpler alternatives. The rendered source
is a whole module: `program(...)` (the code under test) and `inputs(g)` (its arguments drawn from a
torch.Generator through ember.testing), so a failure prints as a short, runnable program.

Statement text never spells a size: it reads sizes from tensors (`x.shape[0]`, `-1`, slices), so a
program stays valid when the minimizer shrinks `dims`, or fails in eager and the shrink is refused.
"""
import dataclasses
from typing import List, Optional, Tuple

# One size-1 entry of a shape: a broadcasting dimension, independent of the dims table.
ONE = -1


@dataclasses.dataclass
class TensorSpec:
    """A tensor input: shape as indices into Program.dims (or ONE), a dtype name of torch, and for
    integer index tensors the exclusive upper bound as an index into dims (values in [0, dims[high]))."""
    shape: Tuple[int, ...]
    dtype: str = "float32"
    high: Optional[int] = None

    def render(self, dims):
        sizes = ", ".join(str(1 if d == ONE else dims[d]) for d in self.shape)
        if self.high is not None:
            return f"randint(g, 0, {dims[self.high]}, {sizes}{',' if len(self.shape) == 1 else ''})"
        if self.dtype == "bool":
            return f"randbool(g, {sizes})"
        if self.dtype in ("int32", "int64"):
            return f"randint(g, -5, 6, {sizes}, dtype=torch.{self.dtype})"
        dtype = "" if self.dtype == "float32" else f", dtype=torch.{self.dtype}"
        return f"randn(g, {sizes}{dtype})"


@dataclasses.dataclass
class Input:
    """One argument of `program`: a tensor, a list/tuple/dict of tensors, or `log` (an empty list the
    program appends to: a side effect on a caller-owned container)."""
    name: str
    kind: str  # "tensor", "list", "tuple", "dict", "log", "same" (the tensor input named `of`, passed again)
    items: List[TensorSpec] = dataclasses.field(default_factory=list)
    of: str = ""

    def keys(self):
        return [f"k{i}" for i in range(len(self.items))]

    def render(self, dims):
        parts = [t.render(dims) for t in self.items]
        if self.kind == "tensor":
            return parts[0]
        if self.kind == "list":
            return "[" + ", ".join(parts) + "]"
        if self.kind == "tuple":
            return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
        if self.kind == "dict":
            return "{" + ", ".join(f"{k!r}: {p}" for k, p in zip(self.keys(), parts)) + "}"
        if self.kind == "same":
            return self.of
        assert self.kind == "log", self.kind
        return "[]"


@dataclasses.dataclass
class Expr:
    """An expression tree: `fmt` with {0}, {1}, ... standing for the children's text; a leaf has no
    children (a variable name or a constant)."""
    fmt: str
    children: Tuple["Expr", ...] = ()

    def render(self):
        return self.fmt.format(*(c.render() for c in self.children))

    def subexprs(self):
        """Every node below this one, for the minimizer's "replace a node by a child" step."""
        for c in self.children:
            yield c
            yield from c.subexprs()

    def replace(self, old, new):
        if self is old:
            return new
        return Expr(self.fmt, tuple(c.replace(old, new) for c in self.children))


@dataclasses.dataclass
class Stmt:
    """One statement: `target = expr` when expr is set, else `lines` verbatim (in-place ops, blocks of
    control flow). `alternatives` are simpler statements the minimizer may put in its place (each
    branch of an `if`, the body of a loop); `feature` names what it exercises, for coverage tests."""
    feature: str
    target: Optional[str] = None
    expr: Optional[Expr] = None
    lines: Tuple[str, ...] = ()
    alternatives: Tuple["Stmt", ...] = ()

    def render(self):
        if self.expr is not None:
            return [f"{self.target} = {self.expr.render()}"]
        return list(self.lines)


@dataclasses.dataclass
class Program:
    seed: int
    dims: List[int]
    inputs: List[Input]
    stmts: List[Stmt]
    outputs: List[str]
    output_kind: str = "tuple"  # "tuple", "list", "dict", "single"

    def features(self):
        found = {s.feature for s in self.stmts}
        found |= {f"input-{i.kind}" for i in self.inputs}
        found |= {f"dtype-{t.dtype}" for i in self.inputs for t in i.items}
        found.add(f"output-{self.output_kind}")
        return found

    def render_return(self):
        outs = self.outputs
        if self.output_kind == "single" and len(outs) == 1:
            return f"return {outs[0]}"
        if self.output_kind == "dict":
            return "return {" + ", ".join(f"{o!r}: {o}" for o in outs) + "}"
        if self.output_kind == "list":
            return "return [" + ", ".join(outs) + "]"
        return "return (" + ", ".join(outs) + ("," if len(outs) == 1 else "") + ")"

    def source(self):
        """The program as a Python module: imports, program(...), inputs(g)."""
        args = ", ".join(i.name for i in self.inputs)
        body = [line for s in self.stmts for line in s.render()] + [self.render_return()]
        # An input passed twice (kind "same") needs its value named: the others stay one tuple expression.
        named = {i.of for i in self.inputs if i.kind == "same"}
        made = [f"    {i.name} = {i.render(self.dims)}" for i in self.inputs if i.name in named]
        values = ", ".join(i.name if i.name in named else i.render(self.dims) for i in self.inputs)
        return "\n".join([
            "import torch",
            "from ember.testing import randbool, randint, randn",
            "",
            "",
            f"def program({args}):",
            *("    " + line for line in body),
            "",
            "",
            "def inputs(g):",
            *made,
            f"    return ({values}{',' if len(self.inputs) == 1 else ''})",
            "",
        ])
