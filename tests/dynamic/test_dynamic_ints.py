"""Dynamic Python ints (issue 14: "integers, where they are not specialized, become symbols"; docs/dynamic-shapes.md,
"Python ints"): an int argument, module attribute or global whose value changed becomes an int symbol read at run
time from its source (runtime::SymbolBinding), flowing through the SymInt machinery into kernels as an argument;
bools, 0, negative ints and ints used as structure (range() bounds, list indices) stay static, with the reason in
the guards. Slices whose bounds are sizes or dynamic ints keep their symbols (`mask[:, :, :T, :T]`)."""
import pytest
import torch

import ember


@pytest.fixture(autouse=True)
def fresh():
    ember.reset()
    yield
    ember.reset()


def compiles():
    return ember.stats()["frames_compiled"]


class Counter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return x * self.calls + 1


@pytest.mark.parametrize("dynamic", [None, True])
def test_counter_attribute_compiles_at_most_twice(dynamic):
    model, ref = Counter(), Counter()
    compiled = ember.compile(model, dynamic=dynamic)
    for _ in range(10):
        x = torch.randn(4, 8)
        torch.testing.assert_close(compiled(x), ref(x))
    assert model.calls == ref.calls == 10
    assert compiles() <= 2, ember.stats()


def test_counter_attribute_static_under_dynamic_false():
    model, ref = Counter(), Counter()
    compiled = ember.compile(model, dynamic=False)
    for _ in range(4):
        x = torch.randn(4, 8)
        torch.testing.assert_close(compiled(x), ref(x))
    assert model.calls == 4
    assert compiles() == 4, ember.stats()


def scale_shift(x, n):
    return torch.relu(x) * n + torch.full((3,), n)


def test_int_argument_dynamic_true_compiles_once():
    compiled = ember.compile(scale_shift, dynamic=True)
    for n in (2, 3, 7, 100, 1):
        x = torch.randn(4, 3)
        torch.testing.assert_close(compiled(x, n), scale_shift(x, n))
    assert compiles() == 1, ember.stats()


def test_int_argument_dynamic_false_recompiles_per_value():
    compiled = ember.compile(scale_shift, dynamic=False)
    for n in (2, 3, 7):
        x = torch.randn(4, 3)
        torch.testing.assert_close(compiled(x, n), scale_shift(x, n))
    assert compiles() == 3, ember.stats()


def test_int_argument_automatic_dynamic_static_then_symbolic():
    compiled = ember.compile(scale_shift)
    for n in (2, 3, 7, 100):
        x = torch.randn(4, 3)
        torch.testing.assert_close(compiled(x, n), scale_shift(x, n))
    assert compiles() == 2, ember.stats()


STEP = 3


def uses_global(x):
    return x + STEP


def test_global_int_becomes_symbolic_after_a_change():
    global STEP
    compiled = ember.compile(uses_global)
    try:
        for step in (3, 4, 5, 6):
            STEP = step
            x = torch.randn(5)
            torch.testing.assert_close(compiled(x), uses_global(x))
    finally:
        STEP = 3
    assert compiles() == 2, ember.stats()


def test_bool_zero_and_negative_stay_static():
    fn = lambda x, n: x * n  # noqa: E731
    compiled = ember.compile(fn, dynamic=True)
    x = torch.randn(4)
    for n in (5, 6, True, 0, -2):  # one graph for the ints >= 1, one each for the rest
        torch.testing.assert_close(compiled(x, n), fn(x, n))
    assert compiles() == 4, ember.stats()
    compiled(x, 9)
    assert compiles() == 4, ember.stats()
    guards = "\n".join(ember.explain(fn, dynamic=True)(x, 5).guards)
    assert "type(L['n']) is int (its value in the shape guard)" in guards, guards
    assert "1 <= L['n'] (s1; ints below 1 are compiled apart)" in guards, guards


def repeat_add(x, n):
    for _ in range(n):
        x = x + 1
    return x * n


def test_range_bound_specializes_with_a_reason():
    r = ember.explain(repeat_add, dynamic=True)(torch.randn(4), 3)
    guards = "\n".join(r.guards)
    assert "s1 == 3: an argument of range()" in guards, guards
    ember.reset()
    compiled = ember.compile(repeat_add, dynamic=True)
    for n in (3, 4, 3):
        x = torch.randn(4)
        torch.testing.assert_close(compiled(x, n), repeat_add(x, n))
    assert compiles() == 2, ember.stats()


def pick(x, xs, i):
    return x * xs[i] + i


