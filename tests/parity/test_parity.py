"""The parity corpus: every registered program, compiled with each backend, against eager PyTorch."""
import pytest

from . import (cases_fallback, cases_modules, cases_mutation, cases_python, cases_semantics,  # noqa: F401 (register)
               cases_torch)
from .harness import case_params, run_case
from .registry import CASES


def test_corpus_size():
    assert len(CASES) >= 250, f"the parity corpus has {len(CASES)} cases"


@pytest.mark.parametrize("backend", ["ember", "eager"])
@pytest.mark.parametrize("case", case_params(CASES.values()))
def test_parity(case, backend):
    run_case(case, backend)
