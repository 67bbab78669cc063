"""The bytecode assembler (src/frontend/bytecode/assembler.h) on CPython 3.11, 3.12 and 3.13.

1. Round trip: for every code object of a large part of the standard library and of
   bytecode_corpus.py, assemble(disassemble(code)) reproduces co_code, co_linetable,
   co_exceptiontable and co_stacksize byte for byte.
2. Edits that run: prologues, inserted and retargeted jumps (3.11 forward/backward variants),
   EXTENDED_ARG jumps, exception tables after insertion, shifted local slots, renaming.
3. Every documented refusal raises a Python exception naming the problem.
No torch: these run on interpreters without it.
"""
import dis
import importlib.util
import os
import pkgutil
import sys
import textwrap
import types

import pytest

import bytecode_corpus as corpus
from asm_helpers import (ARG, NO_POSITION, OPCODE, POSITION, TARGET, after_resume, build_function, index_of,
                         ins, insert, op, opname, retarget)
from dis_oracle import code_objects
from ember._C import bytecode as bc

MINOR = sys.version_info[1]

# ---- 1. round trip ------------------------------------------------------------------------------

PACKAGES = ["asyncio", "email", "json", "collections", "importlib", "unittest", "logging", "http", "urllib",
            "xml.etree", "xml.dom", "xml.sax", "concurrent.futures", "re", "multiprocessing", "html", "wsgiref",
            "tomllib", "zoneinfo", "sqlite3", "ctypes", "pydoc_data"]
MODULES = ["dis", "inspect", "typing", "argparse", "ast", "enum", "dataclasses", "functools", "pathlib", "pickle",
           "difflib", "textwrap", "tokenize", "traceback", "calendar", "string", "fractions", "statistics", "shutil",
           "tarfile", "zipfile", "configparser", "csv", "heapq", "bisect", "copy", "pprint", "subprocess", "threading",
           "socket", "ftplib", "smtplib", "optparse", "gettext", "locale", "random", "ipaddress", "uuid", "decimal",
           "_pydecimal", "_pydatetime", "datetime", "contextlib", "abc", "operator", "weakref", "tempfile", "glob",
           "fnmatch", "shlex", "platform", "sysconfig", "doctest", "pdb", "bdb", "cmd", "codecs", "io", "_pyio",
           "selectors", "signal", "queue", "sched", "base64", "hashlib", "hmac", "secrets", "struct", "timeit"]


def _module_sources():
    names = set(MODULES)
    for package in PACKAGES:
        spec = importlib.util.find_spec(package)
        names.add(package)
        for info in pkgutil.walk_packages(spec.submodule_search_locations, package + "."):
            names.add(info.name)
    out = []
    for name in sorted(names):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            continue
        out.append((name, spec.origin))
    return out


SOURCES = _module_sources()


def _round_trip_failures(code):
    """(qualname, field) for each nested code object whose round trip differs."""
    failures = []
    for c in code_objects(code):
        raw = bc.disassemble(c)
        got = bc.assemble(*raw)
        want = (c.co_code, c.co_linetable, c.co_exceptiontable, c.co_stacksize)
        for field, g, w in zip(("co_code", "co_linetable", "co_exceptiontable", "co_stacksize"), got, want):
            if g != w:
                failures.append((c.co_qualname, field))
    return failures


def test_stdlib_round_trip_is_byte_identical():
    assert len(SOURCES) > 150
    codes = failures = 0
    bad = []
    for name, path in SOURCES:
        with open(path, "rb") as f:
            source = f.read()
        try:
            module = compile(source, path, "exec", dont_inherit=True)
        except SyntaxError:
            continue  # e.g. lib2to3 test data; not code CPython would run
        codes += len(code_objects(module))
        for qualname, field in _round_trip_failures(module):
            failures += 1
            bad.append(f"{name}:{qualname}:{field}")
    print(f"\nround trip: {len(SOURCES)} modules, {codes} code objects, {failures} failures")
    assert codes > 10000
    assert not bad, bad[:20]


CORPUS_CODE = compile(open(corpus.__file__).read(), corpus.__file__, "exec")
CORPUS = [(f.__qualname__, f.__code__) for f in corpus.FUNCTIONS] + [("<module>", CORPUS_CODE)]


