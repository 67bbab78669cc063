"""Every case module of the parity corpus: importing this registers all of them in registry.CASES (the
parity tests, tests/passes/test_corpus.py and tools/codegen_hashes.py run the same corpus)."""
from . import (cases_fallback, cases_modules, cases_mutation, cases_python,  # noqa: F401 (register)
               cases_python_flow, cases_semantics, cases_torch)
