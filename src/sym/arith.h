// Python-semantics int64 arithmetic shared by the simplifying constructors, evaluate(), bound()
// and RelProgram. Two flavours: `checked_*` throw std::overflow_error (the constructors and
// evaluate promise that), `*_ok` report overflow through their result (RelProgram must not throw
// or allocate while it runs).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace ember::sym::arith {

// Python's `a // b` (b != 0) into *r; false only for INT64_MIN // -1, which overflows.
inline bool floordiv_ok(int64_t a, int64_t b, int64_t* r) {
  if (b == -1) return !__builtin_mul_overflow(a, int64_t{-1}, r);
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) --q;
  *r = q;
  return true;
}

// Python's `a % b` (b != 0): the result has the sign of b. Never overflows.
inline int64_t py_mod(int64_t a, int64_t b) {
  if (b == -1) return 0;  // INT64_MIN % -1 is undefined in C++
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

inline int64_t checked_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r))
    throw std::overflow_error("symbolic integer overflow: " + std::to_string(a) + " + " + std::to_string(b));
  return r;
}

inline int64_t checked_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    throw std::overflow_error("symbolic integer overflow: " + std::to_string(a) + " * " + std::to_string(b));
  return r;
}

inline int64_t checked_floordiv(int64_t a, int64_t b) {
  int64_t r;
  if (!floordiv_ok(a, b, &r))
    throw std::overflow_error("symbolic integer overflow: " + std::to_string(a) + " // " + std::to_string(b));
  return r;
}

}  // namespace ember::sym::arith
