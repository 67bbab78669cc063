"""Many calls of a compiled function leak nothing: the inputs' and outputs' reference counts, the
number of objects the garbage collector tracks and the process's resident memory stay where they
were after warm-up. EMBER_MEMORY_CALLS sets the calls per case (CI: 20,000; the long run:
EMBER_MEMORY_CALLS=1000000). Growth is checked loosely (allocator noise), never timing."""
import gc
import os
import sys

import pytest
import torch
import torch.nn as nn

import ember

CALLS = int(os.environ.get("EMBER_MEMORY_CALLS", "20000"))
WARMUP = 200
# Resident memory may grow by allocator noise, never by a leak proportional to the calls: one
# leaked 64-byte tensor header per call would be 1.3 MB at 20,000 calls and 64 MB at 10^6.
RSS_SLACK = 8 << 20


def _rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def one_graph(x, y):
    return (x * y).sin() + 1, x.sum()


def with_break(x, y):
    z = x + y
    print("", end="")  # a graph break: glue and a resume function run on every call
    return [z * 2, {"a": z}]


def mutates_input(x, y):
    x.add_(y)
    return x.view(-1)[:3]


def returns_input(x, y):
    return x, y * 2


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.norm = nn.LayerNorm(16)
        self.register_buffer("steps", torch.zeros(()))

    def forward(self, x, y):
        self.steps += 1
        return self.norm(self.fc(x) + y)


CASES = {"one_graph": one_graph, "with_break": with_break, "mutates_input": mutates_input,
         "returns_input": returns_input, "module": Block}


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads resident memory from /proc")
@pytest.mark.parametrize("case", list(CASES))
def test_no_growth_over_many_calls(case):
    fn = CASES[case]
    if isinstance(fn, type):
        fn = fn()
    f = ember.compile(fn)
    x, y = torch.randn(4, 16), torch.randn(4, 16)
    with torch.no_grad():
        for _ in range(WARMUP):
            out = f(x, y)
        del out
        gc.collect()
        refs = (sys.getrefcount(x), sys.getrefcount(y))
        objects = len(gc.get_objects())
        rss = _rss()
        for _ in range(CALLS):
            out = f(x, y)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        del out
        # Each output the caller holds is referenced by `outs`, `t` and getrefcount's argument only.
        held = [sys.getrefcount(t) for t in outs if isinstance(t, torch.Tensor) and t is not x and t is not y]
        del outs
        gc.collect()
    assert (sys.getrefcount(x), sys.getrefcount(y)) == refs
    assert all(r <= 3 for r in held), held
    assert len(gc.get_objects()) - objects < 100, "objects tracked by gc grew"
    assert _rss() - rss < RSS_SLACK, f"resident memory grew by {(_rss() - rss) >> 20} MiB over {CALLS} calls"
    s = ember.stats()
    assert s["eager_frames"] == 0 and s["cache_hits"] >= CALLS, s
