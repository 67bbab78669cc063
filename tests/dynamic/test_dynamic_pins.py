"""Ops that used to pin a size under dynamic=True (issue 14: `python -m ember.bench dynamic --probe`
found them in transformers' BERT, RoBERTa, T5, BLOOM, Whisper and wav2vec2; torch.max/min with a dim; where
with a size-1 result dim; getitem with list indices; gelu over a slice of a conv's output): one graph over several lengths, results equal
eager's, no `s == k` relation in the guards."""
import pytest
import torch

import ember


@pytest.fixture(autouse=True)
def fresh():
    ember.reset()
    yield
    ember.reset()


class Embeddings(torch.nn.Module):
    """BERT's embeddings: position ids and token type ids are buffers sliced by the length and gathered."""

    def __init__(self):
        super().__init__()
        self.words = torch.nn.Embedding(50, 8)
        self.types = torch.nn.Embedding(2, 8)
        self.register_buffer("position_ids", torch.arange(64).expand(1, -1), persistent=False)
        self.register_buffer("token_type_ids", torch.zeros(1, 64, dtype=torch.long), persistent=False)

    def forward(self, ids):
        b, t = ids.shape
        position_ids = self.position_ids[:, :t]
        buffered = torch.gather(self.token_type_ids.expand(position_ids.shape[0], -1), dim=1, index=position_ids)
        token_type_ids = buffered.expand(b, t)
        return self.words(ids) + self.types(token_type_ids) + position_ids[..., None]


def relative_buckets(x):
    """T5's bucket arithmetic: `buckets += torch.where(...)` on a tensor."""
    t = x.shape[1]
    rel = torch.arange(t)[None, :] - torch.arange(t)[:, None]
    buckets = (rel > 0).to(torch.long) * 4
    buckets += torch.where(rel.abs() < 2, rel.abs(), torch.full_like(rel, 3))
    return x[0][:, None] * buckets


def alibi(x):
    """BLOOM's alibi: a per-head slope times the positions, repeated over the batch."""
    b, t = x.shape
    slopes = torch.tensor([0.5, 0.25, 0.125, 0.0625])
    out = slopes[:, None, None] * torch.arange(t)
    return out.repeat(b, 1, 1) + x.sum()


def scaled_in_place(x, y):
    z = x * 2
    z += y
    z *= 3
    z -= 1
    z /= 2
    return z


def conv_front_end():
    """wav2vec2's feature encoder in small: strided convs over the samples (lengths floor divisions of them)."""
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv1d(1, 4, 10, stride=5), torch.nn.GELU(), torch.nn.Conv1d(4, 4, 3, stride=2),
                               torch.nn.GELU())


def extremes(x):
    """torch.max / torch.min's reduction forms: values and indices (a named tuple), and the whole-tensor form."""
    values, indices = torch.max(x, dim=-1)
    low = x.min(dim=1, keepdim=True)
    return values * 2 + indices, low.values + low.indices, torch.max(x) + x.min()


class PositionBias(torch.nn.Module):
    """T5's causal position bias: a permuted [1, H, T, T] bias masked by a [1, 1, T, T] causal bool (a size-1 dim)."""

    def __init__(self):
        super().__init__()
        self.buckets = torch.nn.Embedding(8, 4)

    def forward(self, x):
        t = x.shape[1]
        rel = torch.arange(t)[None, :] - torch.arange(t)[:, None]
        bias = self.buckets(rel.abs().clamp(max=7)).permute([2, 0, 1]).unsqueeze(0)
        causal = (torch.arange(t)[:, None] >= torch.arange(t)[None, :]).view(1, 1, t, t)
        return torch.where(causal, bias, torch.finfo(x.dtype).min) + x[:, None, None, :]


def additive_mask(x):
    """BLOOM's mask: a causal [1, 1, T, T] bool expanded over the batch, made additive through a 0-d zero."""
    b, t = x.shape
    mask = (torch.arange(t)[:, None] >= torch.arange(t)[None, :])[None, None].expand(b, 1, t, t)
    return torch.where(mask, torch.zeros(()), torch.finfo(x.dtype).min) + x[:, None, None, :]


