"""Float accumulators on long rows (docs/codegen-cpp.md, "Float accumulators"): vector sums and
Welford reductions add in float lanes with a double carry every block, scalar sums in double, max
and min in float; each within the fp64-reference rule against eager (error <= 2x eager's + 1e-6)."""
import pytest
import torch

import ember


def _row_sum(x):
    return x.sum(-1)


def _row_mean(x):
    return x.mean(-1)


def _row_var(x):
    return x.var(-1)


def _col_sum(x):
    return x.sum(0)


def _col_max(x):
    return x.amax(0)


def _all_sum(x):
    return x.sum()


CASES = [
    (_row_sum, lambda g: torch.randn(3, 1_000_000, generator=g) + 3),
    (_row_sum, lambda g: torch.rand(2, 1_000_003, generator=g)),
    (_row_mean, lambda g: torch.rand(3, 1_000_000, generator=g)),
    (_row_var, lambda g: torch.randn(3, 1_000_000, generator=g) + 10),
    (_col_sum, lambda g: torch.randn(300_000, 4, generator=g) + 3),
    (_col_max, lambda g: torch.randn(300_000, 4, generator=g)),
    (_all_sum, lambda g: torch.rand(1_000_000, generator=g)),
]


@pytest.mark.parametrize("fn,make", CASES, ids=[f"{fn.__name__}_{i}" for i, (fn, _) in enumerate(CASES)])
def test_long_reductions_meet_the_fp64_reference_rule(fn, make):
    ember.reset()
    x = make(torch.Generator().manual_seed(11))
    ref = fn(x.double())
    eager_err = (fn(x).double() - ref).abs().max().item()
    got = ember.compile(fn)(x)
    assert got.dtype == torch.float32
    ember_err = (got.double() - ref).abs().max().item()
    assert ember_err <= 2 * eager_err + 1e-6, (ember_err, eager_err)
