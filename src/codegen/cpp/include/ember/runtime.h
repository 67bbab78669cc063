// The C ABI between generated C++ code and Ember's runtime (src/runtime/compiled_graph.cpp), and
// the few scalar helpers generated kernels call besides ember/vec.h.
//
// Needs: a C++17 compiler (generated code) or any C/C++ compiler (the struct alone). Guarantees:
// one definition of `ember_ctx` shared by both sides, so a generated library and the runtime agree
// on every field offset. Why a plain C struct: the generated library is dlopen()ed with
// RTLD_LOCAL and talks to the runtime through this struct and one callback only, so it needs no
// symbol from the extension and no Python.
//
// Protocol. The runtime fills `buffers` (element 0 of every Input and Output buffer, by buffer id;
// in a program with shape symbols, of every Temp too, since its memory is planned per call), `sym`,
// `arena` (the memory plan's per-call allocation, 64-byte aligned) and the callback, then calls the
// entry `int ember_entry(ember_ctx*, void* const* kernels)` with the addresses of the program's
// kernel functions (CppSource::kernels' order; they may live in other libraries, so the entry
// reaches them through this table). The entry runs the program's steps in order: kernels are
// calls through the table; an extern step calls `call_extern(ctx, k)`, which runs torch and stores the
// element-0 pointer of each result buffer into `buffers` before returning. Temporaries and views
// are addressed by the generated code itself (arena + planned offset; base pointer + offset).
// The entry returns 0 on success, non-zero when a kernel reported an error (`error` != 0) or an
// extern call failed (the callback's own error, kept by the runtime).
#pragma once

#include <stdint.h>

#define EMBER_ABI_VERSION 2

#ifdef __cplusplus
extern "C" {
#endif

struct ember_ctx {
  void** buffers;      // by buffer id: element 0 of Input, Output and (after their call) Extern buffers
  char* arena;         // per-call temporaries; NULL when the plan has none
  int (*call_extern)(struct ember_ctx* ctx, int32_t extern_index);  // 0: success
  void* runtime;       // the runtime's per-call state; generated code never reads it
  // The first kernel error wins (kernels may run on many threads). Read after the kernel returns.
  int64_t error;       // 0: none; EMBER_ERROR_INDEX: a check_index failed
  // Which check: index into the program's check-site table (CppSource). A kernel numbers its own
  // sites from 0; the entry adds where the call's sites start in the table.
  int32_t error_site;
  int64_t error_value; // the offending index
  int64_t error_bound; // the exclusive bound it had to stay under
  // The values of the program's shape symbols, in the order of Program::symbols (dynamic shapes);
  // NULL for a program without symbols. Last, so that code built before it had the same offsets.
  const int64_t* sym;
};

#define EMBER_ERROR_INDEX 1

typedef int (*ember_entry_fn)(struct ember_ctx* ctx, void* const* kernels);

#ifdef __cplusplus
}  // extern "C"

#include <cmath>
#include <vector>

namespace ember::rt {

// Records an out-of-bounds index unless another thread already recorded an error first.
inline void report_index_error(ember_ctx* ctx, int32_t site, int64_t value, int64_t bound) {
  int64_t expected = 0;
  if (__atomic_compare_exchange_n(&ctx->error, &expected, int64_t{EMBER_ERROR_INDEX}, false, __ATOMIC_ACQ_REL,
                                  __ATOMIC_ACQUIRE)) {
    ctx->error_site = site;
    ctx->error_value = value;
    ctx->error_bound = bound;
  }
}

// A float array of at least n elements for the calling thread: scratch whose length is known only at
// run time (a loop over a symbolic extent keeping values for a later loop). `Slot` tells apart the
// arrays one kernel uses at once; kernels run one after another, so they share the slots.
template <int Slot>
inline float* thread_scratch(int64_t n) {
  static thread_local std::vector<float> scratch;
  if (static_cast<int64_t>(scratch.size()) < n) scratch.resize(static_cast<size_t>(n));
  return scratch.data();
}

// Python's integer // and % (round toward -inf), which index expressions and integer tensors use.
template <class T>
inline T floordiv_int(T a, T b) {
  T q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
template <class T>
inline T mod_int(T a, T b) {
  T r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

// torch.floor_divide and torch.remainder on floating point: the quotient is computed from the
// exact remainder (fmod) so that a == b * floordiv(a, b) + mod(a, b) holds as closely as the format
// allows, the way Python's float // does; division by zero gives the IEEE quotient.
template <class T>
inline T floordiv_float(T a, T b) {
  if (b == 0) return a / b;
  T m = std::fmod(a, b);
  T d = (a - m) / b;
  if (m != 0 && ((b < 0) != (m < 0))) d -= 1;
  if (d == 0) return std::copysign(T(0), a / b);
  T f = std::floor(d);
  if (d - f > T(0.5)) f += 1;
  return f;
}
template <class T>
inline T mod_float(T a, T b) {
  T r = std::fmod(a, b);
  if (r != 0 && ((b < 0) != (r < 0))) r += b;
  return r;
}

// Integer power by squaring (torch.pow on integer tensors); a negative exponent gives 0 except for
// bases 1 and -1, as torch computes it.
template <class T>
inline T pow_int(T base, T exp) {
  if (exp < 0) {
    if (base == 1) return 1;
    if (base == -1) return (exp % 2 == 0) ? 1 : -1;
    return 0;
  }
  T result = 1;
  while (exp != 0) {
    if (exp & 1) result = static_cast<T>(result * base);
    exp >>= 1;
    base = static_cast<T>(base * base);
  }
  return result;
}

}  // namespace ember::rt
#endif  // __cplusplus