class SplitHeads(torch.nn.Module):
    """Falcon's multi-query split: `qkv[..., :-2, :]`, `qkv[..., [-2], :]`, `qkv[..., [-1], :]` (list indices), and
    rotate_half of the one key head."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.embed = torch.nn.Embedding(50, 8)
        self.qkv = torch.nn.Linear(8, 24)

    def forward(self, ids):
        b, t = ids.shape
        qkv = self.qkv(self.embed(ids)).view(b, t, 4 + 2, 4)
        q, k, v = qkv[..., :-2, :], qkv[..., [-2], :], qkv[..., [-1], :]
        k = k.transpose(1, 2)  # [B, 1, T, 4]; rotate_half's `-k[..., 2:]`: a slice with a size-1 dim
        k = torch.cat((-k[..., 2:], k[..., :2]), dim=-1).transpose(1, 2)
        return (q * k + v).flatten(2) + qkv[:, [0, -1]].sum()


class PositionalConv(torch.nn.Module):
    """wav2vec2's front end in small: strided convs over the samples, then the positional conv over the transposed
    features and its `[..., :-1]` (a slice whose size is a floor division of the length) through gelu."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.features = torch.nn.Sequential(torch.nn.Conv1d(1, 8, 10, stride=5), torch.nn.GELU(),
                                            torch.nn.Conv1d(8, 8, 3, stride=2))
        self.positional = torch.nn.Conv1d(8, 8, 4, padding=2, groups=2)

    def forward(self, x):
        h = self.features(x[:, None]).transpose(1, 2)
        y = torch.nn.functional.gelu(self.positional(h.transpose(1, 2))[:, :, :-1])
        out = h + y.transpose(1, 2)
        return out.view(*out.shape[:-1], -1, 4).softmax(-1)  # heads of a length that is a floor division


CASES = {
    "max_min_reductions": (extremes, lambda t: (torch.randn(3, t),)),
    "conv1d_lengths": (conv_front_end(), lambda t: (torch.randn(2, 1, 20 * t),)),
    "conv2d_sizes": (torch.nn.Conv2d(3, 5, 4, stride=2, padding=1), lambda t: (torch.randn(2, 3, t, t + 3),)),
    "gather_embedding": (Embeddings(), lambda t: (torch.randint(0, 50, (2, t)),)),
    "iadd_where": (relative_buckets, lambda t: (torch.randn(2, t),)),
    "repeat": (alibi, lambda t: (torch.randn(3, t),)),
    "in_place_operators": (scaled_in_place, lambda t: (torch.randn(2, t), torch.randn(t))),
    "where_size_one_dim": (PositionBias(), lambda t: (torch.randn(2, t),)),
    "where_expanded_mask": (additive_mask, lambda t: (torch.randn(2, t),)),
    "list_index": (SplitHeads(), lambda t: (torch.randint(0, 50, (2, t)),)),
    "slice_of_floor_division": (PositionalConv(), lambda t: (torch.randn(2, 100 * t),)),
}


@pytest.mark.parametrize("backend", ["eager", "ember"])
@pytest.mark.parametrize("name", list(CASES))
def test_one_graph_over_lengths(name, backend):
    fn, make = CASES[name]
    c = ember.compile(fn, dynamic=True, backend=backend)
    with torch.no_grad():
        for t in (9, 13, 17):
            args = make(t)
            torch.testing.assert_close(c(*args), fn(*args))
    assert ember.stats()["frames_compiled"] == 1, ember.stats()
    ember.reset()
    with torch.no_grad():
        r = ember.explain(fn, dynamic=True, backend=backend)(*make(11))
    # (A conv's input channels must be its weight's: that one is pinned, and never varies.)
    pinned = [line for g in r.guards for line in g.splitlines()
              if "shape guard: s" in line and " == " in line and "needs its input's channels static" not in line]
    assert pinned == [], pinned
    assert all(not f for f in r.shape_fallbacks), r.shape_fallbacks


def test_in_place_on_a_tensor_that_requires_grad_is_still_right():
    """`x += y` where x requires grad (not a leaf) with grad enabled: the rule declines, the meta kernel answers."""
    def f(a, b):
        z = a * 2
        z += b
        return z.sum()
    a = torch.randn(3, 5, requires_grad=True)
    b = torch.randn(3, 5)
    c = ember.compile(f, dynamic=True)
    torch.testing.assert_close(c(a, b), f(a, b))


@pytest.mark.parametrize("name", ["where_size_one_dim", "where_expanded_mask", "list_index"])
def test_a_size_the_guards_exclude_recompiles(name):
    """A length of 1 breaks the graph's `2 <= s` guard (1 decides broadcasting): a second graph, still right."""
    fn, make = CASES[name]
    c = ember.compile(fn, dynamic=True)
    with torch.no_grad():
        for t in (9, 1, 13):
            args = make(t)
            torch.testing.assert_close(c(*args), fn(*args))
    assert ember.stats()["frames_compiled"] == 2, ember.stats()


def test_a_guard_over_one_symbol_narrows_its_range():
    """The convs' relations (`10 <= s1`, `3 <= (s1 + -10) // 5 + 1`) narrow s1's range (s1 >= 20), so the later
    ones and the strides of the positional conv's slice are decided without more guards or pins."""
    r = ember.explain(PositionalConv(), dynamic=True)(torch.randn(2, 900))
    relations = [line for g in r.guards for line in g.splitlines() if "shape guard:" in line and "<=" in line
                 and "compiled apart" not in line]
    assert len(relations) == 2, relations
    assert not any(" == " in line.split("shape guard:")[1].split(":")[0] for g in r.guards for line in g.splitlines()
                   if "shape guard: s" in line), r.guards
