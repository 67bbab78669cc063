"""The verifier reports each kind of structural problem, one message per problem, naming the node."""
import pytest

T4 = "f32[4]{1} cpu"
T48 = "f32[4, 8]{8, 1} cpu"


def graph(*stmts, inputs=f'%0: {T48} "x", %1: {T48} "y"', ret="return (%0)"):
    body = "".join(f"  {s}\n" for s in stmts)
    return f"graph @g({inputs}) {{\n{body}  {ret}\n}}\n"


VALID = [
    graph(),
    graph(f"%2 = add(%0, %1) : {T48}", f"%3 = where(%2, %0, %1) : {T48}", ret="return (%3)"),
    graph(f"%2 = gather(%0, 1, %1) : {T48}", f"%3 = index_select(%0, 0, %1) : {T48}"),
    graph(f"%2 = cat([%0, %1], 0) : f32[8, 8]{{8, 1}} cpu", f"%3 = stack((%0, %1)) : f32[2, 4, 8]{{32, 8, 1}} cpu"),
    graph(f"%2 = zeros([4], dtype=torch.float32) : {T4}", f"%3 = layer_norm(%0, [8], %1, None) : {T48}"),
    graph(f'%2 = torch "torch.Tensor.add_"(%0, 1) : {T48}', 'torch "torch._foreach_mul_"([%0, %1], 2.0)'),
    graph(f'%2 = torch "anything.at.all"() : {T48}', ret="return (%2, %2, %0)"),
    graph(f"%3 = neg(%0) : {T48}", f"%4 = abs(%2) : {T48}", inputs=f'%0: {T48} "x", %1: {T48} "y", %2: {T48} "z"'),
    "symbol s0 hint=4\nsymbol s1 hint=3 range=[2, 64] divisor=1\n" +
    graph(f"%2 = neg(%0) : f32[s0, 0]{{s1, 1}} cpu", f"%3 = view(%0, [sym(s0*s1)]) : f32[s0*s1]{{1}} cpu",
          inputs='%0: f32[s0, s1]{s1, 1} cpu "x", %1: f32[]{} cpu "n"'),
]


@pytest.mark.parametrize("text", VALID, ids=range(len(VALID)))
def test_valid_graphs_verify_cleanly(ir, text):
    assert ir.verify(ir.parse(text)) == []


ERRORS = [
    # (text, the one expected message's substring)
    (graph(f"%3 = neg(%0) : {T48}"), "%2 is never defined, but a later id is: value ids must be dense"),
    (graph(f"%2 = add(%0, %3) : {T48}", f"%3 = neg(%0) : {T48}"),
     "node 0 (add): argument 1 uses %3 before its definition"),
    (graph(f"%2 = neg(%2) : {T48}"), "node 0 (neg): argument 0 uses %2 before its definition"),
    (graph(f"%2 = neg(%7) : {T48}"), "node 0 (neg): argument 0 uses %7, which is never defined"),
    (graph(f"%2 = cat([%0, %9]) : {T48}"), "node 0 (cat): argument 0 uses %9, which is never defined"),
    (graph(f"%2 = clamp(%0, max=%5) : {T48}"), "node 0 (clamp): keyword argument max uses %5, which is never defined"),
    (graph(ret="return (%0, %4)"), "the graph returns %4, which is never defined"),
    (graph(f"%2 = neg(%0) : f32[4, 8]{{1}} cpu"), "node 0 (neg) result %2 has type f32[4, 8]{1} cpu with 2 sizes but 1 strides"),
    (graph(inputs=f'%0: f32[4]{{}} cpu "x"'), "graph input %0 has type f32[4]{} cpu with 1 sizes but 0 strides"),
    (graph(f"%2 = neg(%0) : f32[4, -3]{{1, 1}} cpu"), "node 0 (neg) result %2 has the negative size -3 in dimension 1"),
    (graph(f"%2 = add(%0) : {T48}"), "node 0 (add): add takes 2 operands, found 1"),
    (graph(f"%2 = add(1.0, %0) : {T48}"), "node 0 (add): the first argument of add must be a tensor operand"),
    (graph(f"%2 = where(%0, %1) : {T48}"), "node 0 (where): where takes 3 operands, found 2"),
    (graph(f"%2 = neg() : {T48}"), "node 0 (neg): neg takes 1 operand, found 0"),
    (graph(f"%2 = gather(1, %0, %1) : {T48}"), "node 0 (gather): the first argument of gather must be a tensor operand"),
    (graph(f"%2 = cat(%0, %1) : {T48}"), "node 0 (cat): cat takes a non-empty list of tensors (%N) as its first argument"),
    (graph(f"%2 = stack([]) : {T48}"), "node 0 (stack): stack takes a non-empty list of tensors"),
    (graph(f'%2 = torch "torch.Tensor.mul_"(2, %0) : {T48}'),
     'node 0 (torch "torch.Tensor.mul_"): an in-place op writes its first argument, which must be a tensor'),
    (graph('torch "operator.setitem"()'), 'node 0 (torch "operator.setitem"): an in-place op writes its first argument'),
    (graph(f"%3 = neg(%0) : {T48}", f"%2 = neg(%1) : {T48}", ret="return (%2, %3)"),
     "node 1 (neg): result %2 has a lower id than %3, defined before it: results are numbered in the order"),
    (graph(f"%3, %2 = split(%0, 2) : tuple({T48}, {T48})", ret="return (%2, %3)"),
     "node 0 (split): result %2 has a lower id than %3"),
    # Symbols: declared once, each a dim of some input (where the runtime reads it), and every one
    # a type or a symbolic int mentions is declared.
    ("symbol s0 hint=4\n" + graph(inputs=f'%0: {T48} "x"'), "symbol s0 is not a dimension of any graph input"),
    (graph(f"%2 = neg(%0) : f32[s2]{{1}} cpu"), "node 0 (neg) result %2 has type f32[s2]{1} cpu, which mentions the undeclared symbol s2"),
    ("symbol s0 hint=4\n" + graph(f"%1 = view(%0, [sym(s0*s5)]) : f32[s0]{{1}} cpu", inputs='%0: f32[s0]{1} cpu "x"'),
     "node 0 (view): argument 1 mentions the undeclared symbol s5"),
]


@pytest.mark.parametrize("text,expected", ERRORS, ids=[e[1][:48] for e in ERRORS])
def test_verify_reports_each_problem(ir, text, expected):
    messages = ir.verify(ir.parse(text))
    assert len(messages) == 1, messages
    assert expected in messages[0], messages


def test_verify_reports_every_problem_in_order(ir):
    text = graph(f"%2 = add(%0) : {T48}", f"%3 = neg(%9) : f32[-1]{{1}} cpu", f"%4 = cat(%2) : {T48}",
                 ret="return (%8)")
    messages = ir.verify(ir.parse(text))
    assert [m.split(":")[0] for m in messages] == [
        "node 0 (add)", "node 1 (neg)", "node 1 (neg) result %3 has the negative size -1 in dimension 0",
        "node 2 (cat)", "the graph returns %8, which is never defined"]


def test_malformed_graphs_still_print_as_written(ir):
    text = graph(f"%3 = neg(%9) : {T48}", ret="return (%7)")
    g = ir.parse(text)
    assert ir.verify(g)
    assert ir.print(g) == text
