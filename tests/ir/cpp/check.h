// The check macros of Ember's C++ test programs (tests/*/cpp): a failed check prints where and
// what, counts, and the program goes on; finish() prints the verdict the Python runner looks for.
#pragma once

#include <cstdio>
#include <functional>
#include <string>

static int failures = 0;
#define CHECK(cond)                                                 \
  do {                                                              \
    if (!(cond)) {                                                  \
      std::printf("FAILED %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                   \
    }                                                               \
  } while (0)
#define CHECK_EQ_STR(a, b)                                                                                           \
  do {                                                                                                               \
    std::string x_ = (a), y_ = (b);                                                                                  \
    if (x_ != y_) {                                                                                                  \
      std::printf("FAILED %s:%d: %s\n  got:  %s\n  want: %s\n", __FILE__, __LINE__, #a, x_.c_str(), y_.c_str()); \
      ++failures;                                                                                                    \
    }                                                                                                                \
  } while (0)

// Whether f throws an E whose message contains `words` (printing the message when it does not).
template <typename E>
static bool throws(const std::function<void()>& f, const std::string& words) {
  try {
    f();
  } catch (const E& e) {
    if (std::string(e.what()).find(words) != std::string::npos) return true;
    std::printf("  message was: %s\n", e.what());
    return false;
  }
  return false;
}

// main's return value: 0 and "all checks passed", or 1 and the count of failures.
static int finish() {
  if (failures) {
    std::printf("%d check(s) failed\n", failures);
    return 1;
  }
  std::printf("all checks passed\n");
  return 0;
}
