"""The verifier's check of node types against the shape rules (src/shapes/check_types.h).

Every golden program, before and after its passes, must agree with the rules wherever a rule
answers: the trace records the rules' (or torch's meta kernels') types, and the passes must
compute the same types by hand. One golden file writes types that torch would not give (it tests
the verifier's report of them); the check must find exactly those nodes, so a check that never
fails fails here.
"""
import sys
from pathlib import Path

import pytest

from ember._C import ir, shapes

GOLDEN_DIR = Path(__file__).resolve().parents[1] / "golden"
sys.path.insert(0, str(GOLDEN_DIR))
import golden  # noqa: E402

# Types written by hand in golden inputs that no rule would give: (file, message start).
HAND_WRITTEN = {"verify_types.ir": ["node 0 (add): recorded f64[4, 8]", "node 1 (sum): recorded f32[4, 1]"]}


def graphs(path):
    """The input program and the expected output of a golden file, where each is a graph."""
    text = path.read_text()
    source = "\n".join(line for line in text.splitlines() if not line.startswith("//"))
    _, checks, _ = golden.load(path)
    for name, body in (("input", source), ("output", "\n".join(checks))):
        if "graph @" not in body:
            continue
        try:
            graph = ir.parse(body)
        except ir.ParseError:
            continue  # the parser's own error tests
        if not ir.verify(graph):
            yield name, graph


@pytest.mark.parametrize("path", sorted(GOLDEN_DIR.glob("*.ir")), ids=lambda p: p.name)
def test_golden_graphs_agree_with_rules(path):
    for name, graph in graphs(path):
        problems = shapes.check_node_types(graph)
        expected = HAND_WRITTEN.get(path.name)
        if expected:
            assert len(problems) == len(expected), (name, problems)
            assert all(p.startswith(e) for p, e in zip(problems, expected)), (name, problems)
        else:
            assert problems == [], (name, problems)


def test_wrong_type_is_reported():
    graph = ir.parse("""graph @g(%0: f32[4, 8]{8, 1} cpu "L['x']", %1: f32[8]{1} cpu "L['y']") {
  %2 = add(%0, %1) : f32[4, 8]{8, 1} cpu
  %3 = add(%0, %1) : f64[4, 8]{8, 1} cpu
  %4 = sum(%0, [1]) : f32[4, 1]{1, 1} cpu
  return (%2, %3, %4)
}""")
    problems = shapes.check_node_types(graph)
    assert len(problems) == 2, problems
    assert problems[0].startswith("node 1 (add): recorded f64[4, 8]"), problems
    assert problems[1].startswith("node 2 (sum): recorded f32[4, 1]"), problems


def test_symbolic_sizes():
    # Rules answer symbolic sizes (split along a static dim too), so a wrong dtype or size is found.
    graph = ir.parse("""graph @g(%0: f32[s0, 8]{8, 1} cpu "L['x']") {
  %1 = add(%0, %0) : f64[s0, 8]{8, 1} cpu
  %2 = reshape(%0, [-1]) : f32[7]{1} cpu
  %3, %4 = split(%0, 4, 1) : tuple(f32[7]{1} cpu, f32[7]{1} cpu)
  return (%1, %2, %3, %4)
}""")
    problems = shapes.check_node_types(graph)
    assert len(problems) == 3, problems
    assert problems[0].startswith("node 0 (add): recorded f64[s0, 8]"), problems
    assert problems[1].startswith("node 1 (reshape): recorded f32[7]{1} cpu, its shape rule gives f32[8*s0]"), problems
    assert problems[2].startswith("node 2 (split): recorded f32[7]{1} cpu, f32[7]{1} cpu, its shape rule gives f32[s0, 4]"), problems


def test_a_factory_without_a_device_keeps_the_recorded_one():
    # torch.arange(n) under `with torch.device("cuda")`: the default device is the trace's to resolve, so the
    # rule's answer is compared without it; a device named in the call is compared, as is every other part.
    graph = ir.parse("""graph @g() {
  %0 = arange(2) : i64[2]{1} cuda:0
  %1 = arange(3, device=device("cpu")) : i64[3]{1} cuda:0
  %2 = arange(4) : i32[4]{1} cuda:0
  return (%0, %1, %2)
}""")
    problems = shapes.check_node_types(graph)
    assert len(problems) == 2, problems
    assert problems[0].startswith("node 1 (arange): recorded i64[3]{1} cuda:0, its shape rule gives i64[3]{1} cpu")
    assert problems[1].startswith("node 2 (arange): recorded i32[4]"), problems
