"""A reference interpreter for printed loop IR (src/loop_ir/loop_ir.h), for tests only.

`run(text, inputs)` executes a program's text on torch tensors and returns its outputs. It is
simple on purpose and slow: every kernel runs point by point in Python with numpy scalars of each
node's dtype (so float32 arithmetic rounds as float32), buffers are torch tensors with the
printed sizes and strides (views share their base's storage), and extern calls call torch. It
checks what the loop IR promises as it goes: a failing `check_index` raises IndexError, a load
outside its buffer raises, and a reduction's value is used only after its loop.

It reads the text form the printer writes (docs/loop-ir.md): index expressions are Python
syntax, and extern arguments use the graph IR's literal spelling, so both are evaluated by Python
with the right names in scope.
"""
import importlib
import itertools
import math
import re

import numpy as np
import torch

from .. import rng

__all__ = ["run", "parse", "LoopIRError"]

NP = {"b8": np.bool_, "u8": np.uint8, "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
      "f32": np.float32, "f64": np.float64}
TORCH = {"b8": torch.bool, "u8": torch.uint8, "i8": torch.int8, "i16": torch.int16, "i32": torch.int32,
         "i64": torch.int64, "f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32,
         "f64": torch.float64}
REDUCE = {"reduce_sum", "reduce_prod", "reduce_max", "reduce_min", "welford_mean", "welford_m2"}


