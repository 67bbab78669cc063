"""Ember's counter-based random numbers: the reference of the `philox_rand` core op and the seed draw.

`philox_rand(seed, offset, sizes)` is the eager target of the core op (src/ir/ops.def): float32
uniforms in [0, 1), element i (row-major) computed from the counter `offset + i` alone, keyed by the
0-d int64 tensor `seed`. The function is Triton's `tl.rand(seed, offset + i)` (Philox-4x32-10, the
counter's low and high words in c0 and c1, the seed's in the key, the first output word mapped to
a float as `uint_to_uniform_float` does), so compiled CPU kernels (ember/philox.h), Triton kernels
and this reference draw the same bits. Being a pure function of (seed, counter), a backward can
recompute a dropout mask instead of saving it (docs/autograd.md, "Random ops").

`philox_seed(device)` draws the seed: one int64 per compiled call from torch's default generator of
`device`, so `torch.manual_seed` makes runs reproducible and two calls differ.
"""
import numpy as np
import torch

_M32 = np.uint64(0xFFFFFFFF)
_ROUND_A, _ROUND_B = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_KEY_A, _KEY_B = np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)
# uint_to_uniform_float's scale as float32: the largest with INT32_MAX * scale < 1.
_SCALE = np.float32(4.6566127342e-10)


def philox_uniform(seed, counters):
    """Uniform float32 values for int64 `counters` (a numpy array) under the int `seed`."""
    counters = np.asarray(counters, dtype=np.int64).view(np.uint64)
    c0, c1 = counters & _M32, counters >> np.uint64(32)
    c2 = c3 = np.zeros_like(c0)
    s = np.uint64(int(seed) & 0xFFFFFFFFFFFFFFFF)
    k0, k1 = s & _M32, s >> np.uint64(32)
    for _ in range(10):
        p0, p2 = _ROUND_A * c0, _ROUND_B * c2  # 32 x 32 -> 64 bits: exact in uint64
        c0, c1, c2, c3 = (p2 >> np.uint64(32)) ^ c1 ^ k0, p2 & _M32, (p0 >> np.uint64(32)) ^ c3 ^ k1, p0 & _M32
        k0, k1 = (k0 + _KEY_A) & _M32, (k1 + _KEY_B) & _M32
    x = c0.astype(np.uint32).view(np.int32)
    x = np.where(x < 0, ~x, x)  # -x - 1, as tl.where(x < 0, -x - 1, x)
    return x.astype(np.float32) * _SCALE


def philox_rand(seed, offset, sizes):
    """The `philox_rand` core op: a float32 tensor of `sizes` on the seed's device."""
    count = 1
    for s in sizes:
        count *= int(s)
    values = philox_uniform(int(seed.item()), np.arange(count, dtype=np.int64) + int(offset))
    return torch.from_numpy(values.reshape(tuple(int(s) for s in sizes))).to(seed.device)


def philox_seed(device):
    """One seed from torch's default generator of `device`: a 0-d int64 tensor there."""
    return torch.randint(0, 2**63 - 1, (), dtype=torch.int64, device=device)
