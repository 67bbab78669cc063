"""`torch.compile(model, backend="ember")`: Ember as a Dynamo backend.

Dynamo hands the backend an FX GraphModule and example inputs. A GraphModule's `forward` is
ordinary Python generated from its graph (one torch call per line), so Ember compiles it like any
other function: its frontend captures the whole graph in one trace (guards on a GraphModule's
arguments are a handful of tensor checks), and the graph goes through Ember's backend. The FX
graph is never interpreted node by node in Python.

The backend is found by name through the `torch_dynamo_backends` entry point (pyproject.toml;
for a development tree, `make build` writes the same entry point next to the package).
"""
from . import api


def ember_backend(gm, example_inputs, **kwargs):
    """Dynamo's backend protocol: returns the callable Dynamo runs in place of the graph.

    `options` (torch.compile's `options=`) are Ember's compile options, as ember.compile takes them;
    torch.compile's `mode=` is passed through.
    """
    options = kwargs.get("options")
    mode = kwargs.get("mode") or "default"
    # A lazy GraphModule generates its code on the first call; generate it now, so that the first
    # compiled call traces the graph's code rather than FX's code generator.
    real_recompile = getattr(gm, "real_recompile", None)
    if real_recompile is not None:
        real_recompile()
    return api.compile(gm.forward, backend="ember", mode=mode, options=options)
