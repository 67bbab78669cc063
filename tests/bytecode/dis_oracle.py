"""What Ember's decoder should produce for a code object, derived from `dis` independently of it.

`expected(code)` walks `dis.get_instructions` and states, per real CPython instruction, the Ember
kind(s), argument check, jump target offset and line that the decoder must report. Arguments are
checked through dis' *resolved* values (names, constants, operators) where dis gives them, so a
bit-field mistake in the decoder cannot be mirrored here.
"""
import dis
import sys

MINOR = sys.version_info[1]

# CPython opcode name -> Ember kind, for the opcodes whose kind does not depend on the argument.
KIND_BY_NAME = {
    "RETURN_GENERATOR": "ReturnGenerator", "YIELD_VALUE": "YieldValue",
    "NOP": "Nop", "RESUME": "Nop", "PRECALL": "Nop",
    "LOAD_FAST": "LoadFast", "LOAD_FAST_CHECK": "LoadFast", "LOAD_FAST_AND_CLEAR": "LoadFastAndClear",
    "STORE_FAST": "StoreFast", "DELETE_FAST": "DeleteFast", "LOAD_CONST": "LoadConst",
    "LOAD_GLOBAL": "LoadGlobal", "STORE_GLOBAL": "StoreGlobal", "LOAD_NAME": "LoadName",
    "LOAD_METHOD": "LoadMethod", "LOAD_SUPER_ATTR": "LoadSuperAttr", "STORE_ATTR": "StoreAttr",
    "DELETE_ATTR": "DeleteAttr", "LOAD_DEREF": "LoadDeref", "STORE_DEREF": "StoreDeref",
    "LOAD_CLOSURE": "LoadClosure", "MAKE_CELL": "MakeCell", "COPY_FREE_VARS": "CopyFreeVars",
    "RETURN_VALUE": "ReturnValue", "RETURN_CONST": "ReturnConst", "POP_TOP": "PopTop", "END_FOR": "PopN",
    "COPY": "Copy", "SWAP": "Swap", "PUSH_NULL": "PushNull", "KW_NAMES": "KwNames", "CALL": "Call",
    "CALL_KW": "CallKw", "CALL_FUNCTION_EX": "CallFunctionEx", "MAKE_FUNCTION": "MakeFunction",
    "SET_FUNCTION_ATTRIBUTE": "SetFunctionAttribute", "BINARY_OP": "BinaryOp",
    "BINARY_SUBSCR": "BinarySubscr", "STORE_SUBSCR": "StoreSubscr", "DELETE_SUBSCR": "DeleteSubscr",
    "BINARY_SLICE": "BinarySlice", "STORE_SLICE": "StoreSlice", "BUILD_SLICE": "BuildSlice",
    "BUILD_TUPLE": "BuildTuple", "BUILD_LIST": "BuildList", "BUILD_SET": "BuildSet", "BUILD_MAP": "BuildMap",
    "BUILD_CONST_KEY_MAP": "BuildConstKeyMap", "BUILD_STRING": "BuildString", "LIST_APPEND": "ListAppend",
    "LIST_EXTEND": "ListExtend", "SET_ADD": "SetAdd", "SET_UPDATE": "SetUpdate", "MAP_ADD": "MapAdd",
    "DICT_UPDATE": "DictUpdate", "DICT_MERGE": "DictMerge", "LIST_TO_TUPLE": "ListToTuple",
    "UNPACK_SEQUENCE": "UnpackSequence", "UNPACK_EX": "UnpackEx", "COMPARE_OP": "CompareOp",
    "IS_OP": "IsOp", "CONTAINS_OP": "ContainsOp", "UNARY_NEGATIVE": "UnaryNegative",
    "UNARY_POSITIVE": "UnaryPositive", "UNARY_NOT": "UnaryNot", "UNARY_INVERT": "UnaryInvert",
    "TO_BOOL": "ToBool",
    "POP_JUMP_IF_TRUE": "PopJumpIfTrue", "POP_JUMP_FORWARD_IF_TRUE": "PopJumpIfTrue",
    "POP_JUMP_BACKWARD_IF_TRUE": "PopJumpIfTrue",
    "POP_JUMP_IF_FALSE": "PopJumpIfFalse", "POP_JUMP_FORWARD_IF_FALSE": "PopJumpIfFalse",
    "POP_JUMP_BACKWARD_IF_FALSE": "PopJumpIfFalse",
    "POP_JUMP_IF_NONE": "PopJumpIfNone", "POP_JUMP_FORWARD_IF_NONE": "PopJumpIfNone",
    "POP_JUMP_BACKWARD_IF_NONE": "PopJumpIfNone",
    "POP_JUMP_IF_NOT_NONE": "PopJumpIfNotNone", "POP_JUMP_FORWARD_IF_NOT_NONE": "PopJumpIfNotNone",
    "POP_JUMP_BACKWARD_IF_NOT_NONE": "PopJumpIfNotNone",
    "JUMP_IF_TRUE_OR_POP": "JumpIfTrueOrPop", "JUMP_IF_FALSE_OR_POP": "JumpIfFalseOrPop",
    "JUMP_FORWARD": "Jump", "JUMP_BACKWARD": "Jump", "JUMP_BACKWARD_NO_INTERRUPT": "Jump",
    "GET_ITER": "GetIter", "FOR_ITER": "ForIter", "BEFORE_WITH": "BeforeWith",
    "WITH_EXCEPT_START": "WithExceptStart", "PUSH_EXC_INFO": "PushExcInfo", "POP_EXCEPT": "PopExcept",
    "RERAISE": "Reraise", "CHECK_EXC_MATCH": "CheckExcMatch", "RAISE_VARARGS": "RaiseVarargs",
    "LOAD_ASSERTION_ERROR": "LoadAssertionError", "FORMAT_SIMPLE": "FormatSimple",
    "FORMAT_WITH_SPEC": "FormatWithSpec", "CONVERT_VALUE": "ConvertValue", "IMPORT_NAME": "ImportName",
    "IMPORT_FROM": "ImportFrom", "GET_LEN": "GetLen",
}
# Kinds chosen per instruction by the decoding rules rather than by name alone.
ARG_DEPENDENT = {"LOAD_ATTR", "CALL_INTRINSIC_1", "FORMAT_VALUE",
                 "LOAD_FAST_LOAD_FAST", "STORE_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST"}

