"""The decoder against `dis` over a corpus of functions (tests/bytecode/bytecode_corpus.py).

Runs on CPython 3.11, 3.12 and 3.13 without torch. For every code object in the corpus (nested
lambdas, comprehensions and class bodies included) each real instruction must decode once (twice
for split ones) with the kind, argument, jump target and line that dis implies, and the exception
table must be dis' table in instruction indices. FOR_ITER's exhaustion target is also checked by
running loops under a tracer.
"""
import dis
import sys

import pytest

import bytecode_corpus as corpus
from dis_oracle import MINOR, code_objects, expected
from ember._C import bytecode as bc

KIND, ARG, ARG2, TARGET, OFFSET, LINE, OPNAME = range(7)

MODULE_CODE = compile(open(corpus.__file__).read(), corpus.__file__, "exec")
ROOTS = [(f.__qualname__, f.__code__) for f in corpus.FUNCTIONS] + [("<module>", MODULE_CODE)]
CODES = [(f"{root}/{c.co_qualname}", c) for root, code in ROOTS for c in code_objects(code)]


def test_corpus_is_large_enough():
    assert len(corpus.FUNCTIONS) >= 60
    assert len(CODES) > len(corpus.FUNCTIONS)


def _expected_index(exp, offset):
    """Index of the first expected instruction at or after a byte offset."""
    for i, e in enumerate(exp):
        if e.offset >= offset:
            return i
    return len(exp)


def _exact_index(exp, offset):
    matches = [i for i, e in enumerate(exp) if e.offset == offset]
    assert matches, f"no instruction starts at offset {offset}"
    return matches[0]


@pytest.mark.parametrize("name,code", CODES, ids=[n for n, _ in CODES])
def test_instructions_match_dis(name, code):
    got = bc.decode(code)
    exp = expected(code)
    assert [g[OPNAME] for g in got] == [e.opname for e in exp]
    for g, e in zip(got, exp):
        where = f"{e.opname} at {e.offset}"
        assert g[KIND] == e.kind, where
        assert g[OFFSET] == e.offset, where
        assert g[LINE] == e.line, where
        assert e.check_arg(g[ARG]), f"{where}: arg {g[ARG]} does not match dis {e.ins.argrepr!r}"
        assert g[ARG2] == e.arg2, where
        if e.target is None:
            assert g[TARGET] == -1, where
            continue
        target = _exact_index(exp, e.target)
        skipped = [exp[target + k].opname for k in range(e.skip_after_target)]
        assert skipped == ["END_FOR", "POP_TOP"][:e.skip_after_target], where
        assert g[TARGET] == target + e.skip_after_target, where


@pytest.mark.parametrize("name,code", CODES, ids=[n for n, _ in CODES])
def test_exception_table_matches_dis(name, code):
    exp = expected(code)
    want = [(_expected_index(exp, e.start), _expected_index(exp, e.end), _exact_index(exp, e.target),
             e.depth, e.lasti) for e in dis._parse_exception_table(code)]
    assert bc.exception_table(code) == want


def _kinds_seen():
    return {g[KIND] for _, code in CODES for g in bc.decode(code)}


# The P0/P1 kinds (notes/pep523.md section 5) that the corpus must exercise, per version.
REQUIRED = {
    "Nop", "LoadFast", "StoreFast", "DeleteFast", "LoadConst", "LoadGlobal", "StoreGlobal", "LoadAttr",
    "LoadMethod", "StoreAttr", "DeleteAttr", "LoadDeref", "StoreDeref", "MakeCell", "CopyFreeVars",
    "ReturnValue", "PopTop", "Copy", "Swap", "Call", "CallFunctionEx", "MakeFunction", "BinaryOp",
    "BinarySubscr", "StoreSubscr", "DeleteSubscr", "BuildSlice", "BuildTuple", "BuildList", "BuildSet",
    "BuildMap", "BuildConstKeyMap", "BuildString", "ListAppend", "ListExtend", "SetAdd", "SetUpdate",
    "MapAdd", "DictUpdate", "DictMerge", "ListToTuple", "UnpackSequence", "UnpackEx", "CompareOp",
    "IsOp", "ContainsOp", "UnaryNegative", "UnaryPositive", "UnaryNot", "UnaryInvert", "PopJumpIfTrue",
    "PopJumpIfFalse", "PopJumpIfNone", "PopJumpIfNotNone", "Jump", "GetIter", "ForIter", "BeforeWith",
    "WithExceptStart", "PushExcInfo", "PopExcept", "Reraise", "CheckExcMatch", "RaiseVarargs",
    "LoadAssertionError", "FormatSimple", "FormatWithSpec", "ConvertValue", "ImportName", "ImportFrom",
    "LoadName", "PushNull", "Unsupported",
} | {
    11: {"KwNames", "LoadClosure", "JumpIfTrueOrPop", "JumpIfFalseOrPop"},
    12: {"KwNames", "LoadClosure", "ReturnConst", "LoadSuperAttr", "LoadFastAndClear", "BinarySlice",
         "StoreSlice", "PopN", "CallIntrinsic1"},
    13: {"CallKw", "ToBool", "ReturnConst", "LoadSuperAttr", "LoadFastAndClear", "BinarySlice",
         "StoreSlice", "PopN", "SetFunctionAttribute", "CallIntrinsic1"},
}[MINOR]


def test_corpus_covers_p0_p1_kinds():
    assert REQUIRED - _kinds_seen() == set()


def test_fused_and_split_instructions_are_covered():
    names = {g[OPNAME] for _, code in CODES for g in bc.decode(code)}
    if MINOR >= 13:
        assert {"LOAD_FAST_LOAD_FAST", "STORE_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST"} <= names
    else:
        assert "FORMAT_VALUE" in names
    if MINOR >= 12:
        assert "LOAD_FAST_CHECK" in names or "LOAD_FAST_AND_CLEAR" in names


