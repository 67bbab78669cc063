"""GPU smoke check of the Triton backend (run on the lent H200 by tools/device/gpu_run.sh users): a few
memory-bound workloads, eager vs Ember vs torch.compile, CUDA-event medians, outputs checked against eager.
Prints one line per workload; `python -m ember.bench gpu` is the full benchmark."""
import statistics
import sys
import time

import torch
import torch.nn.functional as F

import ember


def median_ms(fn, args, reps=50):
    for _ in range(5):
        fn(*args)
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn(*args)
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def workloads():
    d = "cuda"
    x = torch.randn(8192, 1024, device=d)
    yield "softmax f32 8192x1024", lambda t: torch.softmax(t, -1), (x,), x.numel() * 4 * 2
    xb = torch.randn(8192, 4096, device=d, dtype=torch.bfloat16)
    rb = torch.randn_like(xb)
    w, b = torch.randn(4096, device=d, dtype=torch.bfloat16), torch.randn(4096, device=d, dtype=torch.bfloat16)
    yield "layer_norm(x+r) bf16 8192x4096", lambda t, r: F.layer_norm(t + r, (4096,), w, b), (xb, rb), xb.numel() * 2 * 3
    yield "rms_norm bf16 8192x4096", lambda t: F.rms_norm(t, (4096,), w), (xb,), xb.numel() * 2 * 2
    a = torch.randn(8192, 8192, device=d, dtype=torch.bfloat16)
    yield "relu(2a+b) bf16 8192^2", lambda p, q: torch.relu(2 * p + q), (a, a.clone()), a.numel() * 2 * 3
    xs = torch.randn(4096, 768, device=d)
    W, B = torch.randn(768, 768, device=d) / 30, torch.randn(768, device=d)
    yield "seed gelu(x@W+b)+r f32", lambda t, r: F.gelu(t @ W + B, approximate="tanh") + r, (xs, xs.clone()), None
    s = torch.randn(64, 1 << 20, device=d)
    yield "sum(-1) f32 64x2^20", lambda t: t.sum(-1), (s,), s.numel() * 4
    s0 = torch.randn(8192, 4096, device=d)
    yield "sum(0) f32 8192x4096", lambda t: t.sum(0), (s0,), s0.numel() * 4


def main():
    print(torch.__version__, torch.cuda.get_device_name(0), flush=True)
    for name, fn, args, nbytes in workloads():
        row = [name]
        with torch.no_grad():
            eager_ms = median_ms(fn, args)
            expected = fn(*args)
            row.append(f"eager {eager_ms * 1e3:.1f}us")
            for label, compile_fn in (("ember", lambda f: ember.compile(f)), ("inductor", torch.compile)):
                try:
                    ember.reset()
                    torch._dynamo.reset()
                    compiled = compile_fn(fn)
                    t0 = time.perf_counter()
                    got = compiled(*args)
                    torch.cuda.synchronize()
                    cold = time.perf_counter() - t0
                    ok = torch.allclose(got.float(), expected.float(), rtol=2e-2, atol=2e-2)
                    ms = median_ms(compiled, args)
                    extra = ""
                    if label == "ember":
                        s = ember.stats()
                        extra = f" kernels={s['kernels_compiled']} fails={s['codegen_failures']}+{s['backend_errors']}"
                    bw = f" {nbytes / ms / 1e9:.2f}TB/s" if nbytes else ""
                    row.append(f"{label} {ms * 1e3:.1f}us x{eager_ms / ms:.2f}{bw} compile {cold:.2f}s "
                               f"{'ok' if ok else 'WRONG'}{extra}")
                except Exception as e:  # report and go on
                    row.append(f"{label} FAILED {type(e).__name__}: {str(e)[:300]}")
        print(" | ".join(row), flush=True)


if __name__ == "__main__":
    sys.exit(main())
