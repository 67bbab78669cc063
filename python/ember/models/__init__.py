"""Reference models for the demo, the benchmarks and the tests.

They are ordinary eager PyTorch code, written the way users write models, so that what Ember captures
from them is what it would capture from real programs. Importing this package needs torch.
"""
from .nanogpt import GPT, GPTConfig, random_tokens
from .seed_block import seed_block, seed_block_inputs

__all__ = ["GPT", "GPTConfig", "random_tokens", "seed_block", "seed_block_inputs"]
