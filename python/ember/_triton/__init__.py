"""Ember's Triton side (docs/codegen-triton.md): Python that Triton itself needs.

- ``helpers``: the device functions every generated kernel imports (libdevice on the GPU, ``tl``
  shims under ``TRITON_INTERPRET=1``).
- ``interpret``: loads a generated kernel's text as a module, for Triton's interpreter.
- ``compile``: runs Triton's compiler on generated text, in worker processes, at compile time.

Nothing here runs while a compiled graph runs on the GPU: launches are C++ (src/runtime/cuda).
"""
