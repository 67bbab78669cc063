"""Shrinks a failing program to a short one that fails the same way (same kind, same variant).

Greedy passes over the program's data (program.py), repeated until none makes progress or the trial
budget is spent; a candidate is kept when it still runs eagerly and still fails the same way:
  1. drop statements (halves first, then one at a time, last first);
  2. put a simpler statement in place of a block (an `if`'s branch, a loop's initial value);
  3. simplify expressions: replace a node of an expression tree by one of its children;
  4. inline `v = w` copies that simplification left; drop outputs, inputs and container items;
     make the output a single value;
  5. shrink sizes (each entry of `dims` down to 1), drop dimensions of input shapes, and turn input
     dtypes into float32.
Every trial compiles the program again, so the budget bounds the minimizer's time (a trial is about
a second with a cold C++ compile).
"""
import copy
import re

from .generator import load, runs_eagerly
from .program import Expr
from .runner import run_variant


def fails_like(prog, failure):
    """The program is valid eager code and fails as `failure` did (same kind and variant)."""
    if not runs_eagerly(prog):
        return False
    ns = load(prog.source())
    try:
        got = run_variant(ns["program"], ns["inputs"], failure.variant)
    except ValueError:  # the program raises eagerly on the runner's inputs
        return False
    return failure.same_as(got)


class _Shrinker:
    def __init__(self, prog, failure, budget, predicate):
        self.best, self.failure, self.budget = prog, failure, budget
        self.predicate = predicate

    def attempt(self, candidate):
        if self.budget <= 0:
            return False
        self.budget -= 1
        if self.predicate(candidate, self.failure):
            self.best = candidate
            return True
        return False

    def with_(self, **changes):
        c = copy.deepcopy(self.best)
        for k, v in changes.items():
            setattr(c, k, v)
        return c

    def drop_statements(self):
        progress = False
        n = len(self.best.stmts)
        for size in (n // 2, 1):
            i = len(self.best.stmts) - size
            while size and i >= 0:
                stmts = self.best.stmts[:i] + self.best.stmts[i + size:]
                if self.attempt(self.with_(stmts=stmts)):
                    progress = True
                i = min(i, len(self.best.stmts)) - size
        return progress

    def simplify_statements(self):
        progress = False
        for i in range(len(self.best.stmts)):
            if i >= len(self.best.stmts):
                break
            stmt = self.best.stmts[i]
            for alt in stmt.alternatives:
                if self.attempt(self.with_(stmts=self.best.stmts[:i] + [alt] + self.best.stmts[i + 1:])):
                    progress = True
                    break
            stmt = self.best.stmts[i]
            if stmt.expr is None:
                continue
            for node in [stmt.expr, *stmt.expr.subexprs()]:
                done = False
                for child in node.children:
                    new = copy.deepcopy(stmt)
                    new.expr = stmt.expr.replace(node, child)
                    if self.attempt(self.with_(stmts=self.best.stmts[:i] + [new] + self.best.stmts[i + 1:])):
                        progress = done = True
                        break
                if done:
                    break
        return progress

    def inline_copies(self):
        """`v = w` (an expression simplified down to a name) goes; later statements read w."""
        for i, stmt in enumerate(self.best.stmts):
            if stmt.expr is None or stmt.expr.children or not stmt.expr.fmt.isidentifier():
                continue
            old, new = stmt.target, stmt.expr.fmt
            later = [_rename(s, old, new) for s in self.best.stmts[i + 1:]]
            outputs = list(dict.fromkeys(new if o == old else o for o in self.best.outputs))
            if self.attempt(self.with_(stmts=self.best.stmts[:i] + later, outputs=outputs)):
                return True
        return False

    def drop_interface(self):
        progress = False
        outs = self.best.outputs
        for o in list(outs):
            if len(self.best.outputs) > 1 and self.attempt(self.with_(outputs=[x for x in self.best.outputs if x != o])):
                progress = True
        if self.best.output_kind != "single" and len(self.best.outputs) == 1:
            progress |= self.attempt(self.with_(output_kind="single"))
        for inp in list(self.best.inputs):
            if self.attempt(self.with_(inputs=[i for i in self.best.inputs if i.name != inp.name])):
                progress = True
                continue
            if inp.kind in ("list", "tuple", "dict") and len(inp.items) > 1:
                c = self.with_()
                next(i for i in c.inputs if i.name == inp.name).items.pop()
                progress |= self.attempt(c)
        return progress

    def shrink_sizes(self):
        progress = False
        for d in range(len(self.best.dims)):
            for size in range(1, self.best.dims[d]):
                dims = list(self.best.dims)
                dims[d] = size
                if self.attempt(self.with_(dims=dims)):
                    progress = True
                    break
        for k, inp in enumerate(self.best.inputs):
            for j, spec in enumerate(inp.items):
                for axis in range(len(spec.shape)):
                    if axis >= len(self.best.inputs[k].items[j].shape) or len(self.best.inputs[k].items[j].shape) == 1:
                        break
                    c = self.with_()
                    s = c.inputs[k].items[j]
                    s.shape = s.shape[:axis] + s.shape[axis + 1:]
                    progress |= self.attempt(c)
                if self.best.inputs[k].items[j].dtype != "float32" and self.best.inputs[k].items[j].high is None:
                    c = self.with_()
                    c.inputs[k].items[j].dtype = "float32"
                    progress |= self.attempt(c)
        return progress


def _rename(stmt, old, new):
    """The statement reading `new` where it read `old` (whole words only)."""
    word = re.compile(rf"\b{re.escape(old)}\b")
    stmt = copy.deepcopy(stmt)
    if stmt.expr is not None:
        stmt.expr = _rename_expr(stmt.expr, word, new)
    stmt.lines = tuple(word.sub(new, line) for line in stmt.lines)
    stmt.alternatives = tuple(_rename(a, old, new) for a in stmt.alternatives)
    return stmt


def _rename_expr(expr, word, new):
    return Expr(word.sub(new, expr.fmt), tuple(_rename_expr(c, word, new) for c in expr.children))


def minimize(prog, failure, budget=150, predicate=fails_like):
    """The smallest program found that fails like `failure` (the input program if none is smaller)."""
    s = _Shrinker(prog, failure, budget, predicate)
    passes = (s.drop_statements, s.simplify_statements, s.inline_copies, s.drop_interface, s.shrink_sizes)
    while s.budget > 0:
        if not any([p() for p in passes]):
            break
    return s.best
