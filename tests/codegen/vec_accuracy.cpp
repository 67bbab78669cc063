// Test driver for ember/vec.h, compiled by tests/codegen/test_vec.py once per ISA the machine has
// (with the generated-code flags: -O3 -ffp-contract=off, plus the ISA's own).
//
// Modes (argv[1]):
//   ulp SEED RANDOM STRIDE  max ulp distance to glibc per function over special values, every
//                           STRIDE-th float in [-1, 1], RANDOM random bit patterns (RANDOM/10 for
//                           sin and cos) and a tenth as many uniform samples of each function's
//                           unsaturated range; also counts vector lanes whose bits differ from the
//                           scalar form.
//   tails                   masked loads/stores against a guard page and canaries.
//   half16 OUT              every 16-bit pattern through load_bf16/load_f16 (vector, tail, scalar).
//   tohalf IN OUT           float bits from IN through store_bf16/store_f16 (vector, tail, scalar).
//   misc SEED               maximum/minimum, rounding, sign, relu, masks, reductions, Welford,
//                           divide by a DivisorF against IEEE division.
//   nonpos STRIDE SSTRIDE   exp_nonpositive against exp bit for bit over every non-positive float
//                           and NaN (vector lanes every STRIDE-th block, float forms every SSTRIDE-th).
//   bench                   throughput of exp and tanh against a scalar libm loop (not a test).
// Failures are printed as lines starting with FAIL; the Python test asserts on them.
#include "ember/vec.h"

#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace ev = ember::vec;
using ev::VecF;

namespace {

constexpr int K = VecF::kSize;

uint32_t bits_of(float f) { return ev::float_bits(f); }
float float_of(uint32_t u) { return ev::bits_float(u); }

// Distance in representable floats; -0 and +0 are one point, but a sign-of-zero mismatch counts as
// a failure (returns a huge distance), and so does NaN against a number.
int64_t ulp_distance(float a, float b) {
  bool na = a != a, nb = b != b;
  if (na || nb) return na && nb ? 0 : INT64_C(1) << 40;
  if (a == 0.0f && b == 0.0f) return std::signbit(a) == std::signbit(b) ? 0 : INT64_C(1) << 40;
  auto ordered = [](float f) {
    int64_t i = int32_t(bits_of(f));
    return i < 0 ? int64_t(INT32_MIN) - i : i;
  };
  int64_t d = ordered(a) - ordered(b);
  return d < 0 ? -d : d;
}

bool same_bits(float a, float b) { return (a != a && b != b) || bits_of(a) == bits_of(b); }

struct Function {
  const char* name;
  float (*reference)(float);
  float (*scalar)(float);
  VecF (*vector)(VecF);
  float lo, hi;  // the range where the function is not saturated, for the focused sample
};

float ref_sigmoid(float x) { return float(1.0 / (1.0 + std::exp(-double(x)))); }

const Function kFunctions[] = {
    {"exp", [](float x) { return ::expf(x); }, [](float x) { return ev::exp(x); },
     [](VecF x) { return ev::exp(x); }, -105.0f, 90.0f},
    {"log", [](float x) { return ::logf(x); }, [](float x) { return ev::log(x); },
     [](VecF x) { return ev::log(x); }, 0.0f, 4.0f},
    {"tanh", [](float x) { return ::tanhf(x); }, [](float x) { return ev::tanh(x); },
     [](VecF x) { return ev::tanh(x); }, -10.0f, 10.0f},
    {"erf", [](float x) { return ::erff(x); }, [](float x) { return ev::erf(x); },
     [](VecF x) { return ev::erf(x); }, -4.5f, 4.5f},
    {"sigmoid", ref_sigmoid, [](float x) { return ev::sigmoid(x); },
     [](VecF x) { return ev::sigmoid(x); }, -110.0f, 20.0f},
    {"log1p", [](float x) { return ::log1pf(x); }, [](float x) { return ev::log1p(x); },
     [](VecF x) { return ev::log1p(x); }, -1.0f, 4.0f},
    {"expm1", [](float x) { return ::expm1f(x); }, [](float x) { return ev::expm1(x); },
     [](VecF x) { return ev::expm1(x); }, -20.0f, 90.0f},
    {"sin", [](float x) { return ::sinf(x); }, [](float x) { return ev::sin(x); },
     [](VecF x) { return ev::sin(x); }, -1000.0f, 1000.0f},
    {"cos", [](float x) { return ::cosf(x); }, [](float x) { return ev::cos(x); },
     [](VecF x) { return ev::cos(x); }, -1000.0f, 1000.0f},
};

std::vector<float> special_values() {
  std::vector<float> v = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, float_of(0x7f800001u),
                          float_of(0x7fffffffu), 1.0f, -1.0f, 0.5f, -0.5f, 2.0f, -2.0f,
                          float_of(1u), float_of(0x80000001u), float_of(0x007fffffu),
                          float_of(0x00800000u), float_of(0x80800000u), float_of(0x7f7fffffu),
                          float_of(0xff7fffffu), 88.72283935546875f, 88.72284698486328f, 88.7f, 89.0f,
                          -87.33654022216797f, -103.97207641601562f, -103.97208404541016f, -104.0f,
                          -149.0f * 0.6931472f, 3.9f, 3.92f, 4.0f, 9.0f, 9.1f, 10.0f, -0.99999994f,
                          1e-10f, -1e-10f, 1e-30f, -1e-30f, 0.6931472f, -0.6931472f, 0.34657359f,
                          1.5707964f, 3.1415927f, 16777216.0f, 16777218.0f, 1e20f, -1e20f, 1e-3f};
  // Every float within 64 ulp of the over/underflow thresholds and of the range seams.
  for (float seam : {88.72283935546875f, -87.33654022216797f, -103.97207641601562f, 1.0f, -1.0f,
                     4.0f, 10.0f, 0.5f, 0.34657359f, -0.34657359f, 1.4142135f, 0.70710677f}) {
    float up = seam, down = seam;
    for (int i = 0; i < 64; ++i) {
      up = std::nextafter(up, INFINITY);
      down = std::nextafter(down, -INFINITY);
      v.push_back(up);
      v.push_back(down);
    }
  }
  return v;
}

