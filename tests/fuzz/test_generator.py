"""The fuzzer's generator: seed -> program is deterministic, every program is valid eager code, and
a few hundred seeds exercise every feature the generator knows (docs/fuzzing.md)."""
from ember.fuzz.generator import generate, runs_eagerly

FEATURES = {
    "pointwise", "reduction", "view", "inplace-view", "input-mutation", "container-mutation", "indexing",
    "gather", "mask-index", "dtype", "shape-branch", "shape-loop", "value-branch", "value-loop", "item",
    "container-read", "container-loop", "side-effect",
    "input-tensor", "input-list", "input-tuple", "input-dict", "input-log", "input-same",
    "dtype-float32", "dtype-float16", "dtype-bfloat16", "dtype-float64", "dtype-int32", "dtype-int64", "dtype-bool",
    "output-tuple", "output-list", "output-dict", "output-single",
}


def test_same_seed_same_program():
    for seed in range(10):
        assert generate(seed).source() == generate(seed).source()


def test_seeds_give_different_programs():
    assert len({generate(seed).source() for seed in range(20)}) == 20


def test_programs_run_eagerly():
    for seed in range(20):
        assert runs_eagerly(generate(seed)), seed


def test_features_are_covered():
    seen = set()
    for seed in range(300):
        seen |= generate(seed).features()
    assert FEATURES <= seen, sorted(FEATURES - seen)
