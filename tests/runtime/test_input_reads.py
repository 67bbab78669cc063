"""A compiled call reads each input tensor from torch once: the guards' reads of the captured tensors serve
the runtime's binding, the aliased-inputs check and the symbol binding (docs/backend.md, "Reading inputs").
stats()["tensor_reads"] counts every read that reaches torch: one per input, and one per output the call
allocates (its address)."""
import torch

import ember


def _reads_per_call(fn, *args):
    fn(*args)
    fn(*args)  # compiled and warm
    before = ember.stats()["tensor_reads"]
    fn(*args)
    return ember.stats()["tensor_reads"] - before


def test_each_input_read_once():
    ember.reset()

    def f(x, y, z):
        return (x * y + z).sin()

    args = [torch.randn(8, 16) for _ in range(3)]
    got = ember.compile(f)
    assert _reads_per_call(got, *args) == 3 + 1
    assert torch.allclose(got(*args), f(*args))
    assert ember.stats()["kernels_compiled"] >= 1


def test_graph_writing_inputs_reads_each_once():
    # An AliasedInputsRunner checks the inputs' ranges before the compiled graph binds them.
    ember.reset()

    def f(params, grads):
        for p, g in zip(params, grads):
            p.add_(g * 0.5)

    params = [torch.randn(4, 4) for _ in range(5)]
    grads = [torch.randn(4, 4) for _ in range(5)]
    want = [p + 3 * g * 0.5 for p, g in zip(params, grads)]
    assert _reads_per_call(ember.compile(f), params, grads) == 10
    for p, w in zip(params, want):
        torch.testing.assert_close(p, w)
    assert ember.stats()["aliased_input_calls"] == 0


def test_dynamic_shapes_read_each_once():
    # The symbol binding reads sizes from the inputs the guards read.
    ember.reset()

    def f(x, y):
        return x.relu() + y

    got = ember.compile(f, dynamic=True)
    for n in (5, 7):
        x, y = torch.randn(n, 3), torch.randn(n, 3)
        assert _reads_per_call(got, x, y) == 2 + 1
        torch.testing.assert_close(got(x, y), f(x, y))


def test_aliased_inputs_still_found():
    # A written input that shares memory with another input still runs op by op (the reads are the guards').
    ember.reset()

    def f(a, b):
        a.mul_(2)
        return a + b

    x = torch.randn(8)
    got = ember.compile(f)
    got(torch.randn(8), torch.randn(8))
    want_x = x.clone()
    want = f(want_x, want_x)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out = got(x, x)
    torch.testing.assert_close(out, want)
    torch.testing.assert_close(x, want_x)
    assert ember.stats()["aliased_input_calls"] == 1
