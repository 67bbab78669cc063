"""With torch installed: torch's own Python frames are passed through, user frames called from
them (nn.Module.__call__ -> forward) still reach the compiler."""
import pytest

torch = pytest.importorskip("torch")

from ember._C import eval_frame as E  # noqa: E402
from conftest import Recorder  # noqa: E402


class Scale(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.relu(x) * 2


def apply(module, x):
    return module(x)


def test_torch_frames_are_not_offered_user_frames_are():
    rec = Recorder()
    module = Scale()
    x = torch.tensor([-1.0, 2.0])
    assert torch.equal(rec.call(apply, module, x), torch.tensor([0.0, 4.0]))
    assert rec.seen == ["apply", "forward"]
    assert E.skip_reason(torch.nn.Module.__call__.__code__) == "torch_file"
    assert E.skip_reason(torch.nn.functional.relu.__code__) == "torch_file"
    assert E.skip_reason(Scale.forward.__code__) is None


def test_forward_called_through_torch_can_be_replaced():
    rec = Recorder({"forward": lambda code, args: (lambda a: a[1] + 100, lambda a: True)})
    module = Scale()
    x = torch.tensor([1.0])
    assert torch.equal(rec.call(apply, module, x), torch.tensor([101.0]))
    assert torch.equal(rec.call(apply, module, x), torch.tensor([101.0]))
    assert rec.compiler.hits == 1