LOCAL_OPS = {"LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR", "STORE_FAST", "DELETE_FAST",
             "LOAD_DEREF", "STORE_DEREF", "LOAD_CLOSURE", "MAKE_CELL"}
NAME_OPS = {"STORE_GLOBAL", "LOAD_NAME", "LOAD_METHOD", "STORE_ATTR", "DELETE_ATTR", "IMPORT_NAME",
            "IMPORT_FROM"}
CONVERSIONS = {None: 0, str: 1, repr: 2, ascii: 3}
# 3.13 fused fast-local ops: the two instructions each becomes, in execution order.
FUSED = {"LOAD_FAST_LOAD_FAST": ("LoadFast", "LoadFast"),
         "STORE_FAST_LOAD_FAST": ("StoreFast", "LoadFast"),
         "STORE_FAST_STORE_FAST": ("StoreFast", "StoreFast")}


class Expect:
    """One Ember instruction the decoder must produce."""

    def __init__(self, ins, offset, kind, check_arg, arg2=0, target=None, skip_after_target=0):
        self.opname = ins.opname
        self.offset = offset
        self.kind = kind
        self.check_arg = check_arg          # callable(arg) -> bool
        self.arg2 = arg2
        self.target = target                # byte offset dis gives, or None
        self.skip_after_target = skip_after_target
        line = ins.positions.lineno if ins.positions is not None else None
        self.line = -1 if line is None else line
        self.ins = ins


def _eq(value):
    return lambda arg: arg == value


def expected(code):
    """Expected Ember instructions for `code`, in order."""
    out = []
    prefix = None
    for ins in dis.get_instructions(code):
        if ins.opname == "EXTENDED_ARG":
            prefix = ins.offset if prefix is None else prefix
            continue
        start = ins.offset if prefix is None else prefix
        prefix = None
        out.extend(_expand(code, ins, start))
    return out


