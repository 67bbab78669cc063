"""Capture of common programs never imports torch._dynamo.

Some of torch's meta kernels are Python that imports torch._dynamo (1.5-2 s in a fresh process, most of a warm
compile): rms_norm, batch_norm, group_norm, scaled_dot_product_attention, mish, hardswish, log_softmax,
cross_entropy, var_mean, std, and even add/mul/where/clamp/relu/gelu/rsqrt on meta tensors. Capture must get the
types of these calls from Ember's shape rules instead. dynamo_free_cases.py compiles each cpu-bench workload and
common modules in a fresh process (this one has long imported torch._dynamo) and checks results against eager.
nn.MultiheadAttention is covered since F.multi_head_attention_forward is traced through (ops.INLINE_FUNCTIONAL):
captured as one torch node, its meta run executed torch's Python implementation, whose meta kernels import it.
"""
import json
import os
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).parent


def test_compiling_common_programs_leaves_dynamo_unimported(tmp_path):
    env = dict(os.environ, EMBER_CACHE_DIR=str(tmp_path / "cache"))
    env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent.parent / "python"), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, str(HERE / "dynamo_free_cases.py")], capture_output=True, text=True,
                          env=env, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    imported = [r["case"] for r in results if r["dynamo"]]
    assert not imported, f"torch._dynamo was imported by the time {imported[0]} had compiled and run"
    sys.path.insert(0, str(HERE))
    try:
        import dynamo_free_cases
        expected = list(dynamo_free_cases.cases())
    finally:
        sys.path.pop(0)
    assert [r["case"] for r in results] == expected


ARANGE_PROGRAM = """
import sys
import torch
import ember

def f(x):
    n = x.shape[-1]
    return (x + torch.arange(n), torch.arange(1, n, 2, dtype=torch.float32), torch.arange(n - 1, -1, -3),
            torch.arange(n, device=x.device, requires_grad=True, dtype=torch.float64))

for dynamic in (False, True):
    ember.reset()
    compiled = ember.compile(f, dynamic=dynamic)
    for n in (7, 10):
        x = torch.randn(3, n)
        for got, want in zip(compiled(x), f(x)):
            assert got.dtype == want.dtype and got.requires_grad == want.requires_grad, (got, want)
            assert torch.equal(got.detach(), want.detach()), (got, want)
assert ember.stats()["backend_errors"] == 0, ember.stats()
print("sympy imported" if "sympy" in sys.modules else "sympy not imported")
"""


def test_arange_types_come_from_a_rule(tmp_path):
    # torch's meta arange is Python whose checks import sympy (0.4 s here, 2 s on the GPU host: most of a
    # small model's first trace); Ember's rule answers its dtype, sizes and requires_grad instead.
    env = dict(os.environ, EMBER_CACHE_DIR=str(tmp_path / "cache"))
    env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent.parent / "python"), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-c", ARANGE_PROGRAM], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert proc.stdout.strip().splitlines()[-1] == "sympy not imported", proc.stdout
