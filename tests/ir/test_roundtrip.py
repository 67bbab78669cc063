"""Graph IR text: print(parse(text)) == text for canonical text; liberal text prints canonically."""
import math
import random
import re
import struct
from pathlib import Path

import pytest

T4 = "f32[4]{1} cpu"

ROUND_TRIP = {
    "header_example": """\
graph @forward(%0: f32[4, 8]{8, 1} cpu "L['x']", %1: f32[8, 8]{8, 1} cpu grad "L['self'].w") {
  %2 = matmul(%0, %1) : f32[4, 8]{8, 1} cpu grad
  %3 = torch "torch.nn.functional.gelu"(%2, approximate="tanh") : f32[4, 8]{8, 1} cpu grad
  return (%3)
}
""",
    "empty": """\
graph @empty() {
  return ()
}
""",
    "factory_without_inputs": """\
graph @make() {
  %0 = zeros([2, 3], dtype=torch.float16, device=device("cuda:0")) : f16[2, 3]{3, 1} cuda:0
  %1 = arange(0, 6, 2, dtype=torch.int64) : i64[3]{1} cpu
  return (%0, %1)
}
""",
    "symbolic_shapes": """\
symbol s0 hint=16
symbol s1 hint=3 range=[2, 4096]
graph @dyn(%0: f32[s0, s1]{s1, 1} cpu "L['x']") {
  %1 = reshape(%0, [-1]) : f32[s0*s1]{1} cpu
  %2 = torch "torch.ops.test.pool"(%0) : f32[s0 // 2, (s1 + -1) // 2 + 1]{(s1 + -1) // 2 + 1, 1} cpu
  %3 = torch "torch.ops.test.pad"(%0) : f32[max(4, s0), s1 % 8 + min(s0, s1)]{s1 % 8 + min(s0, s1), 1} cpu
  %4 = torch "torch.ops.test.strided"(%0) : f32[s0, 2]{2*s1, -1} cpu
  %5 = view(%0, [sym(s0), -1, sym(s1 // 2)]) : f32[s0, 2, s1 // 2]{s1, s1 // 2, 1} cpu
  return (%1, %2, %3, %4, %5)
}
""",
    "result_forms": f"""\
graph @forms(%0: {T4} "L['x']") {{
  %1, %2 = split(%0, 2) : tuple(f32[2]{{1}} cpu, f32[2]{{1}} cpu)
  %3, %4 = torch "torch.unbind"(%1) : list(f32[]{{}} cpu, f32[]{{}} cpu)
  %5 = torch "torch.ops.test.one"(%2) : tuple(f32[2]{{1}} cpu)
  torch "torch.ops.test.nothing"(%5) : tuple()
  torch "operator.setitem"(%0, 0, %3)
  torch "torch._foreach_zero_"([%1, %2])
  return (%0, %3)
}}
""",
    "all_dtypes": "graph @dtypes(" + ", ".join(
        f'%{i}: {dt}[2]{{1}} cpu "L[{i}]"' for i, dt in enumerate(
            ["b8", "u8", "i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64", "c64", "c128",
             "f8e4m3fn", "f8e5m2"])) + ") {\n  return (%13)\n}\n",
    "devices_and_grad": """\
graph @devs(%0: f32[1]{1} cuda:0 "a", %1: f32[1]{1} cuda:7 grad "b", %2: f32[1]{1} meta "c", %3: f32[1]{1} mps grad "d", %4: f32[]{} privateuseone:2 "e") {
  return (%0, %1, %2, %3, %4)
}
""",
    "literals": f"""\
graph @lits(%0: {T4} "L['x']") {{
  %1 = torch "torch.ops.test.f"(%0, None, True, False, 0, -1, 42, 1.0, -2.5, 0.1, 1e-05, 1e+100, inf, -inf, nan, -nan, -0.0) : {T4}
  %2 = torch "torch.ops.test.g"(%1, "", "a b", "q\\"q", "b\\\\s", "\\n\\t\\r", "\\x00\\x1b\\x7f", "ünï") : {T4}
  %3 = torch "torch.ops.test.h"(%2, torch.float64, torch.complex64, torch.uint8, device("cpu"), device("cuda:3"), ..., slice(None, None, None), slice(-3, 10, -1)) : {T4}
  %4 = torch "torch.ops.test.i"(%3, [], (), (%0,), (1, 2), [[1, 2], [3, (4,)]], k=[%1, %2], none=None, e=...) : {T4}
  return (%4)
}}
""",
    "quoted_graph_name": """\
graph @"<lambda> \\"q\\""() {
  return ()
}
""",
    "interleaved_input_ids": f"""\
graph @lifted(%0: {T4} "L['x']", %2: {T4} "L['self'].b") {{
  %1 = exp(%0) : {T4}
  %3 = add(%1, %2) : {T4}
  return (%3)
}}
""",
    "in_place_and_views": f"""\
graph @inplace(%0: f32[2, 3]{{3, 1}} cpu "L['x']") {{
  %1 = transpose(%0, 0, 1) : f32[3, 2]{{1, 3}} cpu
  %2 = torch "torch.Tensor.mul_"(%1, 2) : f32[3, 2]{{1, 3}} cpu
  %3 = getitem(%0, (slice(None, None, None), 1)) : f32[2]{{3}} cpu
  %4 = torch "torch.Tensor.__iadd__"(%3, 1.5) : f32[2]{{3}} cpu
  return (%0)
}}
""",
    "every_core_op_name": "",  # filled below
}


