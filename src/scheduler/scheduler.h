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
//   2. copies that move nothing: a kernel left copying a buffer into a temporary at the same
//      addresses (two layout copies inlining composed) goes; the temporary becomes a view of the
//      source (alias_copies.cpp).
//   3. vertical fusion: a consumer kernel joins its producer's kernel when every read of the
//      producer's buffer uses exactly the index the producer wrote, or it reads it as a
//      reduction prologue/epilogue over the same outer ranges (softmax, layer_norm: one kernel
//      with several loops over a row).
//   4. sibling fusion: kernels with the same outer ranges that read the same buffer share one
//      kernel (and one pass when their loops have the same ranges: mean and variance in one
//      Welford loop).
//   5. stores into inputs: a copy of a computed value into a graph input (copy_, _foreach_copy_)
//      becomes the store of the kernel computing it, straight into the input, where that is safe
//      (input_store.cpp); the program then assumes graph inputs do not share memory, which the
//      runtime checks per call (runtime/compiled_graph.h, "Stores into inputs").
// Fusion never creates a cycle (a path producer -> other step -> consumer), never moves a kernel
// across an extern call that writes a buffer it reads or writes, and keeps a kernel under
// `max_nodes` scalar nodes.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "loop_ir/loop_ir.h"

namespace ember::scheduler {

struct ScheduleOptions {
  int max_nodes = 512;          // scalar nodes per fused kernel
  int inline_max_ops = 30;      // a producer with more arithmetic nodes is stored, not recomputed
  int inline_max_consumers = 4; // ... or with more consuming kernels
  // ... or with an expensive op (loop_ir::is_expensive, or a gather's index check) that its consumers would compute more than
  // this many times per element it stores: a broadcast consumer (the rotary embedding's cos over
  // [T, D], read for every batch and head) recomputes it at each of its own points. Vector math on
  // the CPU costs tens of instructions an element; Triton kernels stay memory-bound, so the GPU
  // target recomputes (0: no bound).
  int inline_max_recompute = 2;
};

// Split reductions (split.cpp): a reduction with few outputs for its reduced extent runs on few
// programs (x.sum(0) of 8192x4096: 64 on a GPU of 132 SMs). Splitting it in two kernels -- partial
// results [splits, outputs] into a temporary, then a short reduction over the splits -- gives the
// first kernel `splits` times more programs. Off (min_programs 0) for the C++ target, whose OpenMP
// loops already divide the work.
struct SplitOptions {
  // Split when the kernel would launch fewer programs than this (Triton: 2x the H200's 132 SMs).
  int64_t min_programs = 0;
  // Each partial reduces at least this many elements: above the Triton target's persistent limit
  // (1024), so that the partials kernel stays a looped reduction (an outer one keeps its coalesced
  // config); and the second kernel's launch and the partials' round trip stay small beside it.
  int64_t min_split_rnumel = 2048;
  // The same for an outer reduction (the loop reads across rows), whose partials keep the coalesced
  // config at any length (codegen/triton keeps such a kernel looped), so its chunks can be short: a
  // [4096, 768] column sum (a layer norm's weight gradient) made 24 programs of 2048 rows at the
  // inner minimum, 213 us a call on the H200 (2026-12-03 profile of GPT-2's backward); Inductor's
  // outer_reduction_splits cuts it into chunks of about 48 rows.
  int64_t min_outer_split_rnumel = 128;
  // Programs the Triton target launches for `outputs` outer points: one row per program, or this
  // many columns per program when the loop reads across rows (codegen/triton: outer reduction).
  int64_t columns_per_program = 64;
};

struct FusionDecision {
  enum class Kind : uint8_t { Inline, Alias, Vertical, Sibling, Split, Store, Group, Refused };
  Kind kind = Kind::Refused;
  std::string producer;  // kernel names as lowering printed them (k3), or buffer names (b5) for inlining
                         // (Store: the kernel; its refusal: the copy call; Alias: the copy's buffer)
  std::string consumer;
  std::string reason;    // why it was taken or refused, in words
  std::string str() const;  // "inline b5 into k7: 3 ops, 1 consumer"
};

// Rewrites `program` in place.
std::vector<FusionDecision> schedule(loop_ir::Program& program, const ScheduleOptions& options);

// Splits the reductions worth splitting (SplitOptions) of a scheduled program, in place; one
// decision (Split, or Refused with the reason) per kernel with a looped reduction it considered.
// Needs a scheduled program with constant sizes. Guarantees: a verifying program computing the same
// values up to the reassociation of sums (as any change of block size does).
std::vector<FusionDecision> split_reductions(loop_ir::Program& program, const SplitOptions& options);

// Grouped kernels (group.cpp; loop_ir/group.h): kernels between two extern calls with one
// pointwise body over different, independent buffers become a Group of the program (76 optimizer
// updates, one per parameter: one kernel over a table of 76 pointer sets), their steps moved next to
// the first member's where nothing in between depends on them or shares planned memory, when the
// members' elements add up to at least `min_elements` (C++: the parallel threshold, below which the
// group would run on one thread, as its members do, and save nothing worth a change; Triton: 0, a
// group saves launches whatever its size). Needs a
// scheduled, collapsed program with constant sizes; `share_memory(a, b)` says whether two Temp
// buffers overlap in the memory plan (members run interleaved, so a member may not write memory the
// plan reuses for another member's buffer). Guarantees: a verifying program computing the same values,
// the same steps in an order the dependences allow (kernel names keep the old order); one decision
// per group formed (Group: "k3..k78", the member count and elements).
std::vector<FusionDecision> group_kernels(loop_ir::Program& program, int64_t min_elements,
                                          const std::function<bool(loop_ir::BufferId, loop_ir::BufferId)>& share_memory);

// True when a kernel's first ranged loop reads across rows (x.sum(0)): its first load moves by 1
// along the innermost outer variable and not along the innermost loop variable. Such a reduction is
// coalesced by giving each program a block of columns (the Triton target's outer-reduction config).
bool outer_reduction(const loop_ir::Program& program, const loop_ir::Kernel& kernel);

}  // namespace ember::scheduler
