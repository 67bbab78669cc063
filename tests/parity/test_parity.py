"""The parity corpus: every registered program, compiled with each backend, against eager PyTorch."""
import pytest

from . import all_cases  # noqa: F401 (register)
from .harness import case_params, run_case
from .registry import CASES, NO_KERNELS, NO_KERNELS_ON_CUDA


def test_corpus_size():
    assert len(CASES) >= 250, f"the parity corpus has {len(CASES)} cases"


def test_no_kernels_names_cases():
    assert not (set(NO_KERNELS) | set(NO_KERNELS_ON_CUDA)) - set(CASES)


# "ember-no-grad" runs eager and compiled calls under torch.no_grad(): graphs whose outputs would
# require grad run on the eager executor (training support is a later stage), so this is the
# variant in which modules with parameters run generated kernels.
# "ember-triton" is ember-no-grad through the GPU backend's Triton kernels, run on the CPU by Triton's
# interpreter.
@pytest.mark.parametrize("backend", ["ember", "ember-no-grad", "ember-triton", "eager"])
@pytest.mark.parametrize("case", case_params(CASES.values()))
def test_parity(case, backend):
    run_case(case, backend)
