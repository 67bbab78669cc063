"""Derivative rules, table-driven (src/autograd/vjp.def; issue 13): each case of cases.py is compiled
with ember.compile and called with float64 inputs that require grad; its outputs and the gradient of
every input must match eager's, the rule must not fall back to an autograd island, and
torch.autograd.gradcheck must pass on the compiled function. The fused rules run again in float32
and bfloat16 under DESIGN.md's accuracy rule."""
import re
import subprocess
from pathlib import Path

import pytest
import torch

import ember

from .cases import ALL, FUSED, FUSED_ATTENTION

# mse_loss warns when target and input broadcast, which a case does on purpose.
pytestmark = pytest.mark.filterwarnings("ignore:Using a target size:UserWarning")

REPO = Path(__file__).resolve().parents[2]
EMBER_OPT = REPO / "build" / "py311" / "ember-opt"
BY_NAME = {c.name: c for c in ALL}


def floating_tensors(value):
    if isinstance(value, torch.Tensor):
        return [value] if value.is_floating_point() else []
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in floating_tensors(item)]
    return []


def make_inputs(case, dtype=torch.float64):
    torch.manual_seed(0)
    return case.inputs(dtype)


def outputs_and_grads(fn, args):
    """The floating outputs of fn(*args) and the gradients of the inputs that require grad, for a
    fixed random weighting of the outputs (None where torch gives none)."""
    outs = floating_tensors(fn(*args))
    leaves = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    gen = torch.Generator().manual_seed(1)
    weights = [torch.randn(o.shape, generator=gen, dtype=torch.float64).to(o.dtype) for o in outs]
    grads = torch.autograd.grad(outs, leaves, weights, allow_unused=True)
    return [o.detach() for o in outs], list(grads)


def captured_graph(fn, args):
    out = ember.explain(fn)(*args)
    assert out.graph_count == 1 and out.graph_break_count == 0, str(out)
    assert out.backend_fallbacks == [""], out.backend_fallbacks
    return out.graphs[0]


def contains(graph_text, entry):
    if "." in entry:  # a torch call's callable
        return f'torch "{entry}"(' in graph_text
    return re.search(rf"= {OP_NAMES[entry]}\(", graph_text) is not None


