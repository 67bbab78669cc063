"""Which programs mode="reduce-overhead" replays as CUDA graphs (runtime::why_no_cuda_graph), from loop
IR text: no GPU needed. Each case says what it refuses and why."""
import pytest

from ember._C import cuda


def program(body, device="cuda:0"):
    return (f"program @p {{\n"
            f"  buffer %b0 : f32[4]{{1}} {device} input 0\n"
            f"  buffer %b1 : f32[4]{{1}} {device} temp\n"
            f"  buffer %b2 : f32[4]{{1}} {device} output 0\n"
            f"  buffer %b3 : f32[4]{{1}} {device} extern\n"
            f"{body}"
            f"  return (%b2)\n}}\n")


def kernel(name, src, dst):
    return (f"  kernel @{name} [i0 < 4] {{\n    loop {{\n      %t0 = load {src}[i0] : f32\n"
            f"      %t1 = add %t0, %t0 : f32\n      store {dst}[i0] = %t1\n    }}\n  }}\n")


TWO_KERNELS = kernel("k0", "%b0", "%b1") + kernel("k1", "%b1", "%b2")


def test_two_kernels_on_cuda_are_graphed():
    assert cuda.why_no_cuda_graph(program(TWO_KERNELS)) == ""


def test_cpu_programs_are_not():
    assert cuda.why_no_cuda_graph(program(TWO_KERNELS, device="cpu")) == "the graph runs on cpu: CUDA graphs need CUDA"


def test_one_step_costs_more_graphed_than_launched():
    assert "one step" in cuda.why_no_cuda_graph(program(kernel("k0", "%b0", "%b2")))


def test_a_kernel_writing_an_input_is_graphed_with_a_copy_back():
    assert cuda.why_no_cuda_graph(program(TWO_KERNELS + kernel("k2", "%b1", "%b0"))) == ""


@pytest.mark.parametrize("call, refused", [
    ('"torch.rand_like"(%b1)', True),
    ('"torch.nn.functional.dropout"(%b1, 0.5, True, False)', True),
    ('"torch.nn.functional.dropout"(%b1, 0.5, False, False)', False),  # eval mode: the identity
    ('"torch.nn.functional.dropout"(%b1, p=0.5, training=False)', False),
    ('"ember.rng.philox_seed"("cuda:0")', True),  # dropout's seed: a replay would draw the same
    ('"torch.nn.functional.normalize"(%b1)', False),
])
def test_random_extern_calls_are_refused(call, refused):
    body = kernel("k0", "%b0", "%b1") + f"  extern (%b3) = {call}\n" + kernel("k1", "%b3", "%b2")
    why = cuda.why_no_cuda_graph(program(body))
    assert ("draws random numbers" in why) == refused, why
