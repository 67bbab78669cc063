"""A compiled callable used from several threads at once returns each thread's correct result."""
import threading

import torch
import torch.nn as nn

import ember

N_THREADS = 8
CALLS_PER_THREAD = 10


def body(x, w):
    h = torch.tanh(x @ w)
    for _ in range(3):
        h = h * 0.5 + x.sum(dim=-1, keepdim=True)
    return h.softmax(-1)


def _run_threads(target):
    barrier = threading.Barrier(N_THREADS)
    errors = []

    def worker(tid):
        try:
            barrier.wait()
            target(tid)
        except BaseException as e:  # collected and re-raised on the main thread
            errors.append((tid, e))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(N_THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise AssertionError(f"{len(errors)} thread(s) failed; first: thread {errors[0][0]}: {errors[0][1]!r}") \
            from errors[0][1]


def test_threads_same_shapes():
    f = ember.compile(body)
    w = torch.randn(6, 6)

    def target(tid):
        g = torch.Generator().manual_seed(tid)
        for _ in range(CALLS_PER_THREAD):
            x = torch.randn(4, 6, generator=g)
            torch.testing.assert_close(f(x, w), body(x, w))

    _run_threads(target)
    s = ember.stats()
    assert s["eager_frames"] == 0
    assert s["frames_compiled"] + s["cache_hits"] == N_THREADS * CALLS_PER_THREAD
    assert s["frames_compiled"] <= N_THREADS, s


def test_threads_different_shapes():
    f = ember.compile(body)
    w = torch.randn(6, 6)

    def target(tid):
        g = torch.Generator().manual_seed(tid)
        for i in range(CALLS_PER_THREAD):
            x = torch.randn(1 + (tid + i) % 4, 6, generator=g)
            torch.testing.assert_close(f(x, w), body(x, w))

    _run_threads(target)
    s = ember.stats()
    assert s["frames_compiled"] + s["cache_hits"] == N_THREADS * CALLS_PER_THREAD


def test_threads_module_with_buffers():
    m = nn.Sequential(nn.Linear(6, 6), nn.LayerNorm(6), nn.GELU()).eval()
    cm = ember.compile(m)

    def target(tid):
        g = torch.Generator().manual_seed(100 + tid)
        for _ in range(CALLS_PER_THREAD):
            x = torch.randn(3, 6, generator=g)
            with torch.no_grad():
                torch.testing.assert_close(cm(x), m(x))

    _run_threads(target)


def test_threads_mixing_fallback_and_compiled(capsys):
    def sometimes_prints(x, loud):
        if loud:
            print("", end="")
        return x * 3

    f = ember.compile(sometimes_prints)

    def target(tid):
        for i in range(CALLS_PER_THREAD):
            x = torch.full((2,), float(tid))
            torch.testing.assert_close(f(x, (tid + i) % 2 == 0), x * 3)

    _run_threads(target)


def pointwise(x, y):
    return (x * y).sin() + y.cos()


def rows_softmax(x):
    return x.softmax(-1).sum(0)


def test_threads_several_graphs_recompiling_concurrently():
    """Two compiled functions, four shapes each, first calls in every thread at once: every new
    shape compiles while other threads run or compile. Every call is counted once, as a compile or
    a cache hit; each distinct (function, shape) compiles at least once. Static shapes: under
    automatic dynamic, which shapes share a symbolic graph depends on the threads' order."""
    fs = [ember.compile(pointwise, dynamic=False), ember.compile(rows_softmax, dynamic=False)]
    n_shapes = 4

    def target(tid):
        g = torch.Generator().manual_seed(tid)
        for i in range(CALLS_PER_THREAD):
            x = torch.randn(1 + (tid + i) % n_shapes, 6, generator=g)
            y = torch.randn(x.shape, generator=g)
            torch.testing.assert_close(fs[0](x, y), pointwise(x, y))
            torch.testing.assert_close(fs[1](x), rows_softmax(x))

    _run_threads(target)
    s = ember.stats()
    assert s["frames_compiled"] + s["cache_hits"] == 2 * N_THREADS * CALLS_PER_THREAD, s
    assert s["frames_compiled"] >= 2 * n_shapes, s
    assert s["recompiles"] <= s["frames_compiled"] - 2, s
    assert s["eager_frames"] == s["graph_breaks"] == s["backend_errors"] == 0, s
    from ember import _C
    assert not _C.eval_frame.hook_installed()
