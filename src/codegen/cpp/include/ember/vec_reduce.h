// Horizontal reductions of a VecF and the Welford mean/variance accumulator.
//
// Needs: vec.h's ISA layer and the float forms of maximum/minimum (vec_math.h).
// Guarantees: reductions combine lanes in one fixed tree (lane i with lane i + half, halving until
// one is left), the order the SIMD halving would use, so results are deterministic and the same in
// the scalar ISA build; reduce_max/reduce_min propagate NaN.
// Welford: each lane keeps (mean, m2, weight) for the elements it saw; combining two partial
// results A and B (Chan, Golub and LeVeque) is
//     w = wA + wB,  d = meanB - meanA,  mean = meanA + d * (wB / w),
//     m2 = m2A + m2B + d * d * wA * (wB / w),
// which never subtracts two large sums, so it stays accurate where sum/sum-of-squares does not.
// The weight is a float: one lane counts exactly up to 2^24 additions, so a single accumulator must
// see at most 2^24 * kSize elements (split longer reductions and combine the parts).
#pragma once

namespace ember::vec {
namespace detail {

template <class F>
float tree_reduce(VecF x, F op) {
  float lanes[VecF::kSize];
  x.store(lanes);
  for (int width = VecF::kSize / 2; width >= 1; width /= 2)
    for (int i = 0; i < width; ++i) lanes[i] = op(lanes[i], lanes[i + width]);
  return lanes[0];
}

}  // namespace detail

inline float reduce_add(VecF x) {
  return detail::tree_reduce(x, [](float a, float b) { return a + b; });
}
inline float reduce_max(VecF x) {
  return detail::tree_reduce(x, [](float a, float b) { return maximum(a, b); });
}
inline float reduce_min(VecF x) {
  return detail::tree_reduce(x, [](float a, float b) { return minimum(a, b); });
}

// A finished (or partial) Welford result: variance = m2 / (weight - correction).
struct WelfordS {
  float mean = 0.0f;
  float m2 = 0.0f;
  float weight = 0.0f;

  void add(float x) {
    weight += 1.0f;
    float delta = x - mean;
    mean += delta / weight;
    m2 += delta * (x - mean);
  }
};

inline WelfordS welford_combine(WelfordS a, WelfordS b) {
  if (a.weight == 0.0f) return b;
  if (b.weight == 0.0f) return a;
  float w = a.weight + b.weight;
  float delta = b.mean - a.mean;
  float share = b.weight / w;
  WelfordS out;
  out.mean = a.mean + delta * share;
  out.m2 = a.m2 + b.m2 + delta * delta * a.weight * share;
  out.weight = w;
  return out;
}

struct WelfordF {
  VecF mean, m2, weight;

  void add(VecF x) {
    weight = weight + VecF(1.0f);
    VecF delta = x - mean;
    mean = mean + delta / weight;
    m2 = m2 + delta * (x - mean);
  }
  // Only lanes [0, n) take their element (the tail of a row); the others are left as they were.
  void add(VecF x, int n) {
    MaskF live = MaskF::first(n);
    VecF w = where(live, weight + VecF(1.0f), weight);
    VecF delta = x - mean;
    VecF new_mean = where(live, mean + delta / w, mean);
    m2 = where(live, m2 + delta * (x - new_mean), m2);
    mean = new_mean;
    weight = w;
  }
  // Lanes combined in the same fixed tree as the reductions above.
  WelfordS reduce() const {
    float means[VecF::kSize], m2s[VecF::kSize], weights[VecF::kSize];
    mean.store(means);
    m2.store(m2s);
    weight.store(weights);
    WelfordS lanes[VecF::kSize];
    for (int i = 0; i < VecF::kSize; ++i) lanes[i] = WelfordS{means[i], m2s[i], weights[i]};
    for (int width = VecF::kSize / 2; width >= 1; width /= 2)
      for (int i = 0; i < width; ++i) lanes[i] = welford_combine(lanes[i], lanes[i + width]);
    return lanes[0];
  }
};

// Lane-wise combine of two vector accumulators (per-thread partials of one reduction).
inline WelfordF welford_combine(const WelfordF& a, const WelfordF& b) {
  VecF zero(0.0f);
  VecF w = a.weight + b.weight;
  VecF delta = b.mean - a.mean;
  VecF share = where(w == zero, zero, b.weight / w);
  WelfordF out;
  out.mean = a.mean + delta * share;
  out.m2 = a.m2 + b.m2 + delta * delta * a.weight * share;
  out.weight = w;
  return out;
}

inline WelfordS welford_reduce(const WelfordF& acc) { return acc.reduce(); }

}  // namespace ember::vec