@pytest.mark.parametrize("name,code", CORPUS, ids=[n for n, _ in CORPUS])
def test_corpus_round_trip(name, code):
    assert _round_trip_failures(code) == []


@pytest.mark.parametrize("name,code", CORPUS, ids=[n for n, _ in CORPUS])
def test_disassembly_matches_dis(name, code):
    for c in code_objects(code):
        instructions, table, first = bc.disassemble(c)
        want = [i for i in dis.get_instructions(c) if i.opname not in ("CACHE",)]
        want = [i for i in want if i.opname != "EXTENDED_ARG"]
        assert [opname(x) for x in instructions] == [i.opname for i in want]
        assert first == c.co_firstlineno
        offsets = [x[-1] for x in instructions]
        for x, w in zip(instructions, want):
            p = w.positions
            expected = tuple(-1 if v is None else v for v in (p.lineno, p.end_lineno, p.col_offset, p.end_col_offset))
            assert x[POSITION] == expected, w
            if w.opcode in dis.hasjrel:
                assert offsets[x[TARGET]] == w.argval, w
            else:
                assert x[TARGET] == -1
                assert x[ARG] == (w.arg or 0), w


def test_positions_use_every_location_form():
    """The round trip above only proves the writer if the corpus exercises all five entry forms."""
    forms = set()
    for _, code in CORPUS:
        for c in code_objects(code):
            for byte in c.co_linetable:
                if byte & 0x80:  # an entry's header byte: 0x80 | code << 3 | (units - 1)
                    kind = (byte >> 3) & 15
                    forms.add("short" if kind < 10 else "one-line" if kind < 13 else kind)
    assert forms == {"short", "one-line", 13, 14, 15}


def test_opcode_number():
    for name, number in dis.opmap.items():
        assert bc.opcode_number(name) == (number if number < 256 else -1), name
    assert bc.opcode_number("NOT_AN_OPCODE") == -1


# ---- 2. edits that run --------------------------------------------------------------------------

def add_constant(fn, value):
    consts = fn.__code__.co_consts + (value,)
    return consts, len(consts) - 1


def nb_op(name):
    return [n for n, _ in dis._nb_ops].index(name)


def with_prologue(a):
    total = 0
    for i in range(a):
        try:
            total += 10 // (i - 2)
        except ZeroDivisionError:
            total += 1000
    return total


def test_prepended_prologue_runs():
    raw = bc.disassemble(with_prologue.__code__)
    consts, k = add_constant(with_prologue, 3)
    at = after_resume(raw)
    a = with_prologue.__code__.co_varnames.index("a")
    prologue = [ins("LOAD_FAST", a), ins("LOAD_CONST", k), ins("BINARY_OP", nb_op("NB_ADD")), ins("STORE_FAST", a)]
    fn = build_function(with_prologue, insert(raw, at, prologue), consts=consts)
    assert fn(2) == with_prologue(5)
    assert fn(0) == with_prologue(3)


def skipped_statement():
    x = 1
    x = 2
    return x


def test_inserted_jump_forward_skips_a_statement():
    raw = bc.disassemble(skipped_statement.__code__)
    line = skipped_statement.__code__.co_firstlineno + 2
    first = next(i for i, x in enumerate(raw[0]) if x[POSITION][0] == line)
    resume_at = next(i for i, x in enumerate(raw[0]) if x[POSITION][0] == line + 1)
    fn = build_function(skipped_statement, insert(raw, first, [ins("JUMP_FORWARD", target=resume_at + 1)]))
    assert skipped_statement() == 2 and fn() == 1


def resume_like(a):
    a = a + 1000
    b = a * 2
    return b


def test_prologue_jumping_into_the_middle():
    """What a resume function does: a prologue, then a jump to the instruction to continue at."""
    raw = bc.disassemble(resume_like.__code__)
    line = resume_like.__code__.co_firstlineno + 2
    resume_at = next(i for i, x in enumerate(raw[0]) if x[POSITION][0] == line)
    at = after_resume(raw)
    fn = build_function(resume_like, insert(raw, at, [ins("JUMP_FORWARD", target=resume_at + 1)]))
    assert fn(3) == 6