def test_list_index_specializes():
    compiled = ember.compile(pick, dynamic=True)
    xs = [2.0, 3.0, 4.0, 5.0]
    for i in (2, 3, 2):
        x = torch.randn(4)
        torch.testing.assert_close(compiled(x, xs, i), pick(x, xs, i))
    assert compiles() == 2, ember.stats()


def test_int_dim_argument_stays_correct():
    fn = lambda x, d: x.sum(d) * d  # noqa: E731
    compiled = ember.compile(fn, dynamic=True)
    for d in (1, 2, 1):
        x = torch.randn(2, 3, 4)
        torch.testing.assert_close(compiled(x, d), fn(x, d))


def test_returned_and_stored_ints_replay_arithmetic():
    class Steps(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.steps = 5

        def forward(self, x, n):
            self.steps = self.steps + n * 2
            return x * self.steps, self.steps - 1

    model, ref = Steps(), Steps()
    compiled = ember.compile(model, dynamic=True)
    for n in (2, 3, 4, 5):
        x = torch.randn(3)
        got, want = compiled(x, n), ref(x, n)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1] and type(got[1]) is int
    assert model.steps == ref.steps
    assert compiles() <= 2, ember.stats()


# --- slices whose bounds are symbols ---------------------------------------------------------------------------


class MaskedScores(torch.nn.Module):
    """GPT-style causal mask: a registered buffer sliced by the sequence length."""

    def __init__(self, block=64):
        super().__init__()
        self.register_buffer("bias", torch.tril(torch.ones(block, block)).view(1, 1, block, block))

    def forward(self, x):
        B, T, C = x.size()
        att = (x @ x.transpose(1, 2)).view(B, 1, T, T)
        return att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf")).softmax(-1)


@pytest.mark.parametrize("dynamic", [None, True])
def test_gpt_mask_slice_compiles_once_over_lengths(dynamic):
    model = MaskedScores()
    compiled = ember.compile(model, dynamic=dynamic)
    for t in (8, 16, 17, 31, 40):
        x = torch.randn(2, t, 4)
        torch.testing.assert_close(compiled(x), model(x))
    assert compiles() == (1 if dynamic else 2), ember.stats()
    r = ember.explain(model, dynamic=True)(torch.randn(2, 9, 4))
    pinned = [line for g in r.guards for line in g.splitlines() if "shape guard: s" in line and " == " in line]
    assert pinned == [], r.guards


# (ops over a slice that is neither dense nor ordered by the sizes' symbols specialize: .contiguous() copies
# it; docs/dynamic-shapes.md)
SLICES = {
    "prefix": lambda x, s, e: x[:, :e] * 2,
    "rows": lambda x, s, e: x[s:e] + 1,
    "window": lambda x, s, e: x[..., s:e].contiguous() + 1,
    "suffix": lambda x, s, e: x[:, -s:].contiguous().sum(-1),
    "both": lambda x, s, e: x[s:, s:e].contiguous() * 3,
}


@pytest.mark.parametrize("backend", ["eager", "ember"])
@pytest.mark.parametrize("name", list(SLICES))
def test_slices_with_int_bounds_compile_once(name, backend):
    fn = SLICES[name]
    compiled = ember.compile(fn, dynamic=True, backend=backend)
    for s, e in ((2, 5), (3, 9), (2, 12), (4, 7)):
        x = torch.randn(12, 12)
        torch.testing.assert_close(compiled(x, s, e), fn(x, s, e))
    assert compiles() == 1, ember.stats()


def test_slice_outside_a_tensor_subscript_specializes():
    fn = lambda x, n: x * len([1, 2, 3, 4, 5, 6][:n])  # noqa: E731
    compiled = ember.compile(fn, dynamic=True)
    for n in (2, 3, 2):
        x = torch.randn(3)
        torch.testing.assert_close(compiled(x, n), fn(x, n))
    assert compiles() == 2, ember.stats()


def test_symbolic_scalar_is_a_graph_argument():
    r = ember.explain(scale_shift, dynamic=True)(torch.randn(4, 3), 5)
    graph = "\n".join(r.graphs)
    assert "symbol s2 hint=5 range=[1, inf] int" in graph, graph
    assert "mul(%1, sym(s2))" in graph and "full((3,), sym(s2))" in graph, graph


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (the Triton backend)")
def test_int_argument_on_cuda_is_a_kernel_argument():
    fn = lambda x, n: torch.relu(x) * n + n  # noqa: E731
    compiled = ember.compile(fn, dynamic=True)
    for n in (2, 3, 16, 17, 1):  # 16: another divisibility class of the size arguments
        x = torch.randn(64, 3, device="cuda")
        torch.testing.assert_close(compiled(x, n), fn(x, n))
    assert compiles() == 1, ember.stats()
