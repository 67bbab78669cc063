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