def _cond_jump(sense):
    return op(f"POP_JUMP_FORWARD_IF_{sense}" if MINOR == 11 else f"POP_JUMP_IF_{sense}")


def compare_template(a, b):
    if a > b:
        return 1
    return 2


def _compare_gt():
    """The instructions CPython puts between `a > b`'s operands and its conditional jump."""
    raw = bc.disassemble(compare_template.__code__)
    start = index_of(raw, "COMPARE_OP")
    end = next(i for i in range(start, len(raw[0])) if raw[0][i][TARGET] >= 0)
    return [(x[OPCODE], x[ARG], -1, NO_POSITION, -1) for x in raw[0][start:end]]


def loop_template(n):
    total = 0
    return total


def _count_loop(conditional_back):
    """total = 0; L: total += n; n -= 1; if n > 0: goto L; return total — as raw code on
    loop_template, the loop edge either a conditional jump backward or a forward exit plus a
    JUMP_FORWARD that must become JUMP_BACKWARD."""
    raw = bc.disassemble(loop_template.__code__)
    code = loop_template.__code__
    n, total = code.co_varnames.index("n"), code.co_varnames.index("total")
    consts, one = add_constant(loop_template, 1)
    consts = consts + (0,)
    zero = len(consts) - 1
    head = list(raw[0][:after_resume(raw)])
    body_start = len(head) + 2
    body = [ins("LOAD_CONST", zero), ins("STORE_FAST", total),
            ins("LOAD_FAST", total), ins("LOAD_FAST", n), ins("BINARY_OP", nb_op("NB_INPLACE_ADD")), ins("STORE_FAST", total),
            ins("LOAD_FAST", n), ins("LOAD_CONST", one), ins("BINARY_OP", nb_op("NB_INPLACE_SUBTRACT")), ins("STORE_FAST", n),
            ins("LOAD_FAST", n), ins("LOAD_CONST", zero)] + _compare_gt()
    jump_at = len(head) + len(body)
    if conditional_back:
        tail = [(_cond_jump("TRUE"), 0, body_start, NO_POSITION, -1)]
    else:
        tail = [(_cond_jump("FALSE"), 0, jump_at + 2, NO_POSITION, -1), ins("JUMP_FORWARD", target=body_start)]
    tail += [ins("LOAD_FAST", total), ins("RETURN_VALUE")]
    return (head + body + tail, [], raw[2]), consts, jump_at


def test_jump_forward_to_an_earlier_instruction_becomes_jump_backward():
    raw, consts, jump_at = _count_loop(conditional_back=False)
    code = bc.make_code(loop_template.__code__, *raw, consts=consts)
    names = [i.opname for i in dis.get_instructions(code)]
    assert "JUMP_BACKWARD" in names and "JUMP_FORWARD" not in names
    fn = types.FunctionType(code, globals())
    assert fn(4) == 10 and fn(1) == 1


def test_conditional_jump_backward():
    raw, consts, jump_at = _count_loop(conditional_back=True)
    if MINOR == 11:  # the forward variant is switched to POP_JUMP_BACKWARD_IF_TRUE
        code = bc.make_code(loop_template.__code__, *raw, consts=consts)
        assert "POP_JUMP_BACKWARD_IF_TRUE" in [i.opname for i in dis.get_instructions(code)]
        fn = types.FunctionType(code, globals())
        assert fn(4) == 10 and fn(1) == 1
    else:  # 3.12+ conditional jumps only go forward
        with pytest.raises(ValueError, match=r"instruction \d+ \(POP_JUMP_IF_TRUE\) jumps backward.*only jumps forward"):
            bc.assemble(*raw)


@pytest.mark.skipif(MINOR != 11, reason="3.11 has backward conditional jumps")
def test_backward_conditional_moved_forward_becomes_forward_variant():
    raw, consts, jump_at = _count_loop(conditional_back=False)
    instructions = list(raw[0])
    o, a, t, p, off = instructions[jump_at]
    instructions[jump_at] = (op("POP_JUMP_BACKWARD_IF_FALSE"), a, t, p, off)
    code = bc.make_code(loop_template.__code__, instructions, raw[1], raw[2], consts=consts)
    names = [i.opname for i in dis.get_instructions(code)]
    assert "POP_JUMP_FORWARD_IF_FALSE" in names and "POP_JUMP_BACKWARD_IF_FALSE" not in names
    assert types.FunctionType(code, globals())(5) == 15


