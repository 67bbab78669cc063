"""Loads a generated kernel's text as a module, for Triton's interpreter (docs/codegen-triton.md).

Triton reads a @triton.jit function's source through ``inspect.getsourcelines``, so text that never
was a file needs one: the text goes into ``linecache`` under a fake file name derived from its
content (``<ember-triton-<sha256[:16]>>``), then is compiled with that name and executed. The same
text loads once per process. ``TRITON_INTERPRET=1`` must be set before ``triton`` reads it (when the
decorators in the text and in ``helpers`` run), so callers set it before importing anything here.
"""
import hashlib
import linecache

_loaded = {}


def load(source: str, name: str):
    """The @triton.jit function `name` that `source` (a whole module's text) defines."""
    module = _loaded.get(source)
    if module is None:
        filename = f"<ember-triton-{hashlib.sha256(source.encode()).hexdigest()[:16]}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
        module = {"__name__": filename[1:-1], "__file__": filename}
        exec(compile(source, filename, "exec"), module)
        _loaded[source] = module
    return module[name]
