"""A CI-sized subset of the model zoo (issue 15; `python -m ember.bench zoo` runs all of it): 15 models across
timm (CNN, ViT, MLP-mixer, hybrids), torchvision, transformers (decoder, encoder, encoder-decoder, vision,
speech) and diffusers, built as the suite builds them (python/ember/bench/zoo_models.py).

Per model, under torch.no_grad(): Ember's output is correct by the suite's rule (it matches eager's, or its
error against a float64 run is at most 2x eager's), and ember.explain's graph count is at most torch.compile's.
torch.compile's counts are data here (torch._dynamo.explain on the same call, torch 2.13, recorded when the
subset was chosen) rather than a Dynamo run in CI. Models where Ember makes more graphs today are listed in
MORE_GRAPHS_TODAY with the reason; their count check is an expected failure until issue 15 item 2 fixes
them, and fails once it no longer applies, so that the list is kept true.
"""
import pytest
import torch

for _library in ("timm", "torchvision", "diffusers", "transformers"):
    pytest.importorskip(_library)

import ember  # noqa: E402
from ember.bench import compare, zoo_models, zoo_row  # noqa: E402
from ember.bench.models_workloads import tensors_of  # noqa: E402

# zoo name -> torch.compile's graph count on the suite's call (torch._dynamo.explain)
DYNAMO_GRAPHS = {
    "timm_mobilenetv3_small_050": 1,
    "timm_vit_tiny_patch16_224": 1,
    "timm_mixer_s16_224": 1,
    "timm_mobilevitv2_050": 1,
    "timm_levit_128s": 1,
    "tv_resnet18": 1,
    "tv_shufflenet_v2_x0_5": 1,
    "hf_qwen3": 1,
    "hf_distilbert": 1,
    "hf_bart": 1,
    "hf_vit": 1,
    "hf_wav2vec2": 1,
    "hf_whisper": 1,
    "diffusers_unet2d_condition": 1,
    "diffusers_vae_tiny": 1,
}

# zoo name -> why Ember makes more graphs than torch.compile today (ember.explain's first break reasons)
MORE_GRAPHS_TODAY = {}


@pytest.fixture(autouse=True)
def _fresh():
    ember.reset()
    yield
    ember.reset()


@pytest.mark.parametrize("name", list(DYNAMO_GRAPHS))
def test_zoo_model(name):
    w = zoo_models.build(name)
    with torch.no_grad():
        eager = tensors_of(w.model(*w.args, **w.kwargs))
        reference = zoo_row.float64_outputs(w)
        eager_error = compare.max_abs_error(eager, reference) if reference is not None else None
        info = ember.explain(w.model)(*w.args, **w.kwargs)
        ember.reset()
        out = ember.compile(w.model)(*w.args, **w.kwargs)
    verdict = zoo_row.judge(out, eager, reference, eager_error)
    assert not verdict["wrong"], (verdict, eager_error)
    assert info.graph_count >= 1
    excess = info.graph_count > DYNAMO_GRAPHS[name]
    if name in MORE_GRAPHS_TODAY:
        assert excess, f"{name} no longer makes more graphs than torch.compile: take it off MORE_GRAPHS_TODAY"
        pytest.xfail(f"{info.graph_count} graphs, torch.compile {DYNAMO_GRAPHS[name]}: {MORE_GRAPHS_TODAY[name]}")
    assert not excess, (info.graph_count, DYNAMO_GRAPHS[name], [r.reason for r in info.break_reasons][:5])
