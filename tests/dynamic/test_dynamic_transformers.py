"""transformers' GPT-2 and LLaMA over changing sequence lengths and batch sizes (issue 14, item 4): results equal
eager's, and Ember compiles no more graphs than torch.compile does on the same schedule (static first, then one
graph with the changing dimension symbolic; `dynamic=True` once).

Tiny random-init configs (2 layers, d=64), `use_cache=False`, no_grad. CI runs three lengths and a short batch
schedule; EMBER_DYNAMIC_FULL=1 runs lengths 8, 16, 17, 31, 32, 64, 100 and batch sizes 1, 3, 8. torch.compile's
counts come from a backend that counts the graphs Dynamo hands it (no Inductor)."""
import os

import pytest
import torch

transformers = pytest.importorskip("transformers")

import ember  # noqa: E402

FULL = os.environ.get("EMBER_DYNAMIC_FULL") == "1"
LENGTHS = (8, 16, 17, 31, 32, 64, 100) if FULL else (8, 16, 17)
BATCHES = (1, 3, 8) if FULL else (3, 8)
VOCAB = 128


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel
    return GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=VOCAB, n_positions=128,
                                      bos_token_id=0, eos_token_id=0))


def llama():
    from transformers import LlamaConfig, LlamaForCausalLM
    return LlamaForCausalLM(LlamaConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128,
                                        num_attention_heads=4, num_key_value_heads=2, vocab_size=VOCAB,
                                        max_position_embeddings=128, bos_token_id=0, eos_token_id=0))


MODELS = {"gpt2": gpt2, "llama": llama}


@pytest.fixture(autouse=True)
def fresh():
    ember.reset()
    yield
    ember.reset()


def build(name):
    torch.manual_seed(0)
    return MODELS[name]().eval()


def ids(b, t):
    return torch.randint(0, VOCAB, (b, t), generator=torch.Generator().manual_seed(b * 1000 + t))


def run_ember(model, shapes, **compile_kwargs):
    g = ember.compile(model, **compile_kwargs)
    with torch.no_grad():
        for b, t in shapes:
            x = ids(b, t)
            torch.testing.assert_close(g(x, use_cache=False).logits, model(x, use_cache=False).logits,
                                       rtol=1e-4, atol=1e-5)
    return ember.stats()


_torch_counts = {}


def torch_graphs(name, shapes, dynamic=None):
    """Graphs torch.compile (Dynamo, default recompile settings) compiles over `shapes` (memoized)."""
    key = (name, tuple(shapes), dynamic)
    if key not in _torch_counts:
        import torch._dynamo
        graphs = []

        def counting(gm, example_inputs):
            graphs.append(gm)
            return gm.forward

        torch._dynamo.reset()
        model = build(name)
        c = torch.compile(model, backend=counting, dynamic=dynamic)
        with torch.no_grad():
            for b, t in shapes:
                c(ids(b, t), use_cache=False)
        torch._dynamo.reset()
        _torch_counts[key] = len(graphs)
    return _torch_counts[key]


@pytest.mark.parametrize("name", list(MODELS))
def test_over_sequence_lengths(name):
    shapes = [(2, t) for t in LENGTHS]
    stats = run_ember(build(name), shapes)
    assert stats["graph_breaks"] == 0, stats
    assert stats["frames_compiled"] <= 2, stats
    assert stats["frames_compiled"] <= torch_graphs(name, shapes), stats


@pytest.mark.parametrize("name", list(MODELS))
def test_dynamic_true_compiles_once(name):
    shapes = [(2, t) for t in LENGTHS]
    stats = run_ember(build(name), shapes, dynamic=True)
    assert stats["frames_compiled"] == 1, stats


@pytest.mark.parametrize("name", list(MODELS))
def test_over_batch_sizes_and_lengths(name):
    shapes = [(b, t) for b in BATCHES for t in LENGTHS[:2]]
    stats = run_ember(build(name), shapes)
    assert stats["frames_compiled"] <= torch_graphs(name, shapes), stats


def test_dynamic_graph_keeps_its_symbols():
    """No symbol of the length is specialized: explain() names no shape fallback and no `s == k` guard."""
    model = build("llama")
    with torch.no_grad():
        r = ember.explain(model, dynamic=True)(ids(2, 17), use_cache=False)
    pinned = [line for g in r.guards for line in g.splitlines() if "shape guard: s" in line and " == " in line]
    assert pinned == [], pinned
