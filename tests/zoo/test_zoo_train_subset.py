"""A CI-sized subset of the model zoo in training mode (issue 15; `python -m ember.bench zoo --train` runs all of
it): one training step per model, as the suite takes it (python/ember/bench/zoo_train.py) — the model in
train(), forward, loss = the sum of the float outputs' means, backward(), dropout with `fallback_random`.

Per model: the loss, every parameter's .grad and every float buffer (BatchNorm's running statistics) are correct
by the suite's rule (together they match eager's, or their error against a float64 step is at most 2x eager's), and
Ember differentiated the step ahead of time: the graphs, backward graphs and autograd islands below (data, from
the run that chose the subset; as many backward graphs as graphs: none fell back to eager).
"""
import pytest

for _library in ("timm", "torchvision", "transformers"):
    pytest.importorskip(_library)

import ember  # noqa: E402
from ember.bench import zoo_models, zoo_train  # noqa: E402

# zoo name -> (graphs, backward graphs, autograd islands) of one compiled step
EXPECTED = {
    "timm_resnet10t": (1, 1, 0),
    "timm_mobilenetv3_small_050": (1, 1, 0),
    "hf_vit": (1, 1, 0),
    "hf_gpt2": (1, 1, 0),
    "hf_bert": (1, 1, 0),
    # Found by the 2026-12-03 zoo run: each ran wrong, eagerly or through islands before its fix.
    "timm_convit_tiny": (1, 1, 0),  # pos_proj's weight gradient was 0 (partition recomputed a written table)
    "hf_beit": (1, 1, 0),           # the backward did not verify (collapse hoisted a masked load): eager
    "hf_bart": (1, 1, 0),           # attention with a boolean mask was an island
    "timm_levit_128s": (1, 1, 0),   # reshape_as and the attention-bias getitem were 57 islands
}


@pytest.fixture(autouse=True)
def _fresh():
    ember.reset()
    yield
    ember.reset()


@pytest.mark.parametrize("name", list(EXPECTED))
def test_zoo_training_step(name):
    w = zoo_train.train_workload(zoo_models.build(name), zoo_models.MODELS[name].library)
    eager_model = zoo_train.trained_copy(w)
    eager = zoo_train.judged(eager_model, zoo_train.step(eager_model, w))
    reference = zoo_train.float64_judged(w)
    model = zoo_train.trained_copy(w)
    loss = zoo_train.step(ember.compile(model, options=zoo_train.OPTIONS), w)
    verdict = zoo_train.judge_step(zoo_train.judged(model, loss), eager, reference)
    assert not verdict["wrong"], verdict["worst_tensors"]
    s = ember.stats()
    assert (s["graphs"], s["backward_graphs_compiled"], s["autograd_islands"]) == EXPECTED[name]