def _prefixed_jumps(code):
    """Names of jump instructions that carry an EXTENDED_ARG prefix."""
    out = []
    previous = None
    for ins in dis.get_instructions(code):
        if previous == "EXTENDED_ARG" and ins.opcode in dis.hasjrel:
            out.append(ins.opname)
        previous = ins.opname
    return out


def test_extended_arg_jumps_both_directions():
    forward = _prefixed_jumps(corpus.big_forward_jump.__code__)
    backward = _prefixed_jumps(corpus.big_backward_jump.__code__)
    assert any("BACKWARD" not in n for n in forward), forward
    assert any("BACKWARD" in n for n in backward), backward
    many = bc.decode(corpus.many_locals.__code__)
    assert max(g[ARG] for g in many if g[KIND] == "StoreFast") >= 256
    assert max(g[ARG] for g in many if g[KIND] == "LoadConst") >= 256


def test_index_at_offset_maps_prefix_and_caches():
    code = corpus.many_locals.__code__
    got = bc.decode(code)
    units = code.co_code
    checked = 0
    for index, g in enumerate(got):
        first = min(i for i, h in enumerate(got) if h[OFFSET] == g[OFFSET])
        assert bc.index_at_offset(code, g[OFFSET]) == first
        if units[g[OFFSET]] == dis.opmap["EXTENDED_ARG"]:
            opcode_unit = g[OFFSET] + 2
            while units[opcode_unit] == dis.opmap["EXTENDED_ARG"]:
                opcode_unit += 2
            assert bc.index_at_offset(code, opcode_unit) == index
            checked += 1
    assert checked > 0
    assert bc.index_at_offset(code, len(units)) == len(got)
    # An inline cache unit belongs to no instruction: it maps to the next one.
    code = corpus.read_global.__code__
    got = bc.decode(code)
    load = next(i for i, g in enumerate(got) if g[OPNAME] == "LOAD_GLOBAL")
    assert bc.index_at_offset(code, got[load][OFFSET] + 2) == load + 1


def _trace_offsets(fn, args):
    """(code, offset) of every instruction executed by fn(*args), in order."""
    seen = []
    if MINOR >= 12:
        mon = sys.monitoring
        tool = next(t for t in range(6) if mon.get_tool(t) is None)
        mon.use_tool_id(tool, "ember-bytecode-test")
        try:
            mon.register_callback(tool, mon.events.INSTRUCTION, lambda code, off: seen.append((code, off)))
            codes = code_objects(fn.__code__)
            for code in codes:
                mon.set_local_events(tool, code, mon.events.INSTRUCTION)
            fn(*args)
            for code in codes:
                mon.set_local_events(tool, code, 0)
        finally:
            mon.register_callback(tool, mon.events.INSTRUCTION, None)
            mon.free_tool_id(tool)
    else:
        codes = set(code_objects(fn.__code__))

        def tracer(frame, event, arg):
            if frame.f_code in codes:
                frame.f_trace_opcodes = True
                if event == "opcode":
                    seen.append((frame.f_code, frame.f_lasti))
            return tracer

        sys.settrace(tracer)
        try:
            fn(*args)
        finally:
            sys.settrace(None)
    return seen


@pytest.mark.parametrize("fn,args", corpus.LOOPS, ids=[f.__name__ for f, _ in corpus.LOOPS])
def test_for_iter_exhaustion_target_matches_execution(fn, args):
    seen = _trace_offsets(fn, args)
    exits = 0
    for (code, offset), (next_code, next_offset) in zip(seen, seen[1:]):
        if code is not next_code:
            continue
        decoded = bc.decode(code)
        index = bc.index_at_offset(code, offset)
        following = bc.index_at_offset(code, next_offset)
        if decoded[index][KIND] != "ForIter" or following in (index, index + 1):
            continue  # not a FOR_ITER, or its EXTENDED_ARG prefix, or the iterator produced a value
        assert following == decoded[index][TARGET]
        exits += 1
    assert exits > 0


def test_specialised_code_decodes_as_fresh_code():
    # After warm-up CPython rewrites the in-memory bytecode (BINARY_OP_ADD_INT, FOR_ITER_RANGE, ...);
    # the decoder reads the de-optimised copy, so the result must not change.
    fns = [corpus.loop_range, corpus.read_global, corpus.call_method, corpus.compare_ops]
    before = [bc.decode(f.__code__) for f in fns]
    for _ in range(2000):
        corpus.loop_range(3)
        corpus.read_global(1)
        corpus.call_method([1], 1)
        corpus.compare_ops("a", "ab")
    code = corpus.loop_range.__code__
    assert code._co_code_adaptive != code.co_code, "warm-up did not specialise; the test proves nothing"
    assert [bc.decode(f.__code__) for f in fns] == before


@pytest.mark.skipif(MINOR < 12, reason="sys.monitoring instruments code from 3.12 on")
def test_instrumented_code_decodes_as_plain_code():
    code = corpus.loop_zip.__code__
    before = bc.decode(code)
    mon = sys.monitoring
    tool = next(t for t in range(6) if mon.get_tool(t) is None)
    mon.use_tool_id(tool, "ember-bytecode-test")
    try:
        mon.set_local_events(tool, code, mon.events.INSTRUCTION | mon.events.LINE | mon.events.JUMP)
        corpus.loop_zip([1], [2])
        during = bc.decode(code)
        mon.set_local_events(tool, code, 0)
    finally:
        mon.free_tool_id(tool)
    assert during == before