class LoopIRError(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# Parsing

class Buffer:
    def __init__(self, id, dtype, sizes, strides, kind, index=None, base=None, offset="0"):
        self.id, self.dtype, self.sizes, self.strides = id, dtype, sizes, strides
        self.kind, self.index, self.base, self.offset = kind, index, base, offset


class Node:
    def __init__(self, id, op, dtype, operands=(), buffer=None, index=None, constant=None, bound=None):
        self.id, self.op, self.dtype, self.operands = id, op, dtype, list(operands)
        self.buffer, self.index, self.constant, self.bound = buffer, index, constant, bound


class Kernel:
    def __init__(self, name, ranges):
        self.name, self.ranges, self.loops = name, ranges, []  # loops: [(ranges, [Node])]
        self.open_loop = False  # a `}` closes the open loop, else the kernel


class Extern:
    def __init__(self, callable, results, argtext, form, mutates):
        self.callable, self.results, self.argtext, self.form, self.mutates = callable, results, argtext, form, mutates


class Program:
    def __init__(self):
        self.buffers, self.steps, self.outputs = {}, [], []


_RANGES = re.compile(r"([ir])(\d+) < ([^,\]]+(?:\([^)]*\)[^,\]]*)*)")
_BUFFER = re.compile(r"buffer %b(\d+) : (\w+)\[(.*?)\]\{(.*?)\}(?: ([a-z_][a-z0-9_]*(?::\d+)?))?"
                     r" (input (\d+)|output(?: (\d+))?|temp|extern|view %b(\d+) \+ (.+?))(?: offset (.+))?$")
_EXTERN = re.compile(r'extern \((.*?)\) = "((?:[^"\\]|\\.)*)"\((.*)\)((?: single| none| tuple| list)?)( mutates)?$')
_NODE = re.compile(r"%t(\d+) = (\w+) ?(.*) : (\w+)$")
_STORE = re.compile(r"store %b(\d+)\[(.*)\] = %t(\d+)$")
_LOAD = re.compile(r"%b(\d+)\[(.*)\](?: if %t(\d+) else (\S+))?$")


def _exprs(text):
    return [e.strip() for e in _split_top(text)] if text.strip() else []


def _split_top(text):
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return parts


def _ranges(text):
    m = re.search(r"\[(.*)\]", text)
    return [e.split("<", 1)[1].strip() for e in _exprs(m.group(1))] if m else []


def _scalar(text):
    if text in ("true", "false"):
        return text == "true"
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    return float(text)


def parse(text):
    prog = Program()
    kernel = None
    for raw in text.splitlines():
        line = raw.split("  //")[0].strip()
        if not line or line.startswith("//") or line.startswith("program ") or line.startswith("symbol "):
            continue  # symbol lines: their values come from run()'s `symbols`
        if line.startswith("buffer "):
            m = _BUFFER.match(line)
            if not m:
                raise LoopIRError(f"bad buffer line: {line}")
            kind = m.group(6).split()[0]
            b = Buffer(int(m.group(1)), m.group(2), _exprs(m.group(3)), _exprs(m.group(4)), kind)
            if kind == "input":
                b.index = int(m.group(7))
            elif kind == "output" and m.group(8):
                b.index = int(m.group(8))
            elif kind == "view":
                b.base, b.offset = int(m.group(9)), m.group(10)
            if m.group(11):
                b.offset = m.group(11)
            prog.buffers[b.id] = b
        elif line.startswith("kernel "):
            kernel = Kernel(line.split()[1][1:], _ranges(line[:line.rfind("{")]))
        elif line.startswith("loop"):
            kernel.loops.append((_ranges(line[:line.rfind("{")]), []))
            kernel.open_loop = True
        elif line == "}":
            if kernel is not None and kernel.open_loop:
                kernel.open_loop = False
            elif kernel is not None:
                prog.steps.append(("kernel", kernel))
                kernel = None
        elif line.startswith("extern "):
            m = _EXTERN.match(line)
            if not m:
                raise LoopIRError(f"bad extern line: {line}")
            results = [int(r.strip()[2:]) for r in m.group(1).split(",") if r.strip()]
            prog.steps.append(("extern", Extern(m.group(2), results, m.group(3), m.group(4).strip(), bool(m.group(5)))))
        elif line.startswith("return "):
            inner = line[line.index("(") + 1:line.rindex(")")]
            prog.outputs = [int(r.strip()[2:]) for r in inner.split(",") if r.strip()]
        elif line.startswith("store "):
            m = _STORE.match(line)
            kernel.loops[-1][1].append(Node(None, "store", None, [int(m.group(3))], int(m.group(1)), m.group(2)))
        elif line.startswith("%t"):
            kernel.loops[-1][1].append(_parse_node(line))
        else:
            raise LoopIRError(f"cannot read line: {line}")
    return prog


def _parse_node(line):
    m = _NODE.match(line)
    if not m:
        raise LoopIRError(f"bad node line: {line}")
    nid, op, rest, dt = int(m.group(1)), m.group(2), m.group(3).strip(), m.group(4)
    if op == "load":
        lm = _LOAD.match(rest)
        mask = [int(lm.group(3))] if lm.group(3) else []
        other = _scalar(lm.group(4)) if lm.group(4) else None
        return Node(nid, op, dt, mask, int(lm.group(1)), lm.group(2), other)
    if op == "constant":
        return Node(nid, op, dt, constant=_scalar(rest))
    if op == "index":
        return Node(nid, op, dt, index=rest)
    if op == "check_index":
        operand, bound = rest.split("<", 1)
        return Node(nid, op, dt, [int(operand.strip()[2:])], bound=bound.strip())
    operands = [int(o.strip()[2:]) for o in rest.split(",")] if rest else []
    return Node(nid, op, dt, operands)


# ---------------------------------------------------------------------------------------------
# Execution

def _resolve(path):
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for p in parts[cut:]:
            obj = getattr(obj, p)
        return obj
    raise LoopIRError(f"cannot resolve {path}")


def _cast(value, dt):
    if dt == "b8":
        return np.bool_(value != 0) if not isinstance(value, (bool, np.bool_)) else np.bool_(value)
    if dt in ("f16", "bf16"):  # a rounding (loop-ir.md): the f32 value rounded to that dtype
        return np.float32(torch.tensor(float(value), dtype=torch.float32).to(TORCH[dt]).item())
    target = NP[dt]
    if np.issubdtype(target, np.integer) and isinstance(value, (float, np.floating)):
        if not math.isfinite(value):
            raise LoopIRError(f"cast of {value} to {dt}")
        return target(int(math.trunc(float(value))))
    return target(value)


def _unary(op, a, dt):
    f = {
        "neg": lambda: -a, "abs": lambda: np.abs(a), "exp": lambda: np.exp(a), "log": lambda: np.log(a),
        "log1p": lambda: np.log1p(a), "expm1": lambda: np.expm1(a), "sqrt": lambda: np.sqrt(a),
        "rsqrt": lambda: NP[dt](1) / np.sqrt(a), "sin": lambda: np.sin(a), "cos": lambda: np.cos(a),
        "tanh": lambda: np.tanh(a), "sigmoid": lambda: NP[dt](1) / (NP[dt](1) + np.exp(-a)),
        "erf": lambda: NP[dt](math.erf(float(a))), "reciprocal": lambda: NP[dt](1) / a,
        "relu": lambda: a if (a != a or a > 0) else NP[dt](0), "floor": lambda: np.floor(a),
        "ceil": lambda: np.ceil(a), "trunc": lambda: np.trunc(a), "round": lambda: np.round(a),
        "sign": lambda: np.sign(a), "isnan": lambda: np.bool_(a != a), "logical_not": lambda: np.bool_(not a),
        "bitwise_not": lambda: np.invert(a), "cast": lambda: _cast(a, dt),
    }[op]
    return f()


def _binary(op, a, b):
    f = {
        "add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b, "div": lambda: a / b,
        "floordiv": lambda: np.floor_divide(a, b), "mod": lambda: np.mod(a, b), "pow": lambda: np.power(a, b),
        "maximum": lambda: np.maximum(a, b), "minimum": lambda: np.minimum(a, b),
        "bitwise_and": lambda: a & b, "bitwise_or": lambda: a | b, "bitwise_xor": lambda: a ^ b,
        "eq": lambda: np.bool_(a == b), "ne": lambda: np.bool_(a != b), "lt": lambda: np.bool_(a < b),
        "le": lambda: np.bool_(a <= b), "gt": lambda: np.bool_(a > b), "ge": lambda: np.bool_(a >= b),
        "logical_and": lambda: np.bool_(bool(a) and bool(b)), "logical_or": lambda: np.bool_(bool(a) or bool(b)),
        "philox_rand": lambda: rng.philox_uniform(int(a), np.array([int(b)]))[0],
    }[op]
    return f()


def _finish_reduction(op, values, dt):
    if op == "reduce_sum":
        total = sum(float(v) for v in values) if dt in ("f32", "f64") else sum(int(v) for v in values)
        return NP[dt](total)
    if op == "reduce_prod":
        return NP[dt](math.prod(values))
    if op in ("reduce_max", "reduce_min"):
        if any(v != v for v in values):
            return NP[dt](float("nan"))
        return (max if op == "reduce_max" else min)(values)
    n = len(values)
    mean = sum(float(v) for v in values) / n if n else float("nan")
    if op == "welford_mean":
        return NP[dt](mean)
    return NP[dt](sum((float(v) - mean) ** 2 for v in values))


class _Interp:
    def __init__(self, prog, inputs, symbols):
        self.prog, self.inputs, self.env0 = prog, inputs, dict(symbols)
        self.tensors = {}

    def ev(self, text, env):
        return int(eval(text, {"__builtins__": {}, "max": max, "min": min}, env))

    def tensor(self, bid):
        if bid in self.tensors:
            return self.tensors[bid]
        b = self.prog.buffers[bid]
        sizes = [self.ev(s, self.env0) for s in b.sizes]
        strides = [self.ev(s, self.env0) for s in b.strides]
        if b.kind == "input":
            t = self.inputs[b.index]
        elif b.kind in ("output", "temp"):
            t = torch.empty_strided(sizes, strides, dtype=TORCH[b.dtype])
            if t.is_floating_point():
                t.fill_(float("nan"))  # reading before writing shows up as NaN
        elif b.kind == "view":
            base = self.tensor(b.base)
            t = base.as_strided(sizes, strides, base.storage_offset() + self.ev(b.offset, self.env0))
        else:
            raise LoopIRError(f"extern buffer %b{bid} read before its call defined it")
        if list(t.shape) != sizes or (t.numel() > 1 and not _strides_agree(t, strides)):
            raise LoopIRError(f"%b{bid}: tensor {tuple(t.shape)}{t.stride()} is not {sizes}{strides}")
        self.tensors[bid] = t
        return t

    def run(self):
        for kind, step in self.prog.steps:
            if kind == "kernel":
                self.run_kernel(step)
            else:
                self.run_extern(step)
        return [self.tensor(b) for b in self.prog.outputs]

    def run_extern(self, ext):
        fn = _resolve(ext.callable)
        ns = {"torch": torch, "device": torch.device, "slice": slice, "inf": math.inf, "nan": math.nan,
              "None": None, "True": True, "False": False, "__b": self.tensor, "__call": lambda *a, **k: (a, k)}
        argtext = re.sub(r"%b(\d+)", r"__b(\1)", ext.argtext)
        args, kwargs = eval("__call(" + argtext + ")", ns)
        out = fn(*args, **kwargs)
        if not ext.results:
            return
        outs = [out] if len(ext.results) == 1 and ext.form in ("", "single") else list(out)
        for bid, t in zip(ext.results, outs):
            self.tensors[bid] = t

    def run_kernel(self, k):
        outer = [self.ev(r, self.env0) for r in k.ranges]
        for point in itertools.product(*[range(n) for n in outer]):
            env = dict(self.env0)
            env.update({f"i{j}": v for j, v in enumerate(point)})
            values = {}
            for ranges, nodes in k.loops:
                inner = [self.ev(r, env) for r in ranges]
                reductions = {}
                for rpoint in itertools.product(*[range(n) for n in inner]):
                    lenv = dict(env)
                    lenv.update({f"r{j}": v for j, v in enumerate(rpoint)})
                    for n in nodes:
                        self.eval_node(n, values, lenv, reductions)
                for nid, (op, dt, vals) in reductions.items():
                    values[nid] = _finish_reduction(op, vals, dt)
                for n in nodes:  # values of ranged loops do not outlive their loop
                    if inner and n.op not in REDUCE and n.id is not None:
                        values.pop(n.id, None)

    def eval_node(self, n, values, env, reductions):
        def get(i):
            if i not in values:
                raise LoopIRError(f"%t{i} used where it has no value")
            return values[i]

        for name, v in values.items():
            if isinstance(v, (np.integer, int)) and not isinstance(v, (bool, np.bool_)):
                env[f"t{name}"] = int(v)
        op = n.op
        if op == "store":
            t = self.tensor(n.buffer)
            idx = tuple(self.ev_list(n.index, env))
            self.check_bounds(t, idx, n.buffer)
            v = get(n.operands[0])
            t[idx] = bool(v) if t.dtype == torch.bool else (float(v) if t.is_floating_point() else int(v))
            return
        if op == "load":
            if n.operands and not get(n.operands[0]):
                values[n.id] = _cast(n.constant, n.dtype)
                return
            t = self.tensor(n.buffer)
            idx = tuple(self.ev_list(n.index, env))
            self.check_bounds(t, idx, n.buffer)
            values[n.id] = _cast(t[idx].item(), n.dtype)
        elif op == "constant":
            values[n.id] = _cast(n.constant, n.dtype)
        elif op == "index":
            values[n.id] = np.int64(self.ev(n.index, env))
        elif op == "check_index":
            v = int(get(n.operands[0]))
            bound = self.ev(n.bound, env)
            if not 0 <= v < bound:
                raise IndexError(f"index {v} is out of bounds for size {bound}")
            values[n.id] = np.int64(v)
        elif op in REDUCE:
            reductions.setdefault(n.id, (op, n.dtype, []))[2].append(get(n.operands[0]))
        elif op == "where":
            c, a, b = (get(i) for i in n.operands)
            values[n.id] = a if c else b
        elif len(n.operands) == 1:
            values[n.id] = _unary(op, get(n.operands[0]), n.dtype)
        else:
            values[n.id] = _binary(op, get(n.operands[0]), get(n.operands[1]))
        if op not in REDUCE and op not in ("store",):
            v = values[n.id]
            if n.dtype in NP and not isinstance(v, NP[n.dtype]):
                raise LoopIRError(f"%t{n.id} = {op}: a {type(v).__name__}, not {n.dtype}")

    def ev_list(self, text, env):
        return [self.ev(e, env) for e in _exprs(text)]

    @staticmethod
    def check_bounds(t, idx, bid):
        if len(idx) != t.dim() or any(not 0 <= i < s for i, s in zip(idx, t.shape)):
            raise LoopIRError(f"%b{bid}{list(idx)} is outside {list(t.shape)}")


def _strides_agree(t, strides):
    return all(s == 1 or a == b for s, a, b in zip(t.shape, t.stride(), strides))


def run(text, inputs, symbols=None):
    """Runs printed loop IR on `inputs` (torch tensors, in graph input order); returns its outputs."""
    prog = parse(text)
    with np.errstate(all="ignore"):
        return _Interp(prog, list(inputs), symbols or {}).run()
