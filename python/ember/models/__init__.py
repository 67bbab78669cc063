"""Reference models for the demo, the benchmarks and the tests.

They are ordinary eager PyTorch code, written the way users write models, so that what Ember captures
from them is what it would capture from real programs. Importing this package needs torch. Plain functions meant to be compiled go through
as_user_code() (user_code.py says why).
"""
from .nanogpt import GPT, GPTConfig, random_tokens
from .seed_block import seed_block, seed_block_inputs
from .user_code import as_user_code

__all__ = ["GPT", "GPTConfig", "random_tokens", "seed_block", "seed_block_inputs", "as_user_code"]