def joint_forward(graph_text, tmp_path, exact_random=False):
    """The joint graph's lines before the first that reads a tangent: the forward as the rules see it."""
    path = tmp_path / "captured.ir"
    path.write_text(graph_text)
    flags = ["--exact-random"] if exact_random else []
    run = subprocess.run([str(EMBER_OPT), *flags, "--pass", "joint", str(path)], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stderr
    tangents = re.findall(r'(%\d+): [^"]*"tangents\[', run.stdout)
    lines = run.stdout.splitlines()[2:]
    reads_tangent = [i for i, line in enumerate(lines) if any(re.search(rf"{t}\b", line) for t in tangents)]
    return "\n".join(lines[:min(reads_tangent, default=len(lines))])


def check_covers(case, graph_text, tmp_path):
    for entry in case.covers:
        if not contains(graph_text, entry):
            assert contains(joint_forward(graph_text, tmp_path, case.exact_random), entry), \
                f"{case.name} does not reach {entry}:\n{graph_text}"


def _op_names():
    text = (REPO / "src/ir/ops.def").read_text()
    return dict(re.findall(r'^EMBER_OP\((\w+), "(\w+)"', text, re.M))


OP_NAMES = _op_names()


@pytest.mark.parametrize("case", ALL, ids=lambda c: c.name)
def test_rule_matches_eager(case, tmp_path):
    args = make_inputs(case)
    graph = captured_graph(case.fn, args)
    check_covers(case, graph, tmp_path)
    ember.reset()
    compiled = ember.compile(case.fn, options={"fallback_random": True} if case.exact_random else None)
    torch.manual_seed(2)  # random ops (dropout) draw the same numbers in both runs
    outs, grads = outputs_and_grads(compiled, args)
    s = ember.stats()
    assert s["backward_graphs_compiled"] == 1, s
    assert s["autograd_islands"] == 0, s  # the rule ran; no fallback through torch autograd
    eager_args = make_inputs(case)
    torch.manual_seed(2)
    want_outs, want_grads = outputs_and_grads(case.fn, eager_args)
    torch.testing.assert_close(outs, want_outs)
    assert [g is None for g in grads] == [g is None for g in want_grads]
    torch.testing.assert_close([g for g in grads if g is not None], [g for g in want_grads if g is not None])
    if case.gradcheck:
        assert torch.autograd.gradcheck(compiled, args)
    assert ember.stats()["frames_compiled"] == 1  # gradcheck's calls hit the compiled graph


def max_error(x, ref):
    return (x.double() - ref).abs().max().item()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", FUSED)
def test_fused_rule_accuracy(name, dtype):
    """Ember's error against a float64 reference is at most twice eager's, plus 1e-6 (DESIGN.md)."""
    case = BY_NAME[name]
    low = make_inputs(case, dtype)
    ref_args = [a.detach().double().requires_grad_(a.requires_grad) if a.is_floating_point() else a for a in low]
    ref_outs, ref_grads = outputs_and_grads(case.fn, ref_args)
    eager_outs, eager_grads = outputs_and_grads(case.fn, [a.detach().requires_grad_(a.requires_grad) for a in low])
    outs, grads = outputs_and_grads(ember.compile(case.fn), low)
    s = ember.stats()
    assert s["backward_graphs_compiled"] == 1 and s["autograd_islands"] == 0, s
    for got, eager, ref in zip([*outs, *grads], [*eager_outs, *eager_grads], [*ref_outs, *ref_grads]):
        assert got.dtype == eager.dtype and got.shape == eager.shape
        assert max_error(got, ref) <= 2 * max_error(eager, ref) + 1e-6


# --- Every entry of the table has a case. ------------------------------------------------------

def table_entries():
    """(kind, name) for each line of vjp.def that a test must cover, and each torch-call rule."""
    vjp = (REPO / "src/autograd/vjp.def").read_text()
    entries = [("Rule", op) for op in re.findall(r"^EMBER_VJP_RULE\((\w+),", vjp, re.M)]
    entries += [(kind, op) for op, kind in re.findall(r"^EMBER_VJP_KIND\((\w+), (\w+)\)", vjp, re.M)
                if kind != "NonDifferentiable"]
    rules = (REPO / "src/autograd/rules_data.cpp").read_text()
    table = rules[rules.index("torch_call_rule("):]
    entries += [("torch call", name) for name in re.findall(r'\{"([^"]+)", rules::', table)]
    return entries


def test_every_table_entry_has_a_case():
    entries = table_entries()
    assert len(entries) > 60 and ("Rule", "Softmax") in entries and ("torch call", "torch.nn.functional.softmax") in entries
    covered = {entry for case in ALL for entry in case.covers} | set(FUSED_ATTENTION.values())
    missing = [f"{kind} {name}" for kind, name in entries if name not in covered]
    assert not missing, f"vjp.def / torch_call_rule entries without a case in tests/autograd/cases.py: {missing}"


# --- The rules over symbolic sizes (issue 14). ---------------------------------------------------

# Cases whose rules move sizes around (sum-to-size, unreduce, expand, element counts as divisors, linear's
# flattened rows, matmul's batch broadcast), compiled with dynamic=True: every size >= 2 is a symbol. Only cases
# whose captured graph keeps symbols (the trace specializes some forms: docs/dynamic-shapes.md); a handful, each
# a few seconds. tests/dynamic/test_dynamic_training.py runs models and more rules over several lengths.
SYMBOLIC = ["add_broadcast", "div_broadcast", "sum_dim", "amax_ties", "var", "var_mean", "softmax", "log_softmax",
            "linear", "matmul_batched_broadcast", "flatten", "tril"]


@pytest.mark.parametrize("name", SYMBOLIC)
def test_rule_over_symbolic_sizes(name):
    case = BY_NAME[name]
    args = make_inputs(case)
    explained = ember.explain(ember.compile(case.fn, dynamic=True))(*args)
    assert explained.symbol_counts[0] > 0 and explained.training == [True], explained.symbol_counts
    ember.reset()
    compiled = ember.compile(case.fn, dynamic=True)
    outs, grads = outputs_and_grads(compiled, args)
    s = ember.stats()
    assert s["backward_graphs_compiled"] == 1 and s["autograd_islands"] == 0 and s["backend_errors"] == 0, s
    want_outs, want_grads = outputs_and_grads(case.fn, make_inputs(case))
    torch.testing.assert_close(outs, want_outs)
    torch.testing.assert_close([g for g in grads if g is not None], [g for g in want_grads if g is not None])
    if case.gradcheck:
        assert torch.autograd.gradcheck(compiled, args)
    assert ember.stats()["frames_compiled"] == 1
