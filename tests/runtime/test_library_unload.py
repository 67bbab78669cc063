"""Kernel libraries are unloaded with the last compiled graph that uses them (docs/code-cache.md): a
long process that compiles and drops functions keeps only the libraries in use mapped."""
import gc

import torch

import ember
from ember._C import codecache


def test_dropped_functions_unload_their_libraries(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    base = codecache.loaded_library_count()
    for k in range(4):
        namespace = {"torch": torch}
        exec(f"def f(x):\n    return (x * {k + 2}).sin() + {k}\n", namespace)  # a new code object each time
        fn = ember.compile(namespace["f"])
        x = torch.randn(8)
        with torch.no_grad():
            torch.testing.assert_close(fn(x), (x * (k + 2)).sin() + k)
        assert codecache.loaded_library_count() > base  # its graph's libraries, while it lives
        del fn, namespace
        gc.collect()
        assert codecache.loaded_library_count() == base


def test_reset_unloads_libraries_of_live_functions(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    base = codecache.loaded_library_count()

    def g(x):
        return x.cos() * 3 - 1

    fn = ember.compile(g)
    x = torch.randn(8)
    with torch.no_grad():
        fn(x)
        assert codecache.loaded_library_count() > base
        ember.reset()
        gc.collect()
        assert codecache.loaded_library_count() == base
        torch.testing.assert_close(fn(x), x.cos() * 3 - 1)  # compiled again, from the disk cache
    assert codecache.loaded_library_count() > base


def test_reset_while_other_threads_run_the_graph(tmp_path, monkeypatch):
    # A call holds its graph (and so its libraries) while it runs, with the GIL released in the kernels: a
    # reset from another thread unloads them only after the call.
    import threading
    import time

    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))

    def f(x):
        return (x * 2).sin() + 1

    fn = ember.compile(f)
    x = torch.randn(64, 1024)
    want = f(x)
    stop = time.monotonic() + 2
    errors, resets = [], []

    def call():
        with torch.no_grad():
            while time.monotonic() < stop and not errors:
                try:
                    torch.testing.assert_close(fn(x), want)
                except Exception as e:  # reported below
                    errors.append(e)

    def reset():
        while time.monotonic() < stop:
            ember.reset()
            resets.append(1)
            time.sleep(0.005)

    threads = [threading.Thread(target=call) for _ in range(3)] + [threading.Thread(target=reset)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(resets) > 10
