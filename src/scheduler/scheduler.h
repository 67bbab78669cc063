// Scheduler: decides which kernels of a lowered program run as one, and merges them.
//
// Needs: a Program in lowering's shape (lowering.h). Guarantees: a Program that verifies and
// computes the same values, with fewer kernels where fusion is legal and profitable, and the
// list of decisions taken or refused, each with a reason (EMBER_LOGS=schedule prints them).
//
// Decisions, in order:
//   1. inline: a cheap pointwise producer is recomputed inside each consumer instead of being
//      stored (bounded by its op count and its number of consumers); its buffer disappears
//      unless the caller or an extern call reads it.
//   2. vertical fusion: a consumer kernel joins its producer's kernel when every read of the
//      producer's buffer uses exactly the index the producer wrote, or it reads it as a
//      reduction prologue/epilogue over the same outer ranges (softmax, layer_norm: one kernel
//      with several loops over a row).
//   3. sibling fusion: kernels with the same outer ranges that read the same buffer share one
//      kernel (and one pass when their loops have the same ranges: mean and variance in one
//      Welford loop).
// Fusion never creates a cycle (a path producer -> other step -> consumer), never moves a kernel
// across an extern call that writes a buffer it reads or writes, and keeps a kernel under
// `max_nodes` scalar nodes.
#pragma once

#include <string>
#include <vector>

#include "loop_ir/loop_ir.h"

namespace ember::scheduler {

struct ScheduleOptions {
  int max_nodes = 512;          // scalar nodes per fused kernel
  int inline_max_ops = 30;      // a producer with more arithmetic nodes is stored, not recomputed
  int inline_max_consumers = 4; // ... or with more consuming kernels
};

struct FusionDecision {
  enum class Kind : uint8_t { Inline, Vertical, Sibling, Refused };
  Kind kind = Kind::Refused;
  std::string producer;  // kernel names as lowering printed them (k3), or buffer names (b5) for inlining
  std::string consumer;
  std::string reason;    // why it was taken or refused, in words
  std::string str() const;  // "inline b5 into k7: 3 ops, 1 consumer"
};

// Rewrites `program` in place.
std::vector<FusionDecision> schedule(loop_ir::Program& program, const ScheduleOptions& options);

}  // namespace ember::scheduler
