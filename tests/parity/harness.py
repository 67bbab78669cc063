"""Runs one parity case: eager PyTorch and an ember.compile()d copy, three calls each, compared.

Each call draws fresh inputs of the same shapes from seed i (see registry.py), seeds torch's RNG
identically for both sides, and records the output, the inputs after the call (mutations), which
outputs are the very input objects (aliasing), and the case's side-effect snapshot. Failures are
prefixed so a report can tell them apart:
  WRONG RESULT  outputs, mutated inputs or side effects differ from eager (critical); "(aliasing)"
                when values agree but an output is (or views) a different object than in eager;
  CRASH         the compiled call raised where eager did not;
  GRAD          values agree but requires_grad or gradients differ;
  COUNTERS      results are right but the frame fell back, recompiled or missed the cache
                (the message lists explain()'s break reasons);
  KERNELS       results are right but no graph reached generated code where one should (the
                variant "ember-no-grad" and a case with kernels=True), or generated C++ failed to
                compile, or a backend stage failed (codegen_failures, backend_errors).
"""
import contextlib
import copy
import os

import pytest
import torch

import ember
from ember.testing import GENERATES_KERNELS, Call, TreeMismatch, alias_map, assert_tree_close, clone_tree

from .registry import NO_KERNELS, NO_KERNELS_ON_CUDA

N_CALLS = 3


def _generator(i):
    g = torch.Generator()
    g.manual_seed(1000 + i)
    return g


def build_targets(case):
    """(eager target, target to compile): two identical modules, or the function twice."""
    if not case.module:
        return case.fn, case.fn
    torch.manual_seed(0)
    from ember.testing import DEVICE
    module = case.fn().to(DEVICE)
    return copy.deepcopy(module), module


def _state(case, target):
    snap = {}
    if case.module:
        snap["state_dict"] = dict(target.state_dict())
        snap["training"] = [m.training for m in target.modules()]
    if case.state is not None:
        snap["case"] = case.state(target if case.module else None)
    return clone_tree(snap)


class Record:
    def __init__(self, out, call, state, error):
        self.out, self.call, self.state, self.error = out, call, state, error


def run_calls(case, callable_, target):
    if case.reset is not None:
        case.reset()
    records = []
    for i in range(N_CALLS):
        call = Call.of(case.inputs(_generator(i)))
        torch.manual_seed(2000 + i)
        try:
            out = callable_(*call.args, **call.kwargs)
            error = None
        except Exception as e:  # recorded so that the comparison can say which side raised
            out, error = None, e
        records.append(Record(out, call, _state(case, target), error))
        if error is not None:
            break
    return records


def compare_records(case, expected, actual):
    """Raises on the first value mismatch; returns the requires_grad mismatches."""
    grads = []
    for i, (e, a) in enumerate(zip(expected, actual)):
        if e.error is not None:
            if a.error is None or type(a.error) is not type(e.error):
                got = repr(a.error) if a.error is not None else "no error"
                raise AssertionError(f"WRONG RESULT: call {i}: eager raised {e.error!r}, compiled gave {got}")
            return grads
        if a.error is not None:
            raise AssertionError(f"CRASH: call {i}: compiled raised {type(a.error).__name__}: {a.error}") from a.error
        try:
            grads += assert_tree_close(e.out, a.out, rtol=case.rtol, atol=case.atol, path=f"call{i}.out")
            grads += assert_tree_close(e.call.tree(), a.call.tree(), rtol=case.rtol, atol=case.atol,
                                       path=f"call{i}.inputs_after")
            grads += assert_tree_close(e.state, a.state, rtol=case.rtol, atol=case.atol, path=f"call{i}.state")
        except TreeMismatch as err:
            raise AssertionError(f"WRONG RESULT: {err}") from None
        ea, aa = alias_map(e.out, e.call.tree()), alias_map(a.out, a.call.tree())
        if ea != aa:
            diff = [(x, y) for x, y in zip(ea, aa) if x != y][:3]
            raise AssertionError(f"WRONG RESULT (aliasing): call {i}: outputs relate to inputs/each other differently "
                                 f"(output, is input, is earlier output, shares memory with): eager vs compiled {diff}")
    if len(actual) < len(expected):
        raise AssertionError("CRASH: compiled run stopped early")
    return grads


def _break_reasons(case, target):
    """The reasons explain() gives for the case's first inputs, to make a COUNTERS failure actionable."""
    try:
        call = Call.of(case.inputs(_generator(0)))
        out = ember.explain(target)(*call.args, **call.kwargs)
        return [f"{r.reason} ({os.path.basename(r.filename)}:{r.lineno})" for r in out.break_reasons]
    except Exception as e:  # the reasons only decorate a failure message
        return [f"explain() raised {type(e).__name__}: {e}"]


def check_counters(case, target=None):
    s = ember.stats()
    got = {k: s[k] for k in ("frames_compiled", "cache_hits", "recompiles", "eager_frames", "graph_breaks")}
    if case.counters == "strict":
        want = {"frames_compiled": 1, "cache_hits": N_CALLS - 1, "recompiles": 0, "eager_frames": 0,
                "graph_breaks": 0}
        if got != want:
            raise AssertionError(f"COUNTERS: expected {want}, got {got}; reasons: {_break_reasons(case, target)}")
    elif case.counters == "captured":
        if got["eager_frames"] or got["graph_breaks"] or got["frames_compiled"] + got["cache_hits"] != N_CALLS:
            raise AssertionError(f"COUNTERS: expected every call captured (no eager frames), got {got}; "
                                 f"reasons: {_break_reasons(case, target)}")
    elif case.counters == "eager" and got["eager_frames"] + got["graph_breaks"] < 1:
        raise AssertionError(f"COUNTERS: expected a graph break or a frame run eagerly, got {got}")


