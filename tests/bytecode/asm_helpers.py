"""Helpers for the assembler tests: raw instruction lists as Python data, and edits on them.

A raw code is (instructions, exception_table, firstlineno) as `ember._C.bytecode.disassemble`
returns it: instructions are (opcode, arg, target, (line, end_line, col, end_col), offset) tuples,
exception entries (start, end, target, depth, lasti) in instruction indices. No torch.
"""
import dis
import types

from ember._C import bytecode as bc

OPCODE, ARG, TARGET, POSITION, OFFSET = range(5)
NO_POSITION = (-1, -1, -1, -1)


def op(name):
    number = bc.opcode_number(name)
    assert number >= 0, f"{name} is not an opcode of this interpreter"
    return number


def ins(name, arg=0, target=-1, position=NO_POSITION):
    """A new instruction (offset -1: not from the original code)."""
    return (op(name), arg, target, position, -1)


def opname(instruction):
    return dis.opname[instruction[OPCODE]]


def insert(raw, at, new):
    """Inserts `new` instructions before index `at`. Jumps to `at` or later keep their instruction;
    exception entries that span `at` grow to cover the new ones; targets inside `new` are indices
    into the result."""
    instructions, table, first = raw
    k = len(new)

    def moved(i):
        return i + k if i >= at else i

    out = [(o, a, moved(t) if t >= 0 else t, p, off) for o, a, t, p, off in instructions]
    out[at:at] = list(new)
    entries = [(moved(s), e + k if e > at else e, moved(t), d, l) for s, e, t, d, l in table]
    return out, entries, first


def retarget(raw, index, target):
    instructions, table, first = raw
    instructions = list(instructions)
    o, a, _, p, off = instructions[index]
    instructions[index] = (o, a, target, p, off)
    return instructions, table, first


def build_function(fn, raw, **changes):
    """A function like `fn` whose code is `raw` assembled into fn's code with `changes`."""
    code = bc.make_code(fn.__code__, *raw, **changes)
    return types.FunctionType(code, fn.__globals__, code.co_name, fn.__defaults__, fn.__closure__)


def index_of(raw, name, start=0, arg=None):
    for i, x in enumerate(raw[0][start:], start):
        if opname(x) == name and (arg is None or x[ARG] == arg):
            return i
    raise AssertionError(f"no {name} (arg {arg}) at or after instruction {start}")


def after_resume(raw):
    return index_of(raw, "RESUME") + 1