struct UlpStats {
  int64_t max_ulp = 0;
  float worst_x = 0.0f;
  int64_t checked = 0;
  int64_t vector_scalar_mismatch = 0;
  float mismatch_x = 0.0f;
};

void check_batch(const Function& f, const float* xs, int count, UlpStats& st) {
  for (int base = 0; base < count; base += K) {
    int n = count - base < K ? count - base : K;
    VecF out = f.vector(VecF::load(xs + base, n));
    float lanes[K];
    out.store(lanes);
    for (int i = 0; i < n; ++i) {
      float x = xs[base + i];
      float ref = f.reference(x);
      float mine = f.scalar(x);
      int64_t d = ulp_distance(mine, ref);
      if (d > st.max_ulp) {
        st.max_ulp = d;
        st.worst_x = x;
      }
      if (!same_bits(lanes[i], mine)) {
        if (st.vector_scalar_mismatch == 0) st.mismatch_x = x;
        ++st.vector_scalar_mismatch;
      }
    }
    st.checked += n;
  }
}

int run_ulp(uint64_t seed, int64_t random_count, uint32_t stride) {
  std::printf("seed %llu kSize %d\n", (unsigned long long)seed, K);
  std::vector<float> specials = special_values();
  std::vector<float> batch;
  batch.reserve(1 << 16);
  for (const Function& f : kFunctions) {
    UlpStats st;
    check_batch(f, specials.data(), int(specials.size()), st);
    auto flush = [&] {
      check_batch(f, batch.data(), int(batch.size()), st);
      batch.clear();
    };
    // Every stride-th float of [-1, 1], both signs.
    for (uint32_t u = 0; u <= 0x3f800000u; u += stride) {
      batch.push_back(float_of(u));
      batch.push_back(float_of(u | 0x80000000u));
      if (batch.size() >= (1 << 16)) flush();
    }
    flush();
    std::mt19937_64 rng(seed);
    // sin and cos are extras beyond the list: a tenth of the random sample.
    bool extra = std::strcmp(f.name, "sin") == 0 || std::strcmp(f.name, "cos") == 0;
    int64_t count = extra ? random_count / 10 : random_count;
    for (int64_t i = 0; i < count; ++i) {
      batch.push_back(float_of(uint32_t(rng())));
      if (batch.size() >= (1 << 16)) flush();
    }
    std::uniform_real_distribution<float> focus(f.lo, f.hi);
    for (int64_t i = 0; i < count / 10; ++i) {
      batch.push_back(focus(rng));
      if (batch.size() >= (1 << 16)) flush();
    }
    flush();
    std::printf("ulp %s max %lld worst %a checked %lld vector_scalar_mismatch %lld at %a\n", f.name,
                (long long)st.max_ulp, double(st.worst_x), (long long)st.checked,
                (long long)st.vector_scalar_mismatch, double(st.mismatch_x));
  }
  return 0;
}