def check_kernels(case, want_kernels, target=None):
    s = ember.stats()
    got = {k: s[k] for k in ("kernels_compiled", "codegen_failures", "backend_errors")}
    if got["codegen_failures"] or got["backend_errors"]:
        raise AssertionError(f"KERNELS: generated code failed to compile or a backend stage failed: {got}; "
                             f"graphs: {_backend_fallbacks(case, target)}")
    if not want_kernels or not GENERATES_KERNELS:
        return
    from ember.testing import DEVICE
    no_kernels = {**NO_KERNELS, **(NO_KERNELS_ON_CUDA if DEVICE.type == "cuda" else {})}
    if case.name not in no_kernels and not got["kernels_compiled"]:
        raise AssertionError(f"KERNELS: no graph reached generated kernels: {got}; graphs: "
                             f"{_backend_fallbacks(case, target)}")
    if case.name in no_kernels and got["kernels_compiled"]:
        raise AssertionError(f"KERNELS: {case.name} now generates kernels ({got}): remove it from "
                             f"registry.NO_KERNELS{'_ON_CUDA' if case.name in NO_KERNELS_ON_CUDA else ''}")


def _backend_fallbacks(case, target):
    """explain()'s per-graph kernel counts and eager-executor reasons, to make a KERNELS failure actionable."""
    try:
        call = Call.of(case.inputs(_generator(0)))
        out = ember.explain(target, options={"strict": False})(*call.args, **call.kwargs)
        return list(zip(out.kernel_counts, out.backend_fallbacks))
    except Exception as e:  # the reasons only decorate a failure message
        return [f"explain() raised {type(e).__name__}: {e}"]


def _grad_leaves(case, target, records):
    leaves = {}
    if case.module:
        for name, p in target.named_parameters():
            leaves[f"param {name}"] = p.grad
    for r in records:
        for idx, t in enumerate(r.call.args):
            if isinstance(t, torch.Tensor) and t.requires_grad:
                leaves[f"input {idx}"] = t.grad
    return leaves


def _backward(out):
    from ember.testing import tensor_leaves
    total = None
    for _, t in tensor_leaves(out):
        if t.requires_grad and t.is_floating_point():
            s = t.float().sum()
            total = s if total is None else total + s
    if total is not None:
        total.backward()


def run_case(case, backend):
    """backend: "eager", "ember", "ember-no-grad" (under torch.no_grad(), where modules with
    parameters reach kernels), or "ember-triton" (ember-no-grad on the CPU through the GPU backend's
    Triton kernels, in Triton's interpreter: options={"triton_interpret": True})."""
    from ember.testing import DEVICE
    no_grad = backend in ("ember-no-grad", "ember-triton")
    if no_grad and case.sets_grad_mode:
        pytest.skip("the case switches grad mode itself; it runs with the other backends")
    if backend == "ember-triton" and DEVICE.type != "cpu":
        pytest.skip("on a GPU, ember-no-grad runs the Triton kernels themselves")
    if backend == "ember-triton" and os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("runs in the TRITON_INTERPRET=1 test process (make test)")
    options = {"triton_interpret": True} if backend == "ember-triton" else {}
    with (DEVICE if DEVICE.type != "cpu" else contextlib.nullcontext()), \
            (torch.no_grad() if no_grad else contextlib.nullcontext()):
        _run_case(case, "ember" if no_grad else backend, check_grads=not no_grad, want_kernels=no_grad,
                  options=options)


def _run_case(case, backend, check_grads=True, want_kernels=False, options=None):
    ember.reset()
    eager_target, compiled_target = build_targets(case)
    # Every shape rule that answers is checked against torch's meta kernel on the whole corpus.
    # EMBER_PARITY_DYNAMIC=1 runs the corpus with dynamic=True (every dimension symbolic from the first call):
    # results and counters as in the static run; some ops stay extern calls over symbolic sizes
    # (docs/dynamic-shapes.md), so a graph may have no kernels.
    dynamic = True if os.environ.get("EMBER_PARITY_DYNAMIC") == "1" else None
    want_kernels = want_kernels and not dynamic
    # The corpus compares with eager's results exactly, dropout masks included: fallback_random draws eager's
    # numbers (tests/training/test_dropout.py tests the default, Philox form).
    compiled = ember.compile(compiled_target, backend=backend, dynamic=dynamic,
                             options={"verify_shape_rules": True, "fallback_random": True, **(options or {})})
    expected = run_calls(case, eager_target, eager_target)
    actual = run_calls(case, compiled, compiled_target)
    grads = compare_records(case, expected, actual)
    if case.grad and check_grads:
        _backward(expected[-1].out)
        _backward(actual[-1].out)
        ge, ga = _grad_leaves(case, eager_target, expected[-1:]), _grad_leaves(case, compiled_target, actual[-1:])
        try:
            grads += assert_tree_close(ge, ga, rtol=1e-4, atol=1e-5, path="grad")
        except TreeMismatch as err:
            grads.append(str(err))
    counters_error = None
    try:
        check_counters(case, compiled_target)
        if backend == "ember":
            check_kernels(case, want_kernels, compiled_target)
    except AssertionError as err:
        counters_error = err
    if grads:
        raise AssertionError("GRAD: " + "; ".join(grads[:4]))
    if counters_error is not None:
        raise counters_error


def case_params(cases):
    return [pytest.param(c, id=c.name) for c in cases]
