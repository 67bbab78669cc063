"""Grouped kernels in compiled optimizer steps (docs/scheduler.md, "Grouped kernels"; docs/autograd.md,
"Optimizers"): the per-parameter updates of `ember.compile(opt.step)` run as one grouped kernel (C++ and
Triton targets), and the step still matches eager (fused and foreach) under the float64-reference rule over several
steps, with odd sizes, one-element tensors and bf16 parameters beside float32 ones."""
import pytest
import torch
import torch.nn as nn

import ember
from ember.testing import DEVICE

# Odd sizes (vector tails, pieces cut inside a member), one-element tensors, a matrix read flat; 34,000
# elements in all, above the C++ target's parallel threshold from which groups are formed.
SHAPES = [(37,), (1,), (5, 7), (256, 130), (1, 1), (300,), (3,)]

pytestmark = pytest.mark.usefixtures("fresh")


def make_params(dtypes):
    torch.manual_seed(0)
    return [nn.Parameter(torch.randn(s, dtype=torch.float64).to(DEVICE, dt)) for s, dt in zip(SHAPES, dtypes)]


def run(opt_cls, kwargs, dtypes, compiled, steps):
    params = make_params(dtypes)
    opt = opt_cls(params, **kwargs)
    step = ember.compile(opt.step) if compiled else opt.step
    for k in range(steps):
        gen = torch.Generator().manual_seed(100 + k)
        for p in params:
            p.grad = torch.randn(p.shape, generator=gen, dtype=torch.float64, device="cpu").to(p.device, p.dtype)
        step()
    out = {str(i): p.detach() for i, p in enumerate(params)}
    for i, p in enumerate(params):
        out.update({f"{i}.{key}": v for key, v in opt.state[p].items() if isinstance(v, torch.Tensor)})
    return out


def check(opt_cls, kwargs, dtypes, steps=4):
    """Ember's error from the float64 step at most twice eager's plus 1e-6, against the eager variant given
    (fused or foreach) and against the float64 run of the same optimizer."""
    want = run(opt_cls, kwargs, dtypes, False, steps)
    got = run(opt_cls, kwargs, dtypes, True, steps)
    ref = run(opt_cls, {k: v for k, v in kwargs.items() if k not in ("fused", "foreach")},
              [torch.float64] * len(dtypes), False, steps)
    assert got.keys() == want.keys()
    for name in want:
        assert got[name].dtype == want[name].dtype, name
        eager_err = (want[name].double() - ref[name]).abs().max().item()
        ember_err = (got[name].double() - ref[name]).abs().max().item()
        assert ember_err <= 2 * eager_err + 1e-6, (name, ember_err, eager_err)


VARIANTS = [
    (torch.optim.AdamW, dict(lr=0.01, weight_decay=0.1, fused=True)),
    (torch.optim.AdamW, dict(lr=0.01, weight_decay=0.1, foreach=True, amsgrad=True)),
    (torch.optim.Adam, dict(lr=0.01, weight_decay=0.1, foreach=True)),
    (torch.optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01, foreach=True)),
]


@pytest.mark.parametrize("opt_cls,kwargs", VARIANTS, ids=lambda v: getattr(v, "__name__", None) or
                         "-".join(f"{k}={v}" for k, v in v.items()))
def test_grouped_step_matches_eager(opt_cls, kwargs, monkeypatch, caplog):
    monkeypatch.setenv("EMBER_LOGS", "schedule")
    with caplog.at_level("INFO", logger="ember.schedule"):
        check(opt_cls, kwargs, [torch.float32] * len(SHAPES))
    log = "\n".join(r.getMessage() for r in caplog.records)
    # Every parameter's update is one member: the seven kernels are one group (C++: one parallel region;
    # Triton: one launch).
    assert "7 kernels of one pointwise body" in log, log


def test_bf16_parameters_beside_float32():
    """bf16 and float32 updates have two bodies (their loads and stores convert): a group each where they
    are consecutive, and the bf16 values round as torch's bf16 step rounds them."""
    dtypes = [torch.bfloat16, torch.bfloat16, torch.bfloat16, torch.float32, torch.float32, torch.float32,
              torch.bfloat16]
    check(torch.optim.AdamW, dict(lr=0.01, weight_decay=0.1, foreach=True), dtypes)
