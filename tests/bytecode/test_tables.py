"""The decoder's per-version opcode table, its handling of every opcode, and its refusals.

Runs on CPython 3.11, 3.12 and 3.13 without torch. Every opcode of `opcode.opmap` must have a
mapping (a kind or Unsupported) and decode without crashing inside a synthesized code object;
P0/P1 opcodes (notes/pep523.md section 5) must map to real kinds; malformed bytecode must be
refused with an error that names the problem.
"""
import dis
import opcode
import sys

import pytest

from dis_oracle import ARG_DEPENDENT, KIND_BY_NAME, MINOR
from ember._C import bytecode as bc

REAL_OPMAP = {name: number for name, number in opcode.opmap.items() if number < 256}

P0_P1 = {
    "RESUME", "NOP", "EXTENDED_ARG", "CACHE", "LOAD_FAST", "LOAD_FAST_CHECK", "STORE_FAST", "DELETE_FAST",
    "LOAD_FAST_LOAD_FAST", "STORE_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST", "LOAD_CONST", "RETURN_VALUE",
    "RETURN_CONST", "POP_TOP", "COPY", "SWAP", "PUSH_NULL", "LOAD_GLOBAL", "LOAD_ATTR", "LOAD_METHOD",
    "STORE_ATTR", "PRECALL", "KW_NAMES", "CALL", "CALL_KW", "CALL_FUNCTION_EX", "DICT_MERGE", "LIST_EXTEND",
    "BINARY_OP", "BINARY_SUBSCR", "STORE_SUBSCR", "BINARY_SLICE", "STORE_SLICE", "BUILD_SLICE",
    "BUILD_TUPLE", "BUILD_LIST", "BUILD_MAP", "BUILD_CONST_KEY_MAP", "UNPACK_SEQUENCE", "UNPACK_EX",
    "COMPARE_OP", "IS_OP", "CONTAINS_OP", "UNARY_NEGATIVE", "UNARY_NOT", "UNARY_INVERT",
    "CALL_INTRINSIC_1", "TO_BOOL", "POP_JUMP_IF_TRUE", "POP_JUMP_IF_FALSE", "POP_JUMP_IF_NONE",
    "POP_JUMP_IF_NOT_NONE", "POP_JUMP_FORWARD_IF_TRUE", "POP_JUMP_FORWARD_IF_FALSE",
    "POP_JUMP_FORWARD_IF_NONE", "POP_JUMP_FORWARD_IF_NOT_NONE", "POP_JUMP_BACKWARD_IF_TRUE",
    "POP_JUMP_BACKWARD_IF_FALSE", "POP_JUMP_BACKWARD_IF_NONE", "POP_JUMP_BACKWARD_IF_NOT_NONE",
    "JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "GET_ITER", "FOR_ITER", "END_FOR",
    "MAKE_CELL", "COPY_FREE_VARS", "LOAD_DEREF", "STORE_DEREF", "LOAD_CLOSURE", "MAKE_FUNCTION",
    "SET_FUNCTION_ATTRIBUTE", "LIST_APPEND", "MAP_ADD", "SET_ADD", "DICT_UPDATE", "LOAD_FAST_AND_CLEAR",
    "LOAD_SUPER_ATTR", "BEFORE_WITH", "WITH_EXCEPT_START", "PUSH_EXC_INFO", "POP_EXCEPT", "RERAISE",
    "CHECK_EXC_MATCH", "RAISE_VARARGS", "LOAD_ASSERTION_ERROR", "FORMAT_VALUE", "CONVERT_VALUE",
    "FORMAT_SIMPLE", "FORMAT_WITH_SPEC", "BUILD_STRING",
    # P2 that has a kind of its own
    "IMPORT_NAME", "IMPORT_FROM", "DELETE_ATTR", "DELETE_SUBSCR", "BUILD_SET", "LIST_TO_TUPLE",
    "JUMP_IF_TRUE_OR_POP", "JUMP_IF_FALSE_OR_POP",
}
PRIMARY_KIND = {"LOAD_ATTR": "LoadAttr", "CALL_INTRINSIC_1": "CallIntrinsic1", "FORMAT_VALUE": "FormatSimple",
                "LOAD_FAST_LOAD_FAST": "LoadFast", "STORE_FAST_LOAD_FAST": "StoreFast",
                "STORE_FAST_STORE_FAST": "StoreFast", "CACHE": "Nop", "EXTENDED_ARG": "Nop"}
