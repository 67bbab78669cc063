// Grouped kernels (scheduler.h, group_kernels; loop_ir/group.h): pointwise kernels with one body
// over independent buffers, between two extern calls, become one group.
//
// Why here and not in fusion: the members stay separate kernels of the program (each its own
// extent, its own buffers), so every pass that reads kernels still works; only the code generators
// look at the group: the C++ one emits one function, with one parallel region over all the
// members' elements, where the kernels alone would each open their own (76 fork/joins for an
// optimizer step, and small tensors that run on one thread); the Triton one emits one launch where
// the kernels alone would each be launched (codegen/triton/triton_codegen.h). Why after collapse: the common body
// needs each access flat in i0 (a [256, 768] update collapsed to [196608]).
//
// The run: the kernel steps between two extern calls, in order. Each body seen in the run has an
// open group (a bucket); a kernel joins the first bucket whose body it has when it is independent
// (depends_on both ways, with the scheduler's aliasing rules: dependencies.cpp; and no Temp sharing
// planned memory) of every member and of every kernel it would move over: a group runs at its first
// member's step, so later members move up past the kernels in between (an optimizer's program
// interleaves each parameter's update with its step counter's `step + 1`: two groups). Otherwise it
// stays where it is and opens a bucket of its own. At the end of the run, buckets of one member or
// of fewer elements than the caller's minimum are dropped and the steps are reordered: each group's
// members consecutive at its first member's step, everything else in its order. The plan was made
// on the old order, hence the planned-memory test against the kernels a member moves over too.
#include <algorithm>

#include "loop_ir/group.h"
#include "scheduler/internal.h"