def _big_source(statements):
    lines = ["def big(n):", "    total = 0", "    for i in range(n):", "        if i % 2:"]
    lines += ["            total += 1"] * statements
    lines += ["        else:", "            total -= 1", "    return total", ""]
    return "\n".join(lines)


def _extended_arg_jumps(code):
    units = code.co_code
    ext = dis.opmap["EXTENDED_ARG"]
    jumps = set(dis.hasjrel)
    out = []
    for i in range(0, len(units), 2):
        if units[i] == ext and i + 2 < len(units):
            j = i + 2
            while units[j] == ext:
                j += 2
            if units[j] in jumps:
                out.append(dis.opname[units[j]])
    return out


def test_extended_arg_jumps_round_trip_and_run_after_edits():
    namespace = {}
    exec(compile(_big_source(320), "<big>", "exec"), namespace)
    big = namespace["big"]
    assert _extended_arg_jumps(big.__code__), "the generated function should need EXTENDED_ARG on a jump"
    assert _round_trip_failures(big.__code__) == []
    raw = bc.disassemble(big.__code__)
    # A NOP after RESUME moves everything; a JUMP_FORWARD over the 320 statements needs a prefix.
    raw = insert(raw, after_resume(raw), [ins("NOP")])
    first_add = index_of(raw, "BINARY_OP", arg=nb_op("NB_INPLACE_ADD"))
    else_branch = index_of(raw, "BINARY_OP", arg=nb_op("NB_INPLACE_SUBTRACT")) - 2
    raw = insert(raw, first_add - 2, [ins("JUMP_FORWARD", target=else_branch + 1)])
    fn = build_function(big, raw)
    assert "JUMP_FORWARD" in _extended_arg_jumps(fn.__code__)
    assert big(5) == 320 * 2 - 3
    assert fn(5) == -5  # odd iterations now fall into the else branch as well


class Recorder:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, kind, value, tb):
        self.log.append(("exit", kind.__name__ if kind else None))
        return kind is KeyError  # swallows KeyError only


def try_and_with(xs, key, log):
    total = 0
    for x in xs:
        try:
            total += 10 // x
        except ZeroDivisionError:
            log.append("zero")
            total -= 1
        finally:
            log.append("finally")
    with Recorder(log):
        total += {"a": 1}[key]
    try:
        with Recorder(log):
            raise ValueError("inner")
    except ValueError as e:
        log.append(str(e))
    return total


def _nops_everywhere(fn):
    """A NOP before every instruction after RESUME, except where CPython needs a pair together
    (assembler.h): 3.11 PRECALL + CALL, 3.13 END_FOR + POP_TOP."""
    raw = bc.disassemble(fn.__code__)
    start = after_resume(raw)
    for i in range(len(raw[0]) - 1, start - 1, -1):
        if MINOR == 11 and opname(raw[0][i]) == "CALL":
            continue
        if MINOR >= 13 and opname(raw[0][i - 1]) == "END_FOR":
            continue
        raw = insert(raw, i, [ins("NOP")])
    return raw


def _run(fn, *args):
    log = []
    try:
        return fn(*args, log), log
    except Exception as e:  # noqa: BLE001 - the exception is part of the result
        return (type(e).__name__, str(e)), log


def test_exception_table_after_insertions():
    raw = _nops_everywhere(try_and_with)
    edited = build_function(try_and_with, raw)
    assert len(raw[0]) > 2 * len(bc.disassemble(try_and_with.__code__)[0]) - 20
    assert edited.__code__.co_stacksize == try_and_with.__code__.co_stacksize
    for args in [([1, 0, 2], "a"), ([0], "b"), ([5, 0], "zz"), ([3], "a")]:
        want = _run(try_and_with, *args)
        assert _run(edited, *args) == want
    # the handlers ran: ZeroDivisionError caught, finally each time, KeyError swallowed by __exit__
    result, log = _run(edited, [0, 1], "missing")
    assert log == ["zero", "finally", "finally", "enter", ("exit", "KeyError"), "enter", ("exit", "ValueError"), "inner"]
    assert result == 9


