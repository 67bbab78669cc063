// CompileOptions: every setting of one ember.compile() call, parsed once in Python
// (python/ember/options.py, the only reader of the environment) and passed down explicitly.
// The C++ core has no global configuration.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ember {

enum class Backend : uint8_t { Ember, Eager };
enum class Mode : uint8_t { Default, ReduceOverhead, MaxAutotune };

// EMBER_LOGS channels.
enum LogChannel : uint32_t {
  kLogGraph = 1u << 0,
  kLogGraphBreaks = 1u << 1,
  kLogGuards = 1u << 2,
  kLogRecompiles = 1u << 3,
  kLogFallbacks = 1u << 4,
  kLogSchedule = 1u << 5,
  kLogOutputCode = 1u << 6,
  kLogPerf = 1u << 7,
  kLogPasses = 1u << 8,
};

struct CompileOptions {
  Backend backend = Backend::Ember;
  Mode mode = Mode::Default;
  bool fullgraph = false;
  bool dynamic = false;
  int cache_limit = 8;         // compiled entries per code object before it runs eagerly
  int inline_depth_limit = 64; // nested inlined calls before the frame runs eagerly
  int64_t instruction_limit = 2'000'000;  // interpreted instructions per trace (unrolled loops)
  uint32_t logs = 0;           // LogChannel bits
  bool verify_shape_rules = false;  // also run torch's meta kernel where a shape rule answers, and compare (tests)
  bool verify_each_step = false;    // run the IR verifier after every pipeline step (tests)
  // The C++ backend: the compiler ($CXX, else g++), the on-disk cache ($EMBER_CACHE_DIR, else
  // ~/.cache/ember) and the folder holding the headers generated code includes (ember/vec.h).
  std::string cxx = "g++";
  std::string cache_dir;
  std::string include_dir;
};

}  // namespace ember