assert set(PRIMARY_KIND) >= ARG_DEPENDENT


def _cache_count(name):
    entries = dis._inline_cache_entries
    return entries.get(name, 0) if isinstance(entries, dict) else entries[opcode.opmap[name]]


def test_every_opmap_opcode_has_a_mapping():
    rows = {number: (name, kind, rule, caches) for number, name, kind, rule, caches in bc.opcode_table()}
    assert set(rows) == set(REAL_OPMAP.values())
    for name, number in REAL_OPMAP.items():
        row_name, kind, rule, caches = rows[number]
        assert row_name == name
        assert caches == _cache_count(name), name
        want = PRIMARY_KIND.get(name, KIND_BY_NAME.get(name, "Unsupported"))
        assert kind == want, name
        assert (rule == "unsupported") == (kind == "Unsupported"), name


def test_p0_p1_opcodes_have_kinds():
    rows = {name: kind for _, name, kind, _, _ in bc.opcode_table()}
    present = P0_P1 & set(REAL_OPMAP)
    assert len(present) > 60
    assert {name for name in present if rows[name] == "Unsupported"} == set()


def test_version_rules_follow_the_interpreter():
    rules = {name: rule for _, name, _, rule, _ in bc.opcode_table()}
    assert rules["LOAD_ATTR"] == ("plain" if MINOR == 11 else "method_bit")
    assert rules["LOAD_GLOBAL"] == "null_bit"
    assert rules["COMPARE_OP"] == "compare"
    assert rules["FOR_ITER"] == "for_iter"
    assert rules.get("END_FOR", "end_for") == "end_for"
    for name, number in REAL_OPMAP.items():
        if number in dis.hasjrel and rules[name] != "unsupported":
            assert rules[name] in ("jump", "for_iter"), name


def test_version_traits_agree_with_dis():
    traits = bc.version_traits()
    assert traits["minor"] == sys.version_info[1]

    def call_global():
        return len(())

    load = next(i for i in dis.get_instructions(call_global) if i.opname == "LOAD_GLOBAL")
    # dis prints the stack effect of the NULL bit in stack order: "NULL + len" or "len + NULL".
    assert traits["null_after_callable"] == load.argrepr.endswith("+ NULL")


def _template():
    def t():
        return None
    return t.__code__


def _unit(name, arg=0):
    return bytes([opcode.opmap[name], arg])


SKIP_SYNTHESIS = ("INSTRUMENTED_", "ENTER_EXECUTOR")  # need runtime state PyCode_GetCode reads


@pytest.mark.parametrize("name", sorted(REAL_OPMAP))
def test_every_opcode_decodes_in_a_synthesized_code_object(name):
    if name.startswith(SKIP_SYNTHESIS) or name in ("CACHE", "EXTENDED_ARG"):
        pytest.skip("not placeable in a code object")
    number = REAL_OPMAP[name]
    tail = _unit("NOP") * 3 + _unit("RETURN_VALUE")
    if name == "FOR_ITER" and MINOR >= 12:
        tail = _unit("END_FOR") + _unit("POP_TOP") + tail
    co_code = bytes([number, 0]) + _unit("CACHE") * _cache_count(name) + tail
    code = _template().replace(co_code=co_code, co_linetable=b"", co_exceptiontable=b"")
    got = bc.decode(code)
    assert got[0][6] == name and got[0][4] == 0
    kinds = {g[0] for g in got if g[6] == name}
    rows = {n: kind for _, n, kind, _, _ in bc.opcode_table()}
    assert rows[name] in kinds or name in ARG_DEPENDENT
    assert all(g[5] == -1 for g in got)  # empty line table: no lines
    for g in got:
        if g[3] != -1:
            assert 0 <= g[3] < len(got)


