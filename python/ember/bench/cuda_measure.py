"""What the `gpu` suite measures on a CUDA device: time by CUDA events, and memory by torch's allocator.

Time: one call per sample, timed by CUDA events, interleaved across callables like timing.measure.

Every sample starts by zeroing a buffer larger than the L2 cache (as triton.testing.do_bench does), so no call
finds its inputs left in L2 by the previous one. The flush is outside the events. Samples are read when all
rounds are over, so reading them costs the calls nothing. Two ways to time a call:

  kernel   synchronize, flush, a GPU sleep of about a millisecond (torch.cuda._sleep), start event, call, end
           event: the CPU enqueues the whole call while the GPU sleeps, so the events measure the GPU time of
           the call's kernels back to back, launch overhead hidden: how fast the kernels are. For memory-bound
           workloads, whose GB/s is a property of their kernels. (Without the sleep, a compiler whose call
           costs the CPU more than the flush takes the GPU -- Inductor's Python wrapper, a CUDA-graph tree's
           bookkeeping on a slow host CPU -- would be charged its overhead here.)
  call     synchronize, flush, start event, call, end event: the GPU is idle when the call starts, so it waits
           for every launch, and the events measure the call as its caller sees it, launch overhead (guards,
           Python, one launch per kernel) included wherever it exceeds the GPU's work. For models and for
           the small-batch decoder step, where launch overhead is what reduce-overhead exists to remove.
"""
from . import timing

FLUSH_BYTES = 256 << 20  # the H200's L2 is 50 MiB; do_bench's flush buffer is 256 MB too
HEADSTART_CYCLES = 2_000_000  # kernel timing's GPU sleep: about 1 ms at the H200's 1.98 GHz


def measure(fns, *, warmup, repeats, kernel_time):
    """Times each zero-argument callable of the dict `fns` on the current CUDA device -> {name: timing.Timing}.

    kernel_time: True for "kernel" timing, False for "call" timing (see above)."""
    import torch
    if repeats < 1 or warmup < 0:
        raise ValueError(f"measure: need repeats >= 1 and warmup >= 0, got repeats={repeats}, warmup={warmup}")
    flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")

    def take_sample(fn):
        torch.cuda.synchronize()
        flush.zero_()
        if kernel_time:
            torch.cuda._sleep(HEADSTART_CYCLES)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        return start, end

    timing.warm_up(fns, warmup)
    torch.cuda.synchronize()
    events = timing.interleave(fns, repeats, take_sample)
    torch.cuda.synchronize()
    return {name: timing.Timing([start.elapsed_time(end) / 1e3 for start, end in pairs], 1)
            for name, pairs in events.items()}


def synchronize(device):
    """Waits for the device's queued work; nothing to wait for on the CPU."""
    if device == "cuda":
        import torch
        torch.cuda.synchronize()


def baseline(device, eager_call):
    """Bytes torch's CUDA allocator holds for live tensors before a compiler first runs (None on the CPU).

    An eager call comes first: CUDA-graph recording frees cuBLAS's workspaces (Inductor's clear_cublas_manager),
    and the next matmul allocates them again, which would otherwise be charged to the next compiler."""
    if device != "cuda":
        return None
    import gc

    import torch
    eager_call()
    gc.collect()
    torch.cuda.synchronize()
    return torch.cuda.memory_allocated()


def peak_memory(fn, calls, before):
    """{"bytes", "method"}: the CUDA allocator's peak while `calls` calls of fn run, minus `before` (baseline():
    weights and inputs). It counts what the compiler keeps allocated between calls (arenas, constants) and each
    call's transient buffers and output. A CUDA-graph pool's memory between replays is reserved by the pool, not
    allocated, and is not counted."""
    import torch
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return {"bytes": max(0, torch.cuda.max_memory_allocated() - before),
            "method": "torch.cuda.max_memory_allocated - allocated before compiling"}