int failures = 0;
void fail(const std::string& what) {
  ++failures;
  std::printf("FAIL %s\n", what.c_str());
}

// A buffer whose end is the start of an inaccessible page: touching past it faults.
struct GuardedPage {
  size_t page = size_t(sysconf(_SC_PAGESIZE));
  char* base = nullptr;
  GuardedPage() {
    base = static_cast<char*>(mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (base == MAP_FAILED) {
      std::printf("FAIL mmap\n");
      std::exit(1);
    }
    mprotect(base + page, page, PROT_NONE);
  }
  ~GuardedPage() { munmap(base, 2 * page); }
  template <class T>
  T* ending_with(int n) { return reinterpret_cast<T*>(base + page) - n; }
};

int run_tails() {
  GuardedPage guard;
  for (int n = 0; n <= K; ++n) {
    // Loads of n elements ending at the guard page, and stores of n elements there.
    float* fp = guard.ending_with<float>(n);
    for (int i = 0; i < n; ++i) fp[i] = float(i + 1);
    VecF v = VecF::load(fp, n);
    for (int i = 0; i < K; ++i)
      if (v.lane(i) != (i < n ? float(i + 1) : 0.0f)) fail("float tail load n=" + std::to_string(n));
    (VecF(7.0f)).store(fp, n);
    for (int i = 0; i < n; ++i)
      if (fp[i] != 7.0f) fail("float tail store n=" + std::to_string(n));

    uint16_t* hp = guard.ending_with<uint16_t>(n);
    for (int i = 0; i < n; ++i) hp[i] = ev::f32_to_bf16(float(i + 1));
    VecF b = ev::load_bf16(hp, n);
    for (int i = 0; i < n; ++i) hp[i] = ev::f32_to_f16(float(i + 1));
    VecF h = ev::load_f16(hp, n);
    for (int i = 0; i < K; ++i) {
      float want = i < n ? float(i + 1) : 0.0f;
      if (b.lane(i) != want) fail("bf16 tail load n=" + std::to_string(n));
      if (h.lane(i) != want) fail("f16 tail load n=" + std::to_string(n));
    }
    ev::store_bf16(hp, VecF(3.0f), n);
    for (int i = 0; i < n; ++i)
      if (hp[i] != ev::f32_to_bf16(3.0f)) fail("bf16 tail store n=" + std::to_string(n));
    ev::store_f16(hp, VecF(3.0f), n);
    for (int i = 0; i < n; ++i)
      if (hp[i] != ev::f32_to_f16(3.0f)) fail("f16 tail store n=" + std::to_string(n));

    uint8_t* bp = guard.ending_with<uint8_t>(n);
    for (int i = 0; i < n; ++i) bp[i] = uint8_t(i % 2);
    ev::MaskF m = ev::MaskF::from_bytes(bp, n);
    for (int i = 0; i < K; ++i)
      if (m.lane(i) != (i < n && i % 2 == 1)) fail("byte tail load n=" + std::to_string(n));
    (!m).store_bytes(bp, n);
    for (int i = 0; i < n; ++i)
      if (bp[i] != (i % 2 == 1 ? 0 : 1)) fail("byte tail store n=" + std::to_string(n));

    // Canaries: a tail store leaves everything from lane n on untouched.
    float fc[2 * K];
    uint16_t hc[2 * K];
    uint8_t bc[2 * K];
    for (int i = 0; i < 2 * K; ++i) {
      fc[i] = -5.0f;
      hc[i] = 0xabcd;
      bc[i] = 0x5a;
    }
    VecF(1.0f).store(fc, n);
    ev::store_bf16(hc, VecF(1.0f), n);
    ev::MaskF::first(K).store_bytes(bc, n);
    for (int i = n; i < 2 * K; ++i) {
      if (fc[i] != -5.0f) fail("float store canary n=" + std::to_string(n));
      if (hc[i] != 0xabcd) fail("bf16 store canary n=" + std::to_string(n));
      if (bc[i] != 0x5a) fail("byte store canary n=" + std::to_string(n));
    }
    ev::store_f16(hc, VecF(1.0f), n);
    for (int i = n; i < 2 * K; ++i)
      if (hc[i] != 0xabcd) fail("f16 store canary n=" + std::to_string(n));
  }
  std::printf("tails done failures %d\n", failures);
  return 0;
}

bool write_file(const char* path, const void* data, size_t bytes) {
  FILE* f = std::fopen(path, "wb");
  if (!f) return false;
  bool ok = std::fwrite(data, 1, bytes, f) == bytes;
  return std::fclose(f) == 0 && ok;
}

// Output: four arrays of 65536 uint32 (bf16 vector, bf16 scalar, f16 vector, f16 scalar); the vector
// ones alternate full loads and tail loads of 5 lanes, so both paths are covered.
int run_half16(const char* out_path) {
  std::vector<uint16_t> in(65536);
  for (int i = 0; i < 65536; ++i) in[i] = uint16_t(i);
  std::vector<uint32_t> out(4 * 65536);
  for (int base = 0, round = 0; base < 65536; ++round) {
    int n = round % 2 ? 5 : K;
    VecF b = n == K ? ev::load_bf16(&in[base]) : ev::load_bf16(&in[base], n);
    VecF h = n == K ? ev::load_f16(&in[base]) : ev::load_f16(&in[base], n);
    for (int i = 0; i < n && base + i < 65536; ++i) {
      out[base + i] = bits_of(b.lane(i));
      out[2 * 65536 + base + i] = bits_of(h.lane(i));
    }
    base += n;
  }
  for (int i = 0; i < 65536; ++i) {
    out[65536 + i] = bits_of(ev::bf16_to_f32(uint16_t(i)));
    out[3 * 65536 + i] = bits_of(ev::f16_to_f32(uint16_t(i)));
  }
  return write_file(out_path, out.data(), out.size() * 4) ? 0 : 1;
}

// Output: four arrays of N uint16 (bf16 vector, bf16 scalar, f16 vector, f16 scalar).
int run_tohalf(const char* in_path, const char* out_path) {
  FILE* f = std::fopen(in_path, "rb");
  if (!f) return 1;
  std::vector<float> in;
  float buf[4096];
  size_t got;
  while ((got = std::fread(buf, 4, 4096, f)) > 0) in.insert(in.end(), buf, buf + got);
  std::fclose(f);
  size_t total = in.size();
  std::vector<uint16_t> out(4 * total);
  for (size_t base = 0, round = 0; base < total; ++round) {
    int n = int(total - base < size_t(K) ? total - base : size_t(K));
    if (round % 3 == 2 && n > 3) n = 3;
    VecF v = VecF::load(&in[base], n);
    if (n == K) {
      ev::store_bf16(&out[base], v);
      ev::store_f16(&out[2 * total + base], v);
    } else {
      ev::store_bf16(&out[base], v, n);
      ev::store_f16(&out[2 * total + base], v, n);
    }
    base += size_t(n);
  }
  for (size_t i = 0; i < total; ++i) {
    out[total + i] = ev::f32_to_bf16(in[i]);
    out[3 * total + i] = ev::f32_to_f16(in[i]);
  }
  return write_file(out_path, out.data(), out.size() * 2) ? 0 : 1;
}

void expect_bits(const char* what, float got, float want) {
  if (!same_bits(got, want)) {
    char msg[160];
    std::snprintf(msg, sizeof msg, "%s: got %a want %a", what, double(got), double(want));
    fail(msg);
  }
}

VecF lanes_of(std::initializer_list<float> values) {
  float buf[K] = {};
  int i = 0;
  for (float v : values)
    if (i < K) buf[i++] = v;
  return VecF::load(buf);
}

int run_misc(uint64_t seed) {
  std::printf("seed %llu\n", (unsigned long long)seed);
  const float nan = NAN;
  // maximum/minimum: NaN on either side wins; ties answer the first operand (torch: maximum(-0, 0) is -0).
  float as[] = {1.0f, nan, 2.0f, nan, -0.0f, 0.0f, -3.0f, 5.0f};
  float bs[] = {nan, 1.0f, 3.0f, nan, 0.0f, -0.0f, -4.0f, 5.0f};
  float want_max[] = {nan, nan, 3.0f, nan, -0.0f, 0.0f, -3.0f, 5.0f};
  float want_min[] = {nan, nan, 2.0f, nan, -0.0f, 0.0f, -4.0f, 5.0f};
  VecF a = VecF::load(as, 8), b = VecF::load(bs, 8);
  VecF mx = ev::maximum(a, b), mn = ev::minimum(a, b);
  for (int i = 0; i < 8 && i < K; ++i) {
    expect_bits("maximum", mx.lane(i), want_max[i]);
    expect_bits("minimum", mn.lane(i), want_min[i]);
    expect_bits("maximum scalar", ev::maximum(as[i], bs[i]), want_max[i]);
    expect_bits("minimum scalar", ev::minimum(as[i], bs[i]), want_min[i]);
  }
  // Rounding: half to even, keeping -0.
  float rs[] = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 0.49999997f, 8388609.0f};
  float want_round[] = {0.0f, 2.0f, 2.0f, -0.0f, -2.0f, -2.0f, 0.0f, 8388609.0f};
  VecF rv = ev::round(VecF::load(rs, 8));
  for (int i = 0; i < 8 && i < K; ++i) {
    expect_bits("round", rv.lane(i), want_round[i]);
    expect_bits("round scalar", ev::round(rs[i]), want_round[i]);
  }
  VecF fl = lanes_of({-1.5f, 1.5f, -0.0f, 2.0f});
  expect_bits("floor", ev::floor(fl).lane(0), -2.0f);
  expect_bits("ceil", ev::ceil(fl).lane(0), -1.0f);
  expect_bits("trunc", ev::trunc(fl).lane(1), 1.0f);
  // sign (torch: NaN and -0 give +0), relu (torch: relu(-0) is -0, relu(NaN) is NaN).
  VecF sv = lanes_of({nan, -0.0f, 0.0f, -2.0f, 3.0f, -INFINITY, INFINITY, 1e-45f});
  float want_sign[] = {0.0f, 0.0f, 0.0f, -1.0f, 1.0f, -1.0f, 1.0f, 1.0f};
  float want_relu[] = {nan, -0.0f, 0.0f, 0.0f, 3.0f, 0.0f, INFINITY, 1e-45f};
  for (int i = 0; i < 8 && i < K; ++i) {
    expect_bits("sign", ev::sign(sv).lane(i), want_sign[i]);
    expect_bits("relu", ev::relu(sv).lane(i), want_relu[i]);
    expect_bits("sign scalar", ev::sign(sv.lane(i)), want_sign[i]);
    expect_bits("relu scalar", ev::relu(sv.lane(i)), want_relu[i]);
  }
  // rsqrt and reciprocal are the correctly rounded 1/sqrt(x) and 1/x.
  for (float x : {2.0f, 3.0f, 0.1f, 1e-40f, 0.0f, -1.0f, INFINITY}) {
    expect_bits("rsqrt", ev::rsqrt(VecF(x)).lane(0), 1.0f / std::sqrt(x));
    expect_bits("reciprocal", ev::reciprocal(VecF(x)).lane(0), 1.0f / x);
  }
  // Comparisons and masks: NaN compares unordered (only != is true).
  VecF cx = lanes_of({nan, 1.0f, 2.0f, 3.0f}), cy = lanes_of({nan, 2.0f, 2.0f, 1.0f});
  ev::MaskF eq = cx == cy, ne = cx != cy, lt = cx < cy, le = cx <= cy, gt = cx > cy, ge = cx >= cy;
  bool want[6][4] = {{0, 0, 1, 0}, {1, 1, 0, 1}, {0, 1, 0, 0}, {0, 1, 1, 0}, {0, 0, 0, 1}, {0, 0, 1, 1}};
  ev::MaskF got[6] = {eq, ne, lt, le, gt, ge};
  for (int c = 0; c < 6; ++c)
    for (int i = 0; i < 4; ++i)
      if (got[c].lane(i) != want[c][i]) fail("comparison " + std::to_string(c) + " lane " + std::to_string(i));
  if (!ev::isnan(cx).lane(0) || ev::isnan(cx).lane(1)) fail("isnan");
  if ((lt | gt).lane(2) || !(le & ge).lane(2) || (!eq).lane(2)) fail("mask logic");
  VecF wv = ev::where(lt, VecF(10.0f), VecF(20.0f));
  if (wv.lane(1) != 10.0f || wv.lane(2) != 20.0f) fail("where");
  uint8_t bytes[K];
  ge.store_bytes(bytes);
  for (int i = 0; i < 4; ++i)
    if (bytes[i] != (want[5][i] ? 1 : 0)) fail("store_bytes");
  if (!ev::MaskF::from_bytes(bytes).lane(2) || ev::MaskF::from_bytes(bytes).lane(0)) fail("from_bytes");
  VecF io = VecF::iota(2.5f);
  for (int i = 0; i < K; ++i)
    if (io.lane(i) != 2.5f + float(i)) fail("iota");
  expect_bits("fma", ev::fma(VecF(0.1f), VecF(10.0f), VecF(-1.0f)).lane(0), std::fma(0.1f, 10.0f, -1.0f));

