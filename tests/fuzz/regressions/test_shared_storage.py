"""Storage shared under names the program cannot see: the scheduler must not move a read of one
buffer past an in-place write to another that shares its storage (src/scheduler/dependencies.cpp).
Found by the fuzzer: graph inputs that alias (seed 39: at a graph break the resume function receives
a tensor both as a local and as a stack value; calling a function with one tensor twice is the same
case without a break), and an extern call's result that is a view of an input (seed 22: movedim)."""
import pytest
import torch

import ember


def twice_then_mutate(a, b):
    t = b * 2
    a.add_(1)
    return t.reshape(-1)


def twice_then_mutate_a_view(a, b):
    t = b * 2
    a[0].add_(1)
    return t.reshape(-1)


def stack_value_at_a_break(x):
    t = x * x.mean().item()
    x.add_(1)
    return t.reshape(-1)


@pytest.mark.parametrize("fn", [twice_then_mutate, twice_then_mutate_a_view])
def test_one_tensor_passed_twice(fn):
    x, y = torch.tensor([1.0, 2.0, 3.0]), torch.tensor([1.0, 2.0, 3.0])
    ember.reset()
    torch.testing.assert_close(ember.compile(fn)(x, x), fn(y, y))
    torch.testing.assert_close(x, y)


def test_local_and_stack_value_at_a_break():
    x, y = torch.tensor([1.0, 2.0, 3.0]), torch.tensor([1.0, 2.0, 3.0])
    ember.reset()
    torch.testing.assert_close(ember.compile(stack_value_at_a_break)(x), stack_value_at_a_break(y))
    torch.testing.assert_close(x, y)


def view_by_a_torch_call_then_mutate(x):
    t = x.unsqueeze(0).expand(3, *x.shape).movedim(1, 2) * 1
    x.sub_(0.25)
    return t.mean(dim=(2, 1), keepdim=True)


@pytest.mark.parametrize("shape", [(1, 1), (2, 3)])
def test_extern_view_read_before_a_mutation(shape):
    x, y = torch.ones(shape), torch.ones(shape)
    ember.reset()
    torch.testing.assert_close(ember.compile(view_by_a_torch_call_then_mutate)(x), view_by_a_torch_call_then_mutate(y))
    torch.testing.assert_close(x, y)
