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