def _local_name(code, i):
    return code._varname_from_oparg(i)


def _expand(code, ins, offset):
    name = ins.opname
    raw = ins.arg if ins.arg is not None else 0
    if name in LOCAL_OPS:
        return [Expect(ins, offset, KIND_BY_NAME[name], lambda a: _local_name(code, a) == ins.argval)]
    if name in NAME_OPS:
        return [Expect(ins, offset, KIND_BY_NAME[name], lambda a: code.co_names[a] == ins.argval)]
    if name in ("LOAD_CONST", "RETURN_CONST"):
        return [Expect(ins, offset, KIND_BY_NAME[name], lambda a: code.co_consts[a] is ins.argval)]
    if name == "LOAD_GLOBAL":
        return [Expect(ins, offset, "LoadGlobal", lambda a: code.co_names[a] == ins.argval,
                       arg2=int("NULL" in ins.argrepr))]
    if name == "LOAD_ATTR":
        method = "NULL|self" in ins.argrepr  # only 3.12+ prints it
        return [Expect(ins, offset, "LoadMethod" if method else "LoadAttr",
                       lambda a: code.co_names[a] == ins.argval)]
    if name == "LOAD_SUPER_ATTR":
        method = int("NULL|self" in ins.argrepr)
        two_arg = (raw >> 1) & 1
        return [Expect(ins, offset, "LoadSuperAttr", lambda a: code.co_names[a] == ins.argval,
                       arg2=method | two_arg << 1)]
    if name == "COMPARE_OP":
        return [Expect(ins, offset, "CompareOp", lambda a: dis.cmp_op[a] == ins.argval,
                       arg2=int(ins.argrepr.startswith("bool(")))]
    if name in FUSED:
        first, second = FUSED[name]
        n1, n2 = ins.argval
        return [Expect(ins, offset, first, lambda a: _local_name(code, a) == n1),
                Expect(ins, offset, second, lambda a: _local_name(code, a) == n2)]
    if name == "FORMAT_VALUE":
        conversion, with_spec = ins.argval
        out = []
        if conversion is not None:
            out.append(Expect(ins, offset, "ConvertValue", _eq(CONVERSIONS[conversion]), arg2=int(with_spec)))
        out.append(Expect(ins, offset, "FormatWithSpec" if with_spec else "FormatSimple", _eq(0)))
        return out
    if name == "CONVERT_VALUE":
        return [Expect(ins, offset, "ConvertValue", _eq(CONVERSIONS[ins.argval]))]
    if name == "CALL_INTRINSIC_1":
        if ins.argrepr == "INTRINSIC_UNARY_POSITIVE":
            return [Expect(ins, offset, "UnaryPositive", _eq(0))]
        if ins.argrepr == "INTRINSIC_LIST_TO_TUPLE":
            return [Expect(ins, offset, "ListToTuple", _eq(0))]
        return [Expect(ins, offset, "CallIntrinsic1", _eq(raw))]
    if name == "END_FOR":
        return [Expect(ins, offset, "PopN", _eq({12: 2, 13: 1}[MINOR]))]
    if name == "FOR_ITER":
        # Exhausted: pop the iterator and continue after END_FOR (3.12) or END_FOR + POP_TOP (3.13).
        return [Expect(ins, offset, "ForIter", _eq(0), target=ins.argval,
                       skip_after_target={11: 0, 12: 1, 13: 2}[MINOR])]
    if ins.opcode in dis.hasjrel:
        kind = KIND_BY_NAME.get(name, "Unsupported")
        if kind == "Unsupported":
            return [Expect(ins, offset, kind, _eq(raw))]
        return [Expect(ins, offset, kind, _eq(0), target=ins.argval)]
    if name == "CALL_FUNCTION_EX":
        return [Expect(ins, offset, "CallFunctionEx", _eq(raw & 1))]
    kind = KIND_BY_NAME.get(name, "Unsupported")
    return [Expect(ins, offset, kind, _eq(raw))]


def code_objects(root):
    """`root` and every code object nested in its constants, depth first."""
    out = [root]
    for const in root.co_consts:
        if hasattr(const, "co_code"):
            out.extend(code_objects(const))
    return out