  // Reductions against double sums (error bound of a pairwise tree of K floats) and NaN propagation.
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-100.0f, 100.0f);
  for (int trial = 0; trial < 1000; ++trial) {
    float buf[K];
    double sum = 0.0, abs_sum = 0.0;
    float mxs = -INFINITY, mns = INFINITY;
    for (int i = 0; i < K; ++i) {
      buf[i] = dist(rng);
      sum += buf[i];
      abs_sum += std::fabs(buf[i]);
      mxs = std::max(mxs, buf[i]);
      mns = std::min(mns, buf[i]);
    }
    VecF v = VecF::load(buf);
    if (std::fabs(ev::reduce_add(v) - sum) > 4 * 6e-8 * abs_sum) fail("reduce_add");
    if (ev::reduce_max(v) != mxs || ev::reduce_min(v) != mns) fail("reduce_max/min");
    buf[trial % K] = nan;
    v = VecF::load(buf);
    if (!std::isnan(ev::reduce_max(v)) || !std::isnan(ev::reduce_min(v)) || !std::isnan(ev::reduce_add(v)))
      fail("reduction NaN propagation");
  }

  // Welford against a two-pass float64 mean and variance, with a tail and a large offset (where a
  // sum-of-squares formula would lose everything).
  for (int trial = 0; trial < 20; ++trial) {
    int count = 1000 + int(rng() % 50000);
    double offset = trial % 2 ? 1000.0 : 0.0;
    std::normal_distribution<float> normal(float(offset), 3.0f);
    std::vector<float> xs(static_cast<size_t>(count));
    for (float& x : xs) x = normal(rng);
    double mean = 0.0;
    for (float x : xs) mean += x;
    mean /= count;
    double m2 = 0.0;
    for (float x : xs) m2 += (x - mean) * (x - mean);
    int half = count / 2;
    ev::WelfordF w1, w2;
    int i = 0;
    for (; i + K <= half; i += K) w1.add(VecF::load(&xs[size_t(i)]));
    if (i < half) w1.add(VecF::load(&xs[size_t(i)], half - i), half - i);
    i = half;
    for (; i + K <= count; i += K) w2.add(VecF::load(&xs[size_t(i)]));
    if (i < count) w2.add(VecF::load(&xs[size_t(i)], count - i), count - i);
    ev::WelfordS r = ev::welford_reduce(ev::welford_combine(w1, w2));
    ev::WelfordS scalar;
    for (float x : xs) scalar.add(x);
    if (r.weight != float(count)) fail("welford count");
    double mean_err = std::fabs(r.mean - mean) / std::max(std::fabs(mean), 3.0);
    double var_err = std::fabs(r.m2 / count - m2 / count) / (m2 / count);
    std::printf("welford n %d offset %g mean_rel_err %.3g var_rel_err %.3g\n", count, offset, mean_err, var_err);
    // Float accumulators: about 1e-6 on centered data; with the mean 333 standard deviations away
    // from zero the float rounding of every update costs a few times more.
    double var_bound = offset == 0.0 ? 2e-6 : 1e-5;
    if (mean_err > 1e-6 || var_err > var_bound) fail("welford accuracy n=" + std::to_string(count));
    if (std::fabs(scalar.m2 / count - m2 / count) / (m2 / count) > 1e-3) fail("scalar welford");
  }
  // divide(a, DivisorF(b)) against IEEE a / b, bit for bit: random significands, signs and
  // exponents on both sides of the fast route's [2^-60, 2^60] (so both routes run), plus zeros,
  // subnormals, infinities and NaN among the dividends and divisors.
  {
    std::mt19937_64 drng(seed ^ 0x5eed);
    auto any_float = [&](int emin, int emax) {
      uint32_t e = uint32_t(emin + int(drng() % uint64_t(emax - emin + 1)) + 127);
      return float_of((uint32_t(drng() & 1) << 31) | (e << 23) | (uint32_t(drng()) & 0x7fffffu));
    };
    const float specials[] = {0.0f, -0.0f, 1e-45f, -3e-39f, INFINITY, -INFINITY, nan, 1.0f, 0x1.fffffep-1f};
    std::vector<float> divisors(specials, specials + 9);
    for (int i = 0; i < 200; ++i) divisors.push_back(any_float(-70, 70));
    int64_t mismatches = 0, checked = 0;
    float as[64];
    for (float bdiv : divisors) {
      const ev::DivisorF d(bdiv);
      for (int rep = 0; rep < 2000; ++rep) {
        for (float& x : as) x = rep % 7 == 0 ? specials[drng() % 9] : any_float(-70, 70);
        for (int i = 0; i + K <= 64; i += K) {
          VecF q = ev::divide(VecF::load(as + i), d);
          for (int j = 0; j < K; ++j) {
            float want = as[i + j] / bdiv;
            ++checked;
            if (!same_bits(q.lane(j), want)) {
              if (mismatches++ < 5) fail("divide " + std::to_string(as[i + j]) + " / " + std::to_string(bdiv));
            }
            if (!same_bits(ev::divide(as[i + j], d), want)) fail("divide scalar");
          }
        }
      }
    }
    std::printf("divide checked %lld mismatches %lld\n", (long long)checked, (long long)mismatches);
  }
  std::printf("misc done failures %d\n", failures);
  return 0;
}