def _every_core_op():
    ops_def = Path(__file__).resolve().parents[2] / "src" / "ir" / "ops.def"
    ops = re.findall(r'EMBER_OP\(\w+, "(\w+)", "[\w.]+", (-?\d+)', ops_def.read_text())
    lines, next_id = [], 2
    for name, arity in ops:
        arity = int(arity)
        args = "[%0, %1]" if arity < 0 else ", ".join(["%0", "%1", "%0"][:arity])
        lines.append(f"  %{next_id} = {name}({args}) : {T4}")
        next_id += 1
    assert len(ops) > 70
    return (f'graph @ops(%0: {T4} "L[0]", %1: {T4} "L[1]") {{\n' + "\n".join(lines)
            + f"\n  return (%{next_id - 1})\n}}\n")


ROUND_TRIP["every_core_op_name"] = _every_core_op()


@pytest.mark.parametrize("name", sorted(ROUND_TRIP))
def test_print_parse_round_trip(ir, name):
    text = ROUND_TRIP[name]
    assert ir.print(ir.parse(text)) == text


@pytest.mark.parametrize("name", sorted(ROUND_TRIP))
def test_round_trip_graphs_verify(ir, name):
    assert ir.verify(ir.parse(ROUND_TRIP[name])) == []


CANONICAL = [
    # (liberal input, canonical output) for one statement in a graph with input %0: f32[4]{1} cpu
    ("%1 = neg(  %0 )   :   f32[ 4 ]{ 1 }   cpu", f"%1 = neg(%0) : {T4}"),
    ("%1 = neg(%0) : f32[2 + 2]{4 // 4} cpu", f"%1 = neg(%0) : {T4}"),
    ("%1 = neg(%0) : f32[s0 + s0 - s0]{s1*0 + 1} cpu", "%1 = neg(%0) : f32[s0]{1} cpu"),
    ("%1 = neg(%0) : f32[(s0 + 1)*3]{1} cpu", "%1 = neg(%0) : f32[3*s0 + 3]{1} cpu"),
    ("%1 = torch \"f\"(%0, torch.float, torch.double, torch.half, torch.long, torch.int) : " + T4,
     "%1 = torch \"f\"(%0, torch.float32, torch.float64, torch.float16, torch.int64, torch.int32) : " + T4),
    ("%1 = torch \"f\"(%0, 1E2, 0.50, 1.25e-3, 3., 0.10000000000000001) : " + T4,
     "%1 = torch \"f\"(%0, 100.0, 0.5, 0.00125, 3.0, 0.1) : " + T4),
    ("%1 = torch \"f\"(%0, \"\\x41\") : " + T4, "%1 = torch \"f\"(%0, \"A\") : " + T4),
    ("%1 = torch \"f\"(%0, \"\\xc3\\xa9\", \"\\xc3\", \"\\xed\\xa0\\x80\", \"\\xf0\\x9f\\x94\\xa5\") : " + T4,
     "%1 = torch \"f\"(%0, \"\u00e9\", \"\\xc3\", \"\\xed\\xa0\\x80\", \"\U0001f525\") : " + T4),
    ("%1 = neg(%0) : f32[4]{1} cpu  // comment\n  // another", f"%1 = neg(%0) : {T4}"),
    ("%1, %2 = split(%0,2):tuple(f32[2]{1} cpu,f32[2]{1} cpu)",
     "%1, %2 = split(%0, 2) : tuple(f32[2]{1} cpu, f32[2]{1} cpu)"),
]


@pytest.mark.parametrize("liberal,canonical", CANONICAL)
def test_liberal_text_prints_canonically(ir, liberal, canonical):
    def graph(stmt):
        return f'graph @g(%0: {T4} "x") {{\n  {stmt}\n  return (%0)\n}}\n'
    assert ir.print(ir.parse(graph(liberal))) == graph(canonical)


def _bits(x):
    return struct.pack("<d", x)


def test_floats_round_trip_exactly(ir):
    seed = 20240607
    rng = random.Random(seed)
    values = [0.0, -0.0, 5e-324, -5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 1e15, 1e16,
              123456789.0, 0.1 + 0.2, 1 / 3, math.pi, float("inf"), float("-inf")]
    values += [struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0] for _ in range(300)]
    values += [rng.uniform(-1e6, 1e6) for _ in range(200)]
    args = ", ".join(repr(v) for v in values)
    text = f'graph @floats(%0: {T4} "x") {{\n  %1 = torch "f"(%0, {args}) : {T4}\n  return (%1)\n}}\n'
    printed = ir.print(ir.parse(text))
    tokens = printed.split("(%0, ", 1)[1].split(") : ", 1)[0].split(", ")
    assert len(tokens) == len(values), f"seed {seed}"
    for value, token in zip(values, tokens):
        assert re.search(r"[.e]|inf|nan", token), token  # always reads back as a float
        back = float(token)
        if math.isnan(value):
            assert math.isnan(back), f"seed {seed}: {value!r} printed {token}"
        else:
            assert _bits(back) == _bits(value), f"seed {seed}: {value!r} printed {token}"
    assert ir.print(ir.parse(printed)) == printed


def test_ints_round_trip_at_the_limits(ir):
    text = (f'graph @ints(%0: {T4} "x") {{\n  %1 = torch "f"(%0, 9223372036854775807, -9223372036854775808, 0, -0)'
            f' : {T4}\n  return (%1)\n}}\n')
    assert "9223372036854775807, -9223372036854775808, 0, 0)" in ir.print(ir.parse(text))


def test_parse_returns_an_opaque_handle(ir):
    g = ir.parse(ROUND_TRIP["header_example"])
    assert type(g).__name__ == "Graph"
    with pytest.raises(TypeError):
        ir.print("not a graph")