namespace ember::scheduler {

using loop_ir::Buffer;
using loop_ir::Program;
using namespace detail;

namespace {

using ShareMemory = std::function<bool(BufferId, BufferId)>;

struct Bucket {
  std::vector<int> kernels;                  // into program.kernels, in step order
  std::vector<Accesses> accesses;            // of each member
  std::vector<Accesses> passed;              // of the kernels after the first member that stay in place
  std::string signature;
  std::optional<std::vector<bool>> streams;  // of the first member with an outer range (loop_ir::group_streams)
  int64_t elements = 0;
};

std::vector<BufferId> temps(const Program& program, const Accesses& acc) {
  std::vector<BufferId> out;
  for (const std::vector<BufferId>* list : {&acc.reads, &acc.writes})
    for (BufferId b : *list)
      if (program.buffers[b].kind == Buffer::Kind::Temp) out.push_back(b);
  return out;
}

// Why a kernel with accesses `acc` cannot run beside (or be moved over) a step with `other` ("" when
// it can).
std::string conflict(const Program& program, const Accesses& other, const Accesses& acc, const ShareMemory& share) {
  BufferId what = -1;
  if (depends_on(other, acc, &what) || depends_on(acc, other, &what)) return "depends on %b" + std::to_string(what);
  for (BufferId a : temps(program, other))
    for (BufferId b : temps(program, acc))
      if (a != b && share(a, b))
        return "%b" + std::to_string(b) + " shares planned memory with %b" + std::to_string(a);
  return "";
}

// The bucket's body as `kernel` matches it: its member view (seen through the bucket's streams), or
// nullopt. A first member with an outer range sets the streams, which the members so far (all without
// one) must match when seen again through them; `adopt` receives them then.
std::optional<loop_ir::GroupMember> match(const Program& program, const loop_ir::Kernel& kernel, const Bucket& bucket,
                                          bool* adopt) {
  *adopt = false;
  const std::vector<bool>* streams = bucket.streams ? &*bucket.streams : nullptr;
  std::optional<loop_ir::GroupMember> member = loop_ir::group_member(program, kernel, nullptr, streams);
  if (!member) return std::nullopt;
  if (bucket.streams || kernel.ranges.empty()) {
    if (member->signature != bucket.signature) return std::nullopt;
    return member;
  }
  for (int k : bucket.kernels) {
    std::optional<loop_ir::GroupMember> again = loop_ir::group_member(program, program.kernels[k], nullptr, &member->streams);
    if (!again || again->signature != member->signature) return std::nullopt;
  }
  *adopt = true;
  return member;
}

// Groups the run `positions` (indices into program.steps, kernel steps in order) and appends its steps,
// reordered, to `steps`.
void group_run(Program& program, const std::vector<size_t>& positions, const std::vector<loop_ir::Step>& old,
               int64_t min_elements, const ShareMemory& share, std::vector<loop_ir::Step>& steps,
               std::vector<loop_ir::Group>& groups, std::vector<FusionDecision>& decisions) {
  std::vector<Bucket> buckets;
  for (size_t p : positions) {
    const int index = old[p].index;
    const loop_ir::Kernel& kernel = program.kernels[index];
    WorkStep work;
    work.kernel = kernel;
    const Accesses acc = accesses_of(program, work);
    size_t joined = buckets.size();
    for (size_t b = 0; b < buckets.size() && joined == buckets.size(); ++b) {
      Bucket& bucket = buckets[b];
      bool adopt = false;
      std::optional<loop_ir::GroupMember> member = match(program, kernel, bucket, &adopt);
      if (!member) continue;
      std::string why;
      for (size_t m = 0; m < bucket.kernels.size() && why.empty(); ++m)
        why = conflict(program, bucket.accesses[m], acc, share);
      for (size_t m = 0; m < bucket.passed.size() && why.empty(); ++m) why = conflict(program, bucket.passed[m], acc, share);
      if (!why.empty()) {
        decisions.push_back({FusionDecision::Kind::Refused, "@" + kernel.name,
                             "group with @" + program.kernels[bucket.kernels.front()].name, why});
        continue;
      }
      if (adopt) {
        bucket.streams = member->streams;
        bucket.signature = member->signature;
      }
      bucket.kernels.push_back(index);
      bucket.accesses.push_back(acc);
      bucket.elements += member->extent;
      joined = b;
    }
    for (size_t b = 0; b < buckets.size(); ++b)
      if (b != joined) buckets[b].passed.push_back(acc);
    if (joined != buckets.size()) continue;
    std::optional<loop_ir::GroupMember> member = loop_ir::group_member(program, kernel);
    if (!member) continue;
    Bucket fresh;
    fresh.kernels = {index};
    fresh.accesses = {acc};
    fresh.signature = member->signature;
    if (!kernel.ranges.empty()) fresh.streams = member->streams;
    fresh.elements = member->extent;
    buckets.push_back(std::move(fresh));
  }

  // The groups formed, by first member; then the run's steps in the new order.
  std::map<int, const Bucket*> first_of;
  std::set<int> moved;
  for (const Bucket& b : buckets) {
    if (b.kernels.size() < 2 || b.elements < min_elements) continue;
    first_of[b.kernels.front()] = &b;
    moved.insert(b.kernels.begin() + 1, b.kernels.end());
  }
  for (size_t p : positions) {
    const int index = old[p].index;
    if (moved.count(index)) continue;
    auto group = first_of.find(index);
    if (group == first_of.end()) {
      steps.push_back(old[p]);
      continue;
    }
    const Bucket& b = *group->second;
    loop_ir::Group g{"g" + std::to_string(groups.size()), b.kernels};
    for (int k : b.kernels) steps.push_back(loop_ir::Step{loop_ir::Step::Kind::Kernel, k});
    decisions.push_back({FusionDecision::Kind::Group,
                         program.kernels[b.kernels.front()].name + ".." + program.kernels[b.kernels.back()].name,
                         "@" + g.name,
                         std::to_string(b.kernels.size()) + " kernels of one pointwise body, " +
                             std::to_string(b.elements) + " elements in one grouped kernel"});
    groups.push_back(std::move(g));
  }
}

}  // namespace

std::vector<FusionDecision> group_kernels(Program& program, int64_t min_elements, const ShareMemory& share_memory) {
  std::vector<FusionDecision> decisions;
  std::vector<loop_ir::Group> groups;
  std::vector<loop_ir::Step> steps;
  const std::vector<loop_ir::Step> old = program.steps;
  std::vector<size_t> run;
  for (size_t p = 0; p <= old.size(); ++p) {
    if (p < old.size() && old[p].kind == loop_ir::Step::Kind::Kernel) {
      run.push_back(p);
      continue;
    }
    group_run(program, run, old, min_elements, share_memory, steps, groups, decisions);
    run.clear();
    if (p < old.size()) steps.push_back(old[p]);
  }
  program.steps = std::move(steps);
  program.groups = std::move(groups);
  check_verifies(program, "group_kernels");
  return decisions;
}

}  // namespace ember::scheduler