def closures(a, b):
    scale = 3

    def inner(x):
        return x * scale + a

    return [inner(v) for v in range(b)], sum(inner(v) for v in range(b))


def test_nops_everywhere_in_closures_and_comprehensions():
    edited = build_function(closures, _nops_everywhere(closures))
    assert edited(2, 4) == closures(2, 4)


def _with_new_first_argument(fn, new_name="extra"):
    code = fn.__code__
    raw = bc.shift_local_slots(*bc.disassemble(code), 1)
    return build_function(fn, raw, varnames=(new_name,) + code.co_varnames, argcount=code.co_argcount + 1)


@pytest.mark.parametrize("fn,args", [(with_prologue, (4,)), (try_and_with, ([1, 0], "a", [])), (closures, (2, 5)),
                                     (corpus.unpack_star, ((1, 2, 3, 4),))])
def test_shift_local_slots_with_a_new_argument(fn, args):
    edited = _with_new_first_argument(fn)
    assert edited("ignored", *args) == fn(*args)


def outer_with_cell_arg(a, b):
    def get():
        return a + b

    a = a * 2
    return get()


def test_shift_local_slots_with_cell_arguments_and_free_variables():
    edited = _with_new_first_argument(outer_with_cell_arg)
    assert edited(None, 3, 4) == outer_with_cell_arg(3, 4) == 10
    # the inner function reads free variables: its slots shift too, and it runs with the closure
    inner = [c for c in outer_with_cell_arg.__code__.co_consts if isinstance(c, types.CodeType)][0]
    shifted = bc.shift_local_slots(*bc.disassemble(inner), 1)
    code = bc.make_code(inner, *shifted, varnames=("extra",) + inner.co_varnames, argcount=inner.co_argcount + 1)
    cell = types.CellType
    fn = types.FunctionType(code, globals(), "get", None, (cell(5), cell(6)))
    assert fn("x") == 11


def _many_locals_function():
    names = [f"v{i}" for i in range(20)]
    source = textwrap.dedent(f"""\
    def many({", ".join(names)}):
        total = 0
        for k in range(3):
            try:
                total += v14 * v15 + v0 * v1
                v15, v14 = v14, v15
                if total > 10_000:
                    raise ValueError(total)
            except ValueError:
                total = -1
        return total, v14, v15
    """)
    namespace = {}
    exec(compile(source, "<many>", "exec"), namespace)
    return namespace["many"]


@pytest.mark.parametrize("delta", [1, 2, 5])
def test_shift_local_slots_splits_fused_pairs(delta):
    many = _many_locals_function()
    raw = bc.disassemble(many.__code__)
    fused = [x for x in raw[0] if opname(x) in ("LOAD_FAST_LOAD_FAST", "STORE_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST")]
    if MINOR >= 13:
        assert any(x[ARG] >> 4 >= 14 or x[ARG] & 15 >= 14 for x in fused), "the test needs fused slots near 15"
    shifted = bc.shift_local_slots(*raw, delta)
    split = len(shifted[0]) - len(raw[0])
    if MINOR >= 13:
        assert split > 0
        assert all(max(x[ARG] >> 4, x[ARG] & 15) < 16 for x in shifted[0] if opname(x).count("FAST") == 2)
    else:
        assert split == 0
    code = many.__code__
    new_names = tuple(f"new{i}" for i in range(delta))
    fn = build_function(many, shifted, varnames=new_names + code.co_varnames, argcount=code.co_argcount + delta)
    args = list(range(20))
    assert fn(*new_names, *args) == many(*args)
    args[14], args[15] = 200, 300
    assert fn(*new_names, *args) == many(*args) == (-1, 300, 200)  # raised on the first pass, swapped 3 times


def test_shift_local_slots_below_zero_is_refused():
    with pytest.raises(ValueError, match=r"instruction \d+ \(STORE_FAST\) would use local slot -9\d"):
        bc.shift_local_slots(*bc.disassemble(with_prologue.__code__), -100)


