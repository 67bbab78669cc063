"""Importing the zoo's model libraries (timm, torchvision, diffusers) next to a CPU build of torch.

Needs: nothing but the standard library and torch; it never imports torchvision itself.
Guarantees: after `allow_torchvision()`, `import torchvision` (and so `import timm` and `import transformers`,
which import it when it is installed) works on a CPU torch.
Why: PyPI's torchvision wheel is built against CUDA torch. On a CPU torch its C operators (nms, roi_align, ...)
do not load, and `torchvision/__init__.py` fails in `torchvision._meta_registrations`, which registers meta
kernels for those operators. Classification models use none of them, so an empty module under that name in
`sys.modules` lets the import through. It must be in place before the first import of torchvision,
transformers or timm: the zoo suite calls it first, and so does tests/conftest.py.
On a CUDA torch (the GPU machine) nothing is stubbed: the real operators load there.
"""
import importlib.util
import sys
import types

STUBBED = "torchvision._meta_registrations"


def allow_torchvision():
    """Puts the empty stand-in in place when torchvision is installed and this torch has no CUDA build; returns
    True when it did."""
    import torch
    if torch.version.cuda is not None or STUBBED in sys.modules or importlib.util.find_spec("torchvision") is None:
        return False
    sys.modules[STUBBED] = types.ModuleType(STUBBED, "stand-in: torchvision's C operators need a CUDA torch")
    return True