def test_extended_arg_folds_into_the_argument():
    co_code = (_unit("EXTENDED_ARG", 1) + _unit("EXTENDED_ARG", 2) + _unit("LOAD_CONST", 3)
               + _unit("RETURN_VALUE"))
    got = bc.decode(_template().replace(co_code=co_code, co_linetable=b""))
    assert [g[:2] for g in got] == [("LoadConst", (1 << 16) | (2 << 8) | 3), ("ReturnValue", 0)]
    assert got[0][4] == 0 and got[1][4] == 6
    # An EXTENDED_ARG before an opcode without argument is dropped, as CPython does.
    co_code = _unit("EXTENDED_ARG", 1) + _unit("NOP") + _unit("RETURN_VALUE")
    got = bc.decode(_template().replace(co_code=co_code, co_linetable=b""))
    assert got[0][:2] == ("Nop", 0)


def _malformed(co_code, exceptiontable=b""):
    code = _template().replace(co_code=co_code, co_linetable=b"", co_exceptiontable=exceptiontable)
    with pytest.raises(RuntimeError, match=r"malformed bytecode in _template\.<locals>\.t: ") as info:
        bc.decode(code)
    return str(info.value)


def test_jump_out_of_the_code_is_refused():
    assert "jumps out of the code" in _malformed(_unit("JUMP_FORWARD", 40) + _unit("RETURN_VALUE"))


def test_jump_into_an_instruction_is_refused():
    # JUMP_FORWARD 1 lands on the inline cache of the BINARY_OP that follows it.
    co_code = _unit("JUMP_FORWARD", 1) + _unit("BINARY_OP") + _unit("CACHE") * _cache_count("BINARY_OP")
    co_code += _unit("RETURN_VALUE")
    assert "middle of an instruction" in _malformed(co_code)


def test_trailing_extended_arg_is_refused():
    assert "EXTENDED_ARG at the end" in _malformed(_unit("RETURN_VALUE") + _unit("EXTENDED_ARG", 1))


def test_too_many_extended_args_are_refused():
    assert "more than three EXTENDED_ARG" in _malformed(_unit("EXTENDED_ARG") * 4 + _unit("NOP") + _unit("RETURN_VALUE"))


def test_stray_cache_is_refused():
    assert "stray CACHE" in _malformed(_unit("NOP") + _unit("CACHE") + _unit("RETURN_VALUE"))


@pytest.mark.skipif(MINOR < 12, reason="3.11 FOR_ITER jumps to any instruction")
def test_for_iter_must_jump_to_end_for():
    co_code = _unit("FOR_ITER") + _unit("CACHE") * _cache_count("FOR_ITER") + _unit("NOP") + _unit("RETURN_VALUE")
    assert "END_FOR" in _malformed(co_code)


def test_exception_handler_must_start_an_instruction():
    # One entry: start 0, length 1, target unit 5 (past the end), depth 0.
    table = bytes([0x80 | 0, 1, 5, 0])
    assert "exception" in _malformed(_unit("NOP") + _unit("RETURN_VALUE"), table)
    truncated = bytes([0x80 | 0, 1])
    assert "co_exceptiontable ends" in _malformed(_unit("NOP") + _unit("RETURN_VALUE"), truncated)


def test_non_code_objects_are_refused():
    with pytest.raises(TypeError, match="expected a code object, got int"):
        bc.decode(42)
    with pytest.raises(TypeError, match="expected a code object"):
        bc.exception_table(lambda: 0)