def test_make_code_renames():
    raw = bc.disassemble(resume_like.__code__)
    code = bc.make_code(resume_like.__code__, *raw, name="__resume_at_7", qualname="outer.<locals>.__resume_at_7")
    assert code.co_name == "__resume_at_7" and code.co_qualname == "outer.<locals>.__resume_at_7"
    assert code.co_code == resume_like.__code__.co_code
    fn = types.FunctionType(code, globals())
    assert fn(1) == resume_like(1)
    with pytest.raises(TypeError) as info:
        fn(None)
    frames = [f.name for f in __import__("traceback").extract_tb(info.value.__traceback__)]
    assert frames[-1] == "__resume_at_7"


def test_make_code_keeps_line_numbers_of_inserted_code_empty():
    raw = bc.disassemble(skipped_statement.__code__)
    raw = insert(raw, after_resume(raw), [ins("NOP"), ins("NOP")])
    code = bc.make_code(skipped_statement.__code__, *raw)
    positions = list(code.co_positions())
    resume = [i.opname for i in dis.get_instructions(code)].index("RESUME")
    assert positions[resume + 1] == (None, None, None, None)
    assert [ln for _, _, ln in code.co_lines() if ln is not None] == [ln for _, _, ln in skipped_statement.__code__.co_lines() if ln is not None]


# ---- 3. refusals --------------------------------------------------------------------------------

def _simple():
    raw = bc.disassemble(resume_like.__code__)
    return list(raw[0]), raw[1], raw[2]


def test_refuses_a_jump_without_target():
    instructions, table, first = _simple()
    instructions.insert(1, ins("JUMP_FORWARD"))
    with pytest.raises(ValueError, match=r"instruction 1 \(JUMP_FORWARD\) jumps but has no target"):
        bc.assemble(instructions, table, first)


def test_refuses_a_target_out_of_range():
    instructions, table, first = _simple()
    instructions.insert(1, ins("JUMP_FORWARD", target=999))
    with pytest.raises(ValueError, match=r"JUMP_FORWARD\) jumps to instruction 999, past the end"):
        bc.assemble(instructions, table, first)


def test_refuses_a_target_on_a_non_jump():
    instructions, table, first = _simple()
    instructions.insert(1, ins("NOP", target=0))
    with pytest.raises(ValueError, match=r"\(NOP\) has a target but does not jump"):
        bc.assemble(instructions, table, first)


def test_refuses_wrong_direction_without_variant():
    instructions, table, first = _simple()
    instructions.insert(1, ins("JUMP_BACKWARD_NO_INTERRUPT", target=3))
    with pytest.raises(ValueError, match=r"JUMP_BACKWARD_NO_INTERRUPT\) jumps forward .* only jumps backward"):
        bc.assemble(instructions, table, first)
    instructions, table, first = _simple()
    instructions.insert(2, ins("FOR_ITER", target=0))
    with pytest.raises(ValueError, match=r"FOR_ITER\) jumps backward .* only jumps forward"):
        bc.assemble(instructions, table, first)


def test_refuses_negative_argument():
    instructions, table, first = _simple()
    instructions.insert(1, ins("LOAD_CONST", -1))
    with pytest.raises(ValueError, match=r"LOAD_CONST\) has a negative argument"):
        bc.assemble(instructions, table, first)


def test_refuses_cache_and_extended_arg_and_unknown_opcodes():
    for name in ("CACHE", "EXTENDED_ARG"):
        instructions, table, first = _simple()
        instructions.insert(1, ins(name))
        with pytest.raises(ValueError, match=f"{name}\\) is written by the assembler itself"):
            bc.assemble(instructions, table, first)
    undefined = next(n for n in range(256) if dis.opname[n].startswith("<"))
    instructions, table, first = _simple()
    instructions.insert(1, (undefined, 0, -1, NO_POSITION, -1))
    with pytest.raises(ValueError, match=f"opcode the running interpreter does not define: {undefined}"):
        bc.assemble(instructions, table, first)


