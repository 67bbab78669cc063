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

// The double carry of a long float sum: the vector loop adds in float lanes and, every block of
// vectors, moves each accumulator's lanes in here and restarts it from zero, so no float partial
// sums more than a block (docs/codegen-cpp.md, "Float accumulators"). The result is then within a
// hair of the correctly rounded sum, as accurate as torch's cascade summation or better.
struct SumCarry {
  double lanes[VecF::kSize] = {};

  void add(VecF x) {
    float t[VecF::kSize];
    x.store(t);
    for (int i = 0; i < VecF::kSize; ++i) lanes[i] += double(t[i]);
  }
  // The carry plus `rest` (the float accumulator's last partial), lanes combined in the fixed tree
  // in double, rounded to float once.
  float total(VecF rest) const {
    SumCarry all = *this;
    all.add(rest);
    for (int width = VecF::kSize / 2; width >= 1; width /= 2)
      for (int i = 0; i < width; ++i) all.lanes[i] += all.lanes[i + width];
    return float(all.lanes[0]);
  }
};

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
  // The same step with the division by the new weight replaced by a multiply with `inv_weight`,
  // which the caller guarantees is 1.0f / (weight + 1) in every lane (all lanes of the accumulator
  // have taken the same number of elements): one reciprocal per step of a loop serves every
  // accumulator and lane, where add() divides per vector on the mean's dependency chain. Inductor's
  // CPU Welford does the same (reciprocal weights); mean differs from add()'s by at most an ulp.
  void add(VecF x, VecF inv_weight) {
    weight = weight + VecF(1.0f);
    VecF delta = x - mean;
    mean = mean + delta * inv_weight;
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

// The double carry of a long Welford reduction, as SumCarry for sums: every block of vectors each
// lane's float partial (a block's elements) is combined into its lane here, in double.
struct WelfordCarry {
  double mean[VecF::kSize] = {}, m2[VecF::kSize] = {}, weight[VecF::kSize] = {};

  void combine_lane(int i, double b_mean, double b_m2, double b_weight) {
    if (b_weight == 0.0) return;
    const double w = weight[i] + b_weight, delta = b_mean - mean[i], share = b_weight / w;
    m2[i] = m2[i] + b_m2 + delta * delta * weight[i] * share;
    mean[i] = mean[i] + delta * share;
    weight[i] = w;
  }
  void add(const WelfordF& acc) {
    float means[VecF::kSize], m2s[VecF::kSize], weights[VecF::kSize];
    acc.mean.store(means);
    acc.m2.store(m2s);
    acc.weight.store(weights);
    for (int i = 0; i < VecF::kSize; ++i) combine_lane(i, means[i], m2s[i], weights[i]);
  }
  // The carry plus `rest` (the last partial), lanes combined in the fixed tree, rounded to float once.
  WelfordS total(const WelfordF& rest) const {
    WelfordCarry all = *this;
    all.add(rest);
    for (int width = VecF::kSize / 2; width >= 1; width /= 2)
      for (int i = 0; i < width; ++i) all.combine_lane(i, all.mean[i + width], all.m2[i + width], all.weight[i + width]);
    return WelfordS{float(all.mean[0]), float(all.m2[0]), float(all.weight[0])};
  }
};

}  // namespace ember::vec