// exp_nonpositive against exp, bit for bit (NaN payloads included), over the arguments it is for:
// every pattern with the sign bit set (-0, the negative floats, -inf, negative NaNs), +0 and every
// positive NaN. Vector lanes: every STRIDE-th block of kSize patterns; float forms: every
// SCALAR_STRIDE-th pattern (1 and 1: all 2^31 + 2^23 of them).
int run_nonpos(uint32_t stride, uint32_t scalar_stride) {
  int64_t failures = 0, vectors = 0, scalars = 0;
  auto fail = [&](const char* form, uint32_t u, float got, float want) {
    if (failures++ < 10)
      std::printf("FAIL exp_nonpositive %s x=0x%08x got 0x%08x exp gives 0x%08x\n", form, u, bits_of(got),
                  bits_of(want));
  };
  auto sweep = [&](uint64_t first, uint64_t last) {  // patterns [first, last]
    alignas(64) float xs[K], got[K], want[K];
    for (uint64_t base = first; base <= last; base += uint64_t(K) * stride) {
      for (int i = 0; i < K; ++i) {
        uint64_t u = base + uint64_t(i);
        xs[i] = float_of(uint32_t(u <= last ? u : last));
      }
      VecF x = VecF::load(xs);
      ev::exp_nonpositive(x).store(got);
      ev::exp(x).store(want);
      ++vectors;
      for (int i = 0; i < K; ++i)
        if (bits_of(got[i]) != bits_of(want[i])) fail("vector", bits_of(xs[i]), got[i], want[i]);
    }
    for (uint64_t u = first; u <= last; u += scalar_stride) {
      float x = float_of(uint32_t(u));
      float g = ev::exp_nonpositive(x), w = ev::exp(x);
      ++scalars;
      if (bits_of(g) != bits_of(w)) fail("float", uint32_t(u), g, w);
    }
  };
  sweep(0x80000000u, 0xffffffffu);
  sweep(0x00000000u, 0x00000000u);
  sweep(0x7f800001u, 0x7fffffffu);
  std::printf("nonpos done vectors %lld floats %lld failures %lld\n", (long long)vectors, (long long)scalars,
              (long long)failures);
  return 0;
}