def test_refuses_stack_underflow():
    instructions, table, first = _simple()
    instructions.insert(1, ins("POP_TOP"))
    with pytest.raises(ValueError, match=r"instruction 1 \(POP_TOP\) pops more values than the stack holds \(depth 0\)"):
        bc.assemble(instructions, table, first)


def test_refuses_different_depths_on_two_paths():
    instructions, table, first = _simple()
    at = 1
    # LOAD_CONST; [jump if true -> X]; LOAD_CONST; X: ...: X is reached at depth 0 and 1.
    new = [ins("LOAD_CONST", 0), (_cond_jump("TRUE"), 0, at + 3, NO_POSITION, -1), ins("LOAD_CONST", 0)]
    if MINOR >= 13:
        new.insert(1, ins("TO_BOOL"))
        new[2] = (_cond_jump("TRUE"), 0, at + 4, NO_POSITION, -1)
    instructions[at:at] = new
    with pytest.raises(ValueError, match=r"stack depth differs between two paths into instruction \d+ .*: [01] and [01]"):
        bc.assemble(instructions, table, first)


def test_refuses_falling_off_the_end():
    instructions, table, first = _simple()
    with pytest.raises(ValueError, match=r"falls through past the last instruction"):
        bc.assemble(instructions[:-1], table, first)


def test_refuses_bad_exception_entries():
    raw = bc.disassemble(try_and_with.__code__)
    instructions, table, first = raw
    n = len(instructions)
    for bad, message in [((0, n + 1, 0, 0, False), "lies outside"), ((3, 2, 0, 0, False), "lies outside"),
                         ((0, 2, n, 0, False), "the handler is not an instruction"),
                         ((0, 2, 1, -1, False), "negative depth")]:
        with pytest.raises(ValueError, match=message):
            bc.assemble(instructions, [bad], first)
    s, e, t, d, l = table[0]
    with pytest.raises(ValueError, match="overlap"):
        bc.assemble(instructions, [table[0], (s, e + 1, t, d, l)] if e + 1 <= n else [table[0], table[0]], first)


def test_refuses_depth_below_an_exception_entry():
    raw = bc.disassemble(try_and_with.__code__)
    instructions, table, first = raw
    s, e, t, d, l = table[0]
    with pytest.raises(ValueError, match=r"inside an exception entry that unwinds to depth 50"):
        bc.assemble(instructions, [(s, e, t, 50, l)] + list(table[1:]), first)


def test_make_code_errors_are_python_errors():
    raw = bc.disassemble(resume_like.__code__)
    with pytest.raises(ValueError, match=r"make_code\(resume_like\): assemble: instruction 1 \(POP_TOP\) pops more"):
        bc.make_code(resume_like.__code__, raw[0][:1] + [ins("POP_TOP")] + raw[0][1:], raw[1], raw[2])
    with pytest.raises(TypeError):
        bc.make_code(resume_like.__code__, *raw, varnames=["a", "b"])
    with pytest.raises(TypeError, match="unknown field"):
        bc.make_code(resume_like.__code__, *raw, colour="red")


def test_disassemble_refuses_non_code():
    with pytest.raises(TypeError, match="expected a code object"):
        bc.disassemble(resume_like)


@pytest.mark.skipif(MINOR < 12, reason="3.12+ FOR_ITER lands on END_FOR")
def test_refuses_for_iter_not_aimed_at_end_for():
    instructions, table, first = bc.disassemble(with_prologue.__code__)
    at = index_of((instructions, table, first), "FOR_ITER")
    target = instructions[at][TARGET]
    assert opname(instructions[target]) == "END_FOR"
    instructions = list(instructions)
    o, a, _, p, off = instructions[at]
    instructions[at] = (o, a, target + 1, p, off)
    with pytest.raises(ValueError, match=r"\(FOR_ITER\) must jump to END_FOR.*not to instruction"):
        bc.assemble(instructions, table, first)


def test_disassemble_refuses_malformed_bytecode():
    code = resume_like.__code__
    stray_cache = code.co_code[:2] + bytes([dis.opmap["CACHE"], 0]) + code.co_code[2:]
    with pytest.raises(RuntimeError, match=r"malformed bytecode in resume_like: stray CACHE unit at offset 2"):
        bc.disassemble(code.replace(co_code=stray_cache))
