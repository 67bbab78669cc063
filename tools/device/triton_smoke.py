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


if __name__ == "__main__" and "--experiments" not in sys.argv:
    sys.exit(main())


# ---- Experiments: one kernel's variants, timed alone (triton.testing.do_bench), to choose defaults ----

def _program_of(fn, cpu_args):
    from ember._C import lowering, passes
    graph = ember.explain(fn)(*cpu_args).graphs[0]
    for step in ("canonicalize", "decompose", "dce", "cse"):
        graph = passes.run_pass(graph, step)
    return lowering.lower(graph)[0]


def _load(source, name):
    import hashlib
    import importlib.util
    import os
    import tempfile
    path = os.path.join(tempfile.gettempdir(), f"ember_exp_{hashlib.sha256(source.encode()).hexdigest()[:16]}.py")
    with open(path, "w") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def experiment(label, fn, args, nbytes, variants):
    """variants: {name: emit_triton keyword arguments}; every config of a single-kernel program is timed."""
    from triton.testing import do_bench
    from ember._C import codegen
    cpu_args = [a.cpu() for a in args]
    with torch.no_grad():
        program = _program_of(fn, cpu_args)
        expected = fn(*args)
    for vname, kwargs in variants.items():
        emitted = codegen.emit_triton(program, schedule=True, **kwargs)
        if len(emitted["kernels"]) != 1:
            print(f"  {label} {vname}: {len(emitted['kernels'])} kernels, skipped", flush=True)
            continue
        k = emitted["kernels"][0]
        kernel = _load(k["source"], k["name"])
        out = torch.empty_like(expected)
        import re
        tensors = {}
        for bid, kind, index in re.findall(r"buffer %b(\d+) : .* (input|output) (\d+)", emitted["program"]):
            tensors[int(bid)] = args[int(index)] if kind == "input" else out
        dtypes = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16, "f64": torch.float64}
        for bid, dtype, sizes, strides in re.findall(r"buffer %b(\d+) : (\w+)\[([^]]*)\]\{([^}]*)\} temp",
                                                     emitted["program"]):
            shape = [int(v) for v in sizes.split(",") if v.strip()]
            stride = [int(v) for v in strides.split(",") if v.strip()]
            tensors[int(bid)] = torch.empty_strided(shape, stride, dtype=dtypes[dtype], device=out.device)
        for config in k["configs"]:
            call = [tensors[p["buffer"]] if "buffer" in p else p["value"] for p in k["params"]]
            xnumel = next(p["value"] for p in k["params"] if p["name"] == "xnumel")
            grid = ((xnumel + config["blocks"]["XBLOCK"] - 1) // config["blocks"]["XBLOCK"],)
            run = lambda: kernel[grid](*call, **config["blocks"], num_warps=config["num_warps"],  # noqa: E731
                                       num_stages=config["num_stages"])
            try:
                ms = do_bench(run)
                ok = torch.allclose(out.float(), expected.float(), rtol=2e-2, atol=2e-2)
                print(f"  {label} {vname} {k['kind']} {config['blocks']} w{config['num_warps']}: {ms * 1e3:.1f}us "
                      f"{nbytes / ms / 1e9:.2f}TB/s {'ok' if ok else 'WRONG'}", flush=True)
            except Exception as e:  # a variant that does not compile is a result
                print(f"  {label} {vname} {config['blocks']}: FAILED {type(e).__name__}: {str(e)[:200]}", flush=True)


def experiments():
    d = "cuda"
    xb = torch.randn(8192, 4096, device=d, dtype=torch.bfloat16)
    w = torch.randn(4096, device=d, dtype=torch.bfloat16)
    x = torch.randn(8192, 4096, device=d)
    wide = {"persistent1024": {"max_configs": 8}, "persistent4096": {"persistent_max_rnumel": 4096, "max_configs": 8},
            "persistent8192": {"persistent_max_rnumel": 8192, "max_configs": 8}}
    print("experiments (one kernel, do_bench):", flush=True)
    experiment("rms_norm bf16 8192x4096", lambda t, v: F.rms_norm(t, (4096,), v), (xb, w), xb.numel() * 4, wide)
    experiment("softmax f32 8192x4096", lambda t: torch.softmax(t, -1), (x,), x.numel() * 8, wide)
    # One kernel each: the configs of the unsplit reduction (the Triton target splits sum(0) in two kernels).
    unsplit = {"all": {"max_configs": 8, "split_min_programs": 0}}
    experiment("sum(0) f32 8192x4096", lambda t: t.sum(0), (x,), x.numel() * 4, unsplit)
    experiment("sum(-1) f32 8192x4096", lambda t: t.sum(-1), (x,), x.numel() * 4, unsplit)


if __name__ == "__main__" and "--experiments" in sys.argv:
    experiments()