// Tells the compiler the buffer is read and written, so repeated passes of a pure loop are not
// folded into one.
inline void clobber(void* p) { asm volatile("" : : "r"(p) : "memory"); }

template <class F>
double seconds(F body) {
  auto t0 = std::chrono::steady_clock::now();
  body();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int run_bench() {
  const int n = 1 << 20, reps = 50;
  std::vector<float> in(n), out(n);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-10.0f, 10.0f);
  for (float& x : in) x = dist(rng);
  auto report = [&](const char* name, double s) {
    std::printf("bench %s %.3f ns/element\n", name, s * 1e9 / (double(n) * reps));
  };
  report("exp_vec", seconds([&] {
    for (int r = 0; r < reps; ++r, clobber(out.data()))
      for (int i = 0; i < n; i += K) ev::exp(VecF::load(&in[size_t(i)])).store(&out[size_t(i)]);
  }));
  report("exp_libm", seconds([&] {
    for (int r = 0; r < reps; ++r, clobber(out.data()))
      for (int i = 0; i < n; ++i) out[size_t(i)] = ::expf(in[size_t(i)]);
  }));
  report("tanh_vec", seconds([&] {
    for (int r = 0; r < reps; ++r, clobber(out.data()))
      for (int i = 0; i < n; i += K) ev::tanh(VecF::load(&in[size_t(i)])).store(&out[size_t(i)]);
  }));
  report("tanh_libm", seconds([&] {
    for (int r = 0; r < reps; ++r, clobber(out.data()))
      for (int i = 0; i < n; ++i) out[size_t(i)] = ::tanhf(in[size_t(i)]);
  }));
  for (auto fn : {"sigmoid", "erf", "log"}) {
    std::string name = fn;
    report((name + "_vec").c_str(), seconds([&] {
      for (int r = 0; r < reps; ++r, clobber(out.data()))
        for (int i = 0; i < n; i += K) {
          VecF x = VecF::load(&in[size_t(i)]);
          VecF y = name == "sigmoid" ? ev::sigmoid(x) : name == "erf" ? ev::erf(x) : ev::log(x);
          y.store(&out[size_t(i)]);
        }
    }));
  }
  report("copy", seconds([&] {
    for (int r = 0; r < reps; ++r, clobber(out.data())) std::memcpy(out.data(), in.data(), size_t(n) * 4);
  }));
  return out[12345] == 1234.5f ? 1 : 0;  // keeps the loops from being discarded
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "ulp" && argc == 5)
    return run_ulp(std::strtoull(argv[2], nullptr, 10), std::strtoll(argv[3], nullptr, 10),
                   uint32_t(std::strtoul(argv[4], nullptr, 10)));
  if (mode == "tails") return run_tails();
  if (mode == "half16" && argc == 3) return run_half16(argv[2]);
  if (mode == "tohalf" && argc == 4) return run_tohalf(argv[2], argv[3]);
  if (mode == "misc" && argc == 3) return run_misc(std::strtoull(argv[2], nullptr, 10));
  if (mode == "nonpos" && argc == 4)
    return run_nonpos(uint32_t(std::strtoul(argv[2], nullptr, 10)), uint32_t(std::strtoul(argv[3], nullptr, 10)));
  if (mode == "bench") return run_bench();
  std::fprintf(stderr,
               "usage: vec_accuracy ulp SEED RANDOM STRIDE | tails | half16 OUT | tohalf IN OUT | misc SEED | "
               "nonpos STRIDE SCALAR_STRIDE | bench\n");
  return 2;
}
