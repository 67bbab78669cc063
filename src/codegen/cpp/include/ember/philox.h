// Counter-based random numbers for generated kernels: the `philox_rand` loop op (loop_ir/ops.def).
//
// Needs: ember/vec.h's VecF (this header is included at its end). Guarantees: philox_uniform(seed,
// counter) is Triton's tl.rand(seed, counter) bit for bit — Philox-4x32-10 with the counter's low and
// high words in c0 and c1 (c2 = c3 = 0), the seed's low and high words as the key, and the first
// output word as a float in [0, 1) by uint_to_uniform_float — and python/ember/rng.py's reference; the
// vector form's lanes are the scalar form's values at counters first, first + step, ...
// Why: dropout's backward recomputes its mask from (seed, counter) instead of saving it, and the CPU
// and GPU backends draw the same numbers (docs/autograd.md, "Random ops").
#pragma once

#include <cstdint>

namespace ember::rt {

inline float philox_uniform(int64_t seed, int64_t counter) {
  const uint64_t c = static_cast<uint64_t>(counter), s = static_cast<uint64_t>(seed);
  uint32_t c0 = static_cast<uint32_t>(c), c1 = static_cast<uint32_t>(c >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(s), k1 = static_cast<uint32_t>(s >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t{0xD2511F53u} * c0, p2 = uint64_t{0xCD9E8D57u} * c2;
    c0 = static_cast<uint32_t>(p2 >> 32) ^ c1 ^ k0;
    c2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<uint32_t>(p2);
    c3 = static_cast<uint32_t>(p0);
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  const int32_t x = static_cast<int32_t>(c0);
  return static_cast<float>(x < 0 ? ~x : x) * 4.6566127342e-10f;  // ~x is tl.rand's -x - 1
}

}  // namespace ember::rt

namespace ember::vec {

// Lanes k = 0 .. kSize-1 draw counter first + k * step (a tail's extra lanes are computed and ignored).
inline VecF philox_uniform(int64_t seed, int64_t first, int64_t step) {
  alignas(64) float lanes[VecF::kSize];
  for (int k = 0; k < VecF::kSize; ++k) lanes[k] = ember::rt::philox_uniform(seed, first + k * step);
  return VecF::load(lanes);
}

}  // namespace ember::vec
