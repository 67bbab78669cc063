// Stores into graph inputs: a copy of a computed value into a graph input (`copy_`, `_foreach_copy_`:
// how a graph writes back what it mutated, and how the optimizer step writes its new parameters and
// state) becomes the store of the kernel that computes the value, straight into the input's memory.
// Without it the value goes to a temporary and an extern call copies it over: two more passes over
// memory (Inductor: "a mutation of an input becomes a store into the input's buffer").
//
// Needs: the scheduled steps (after fusion: the kernel that computes a value is final). Guarantees:
// the program computes what it computed before, provided graph inputs do not share memory with each
// other -- which the runtime checks on every call that runs such a program (runtime/compiled_graph.h,
// "Stores into inputs"); where they do, it gives the kernels a copy of each written input and copies
// back after the run. A pair (input X <- temporary T) is rewritten only when it is safe:
//   - X is an Input buffer itself (not a view) and T a Temp, of one dtype, sizes and strides;
//   - X appears once in the call's arguments, T too; the call's results are used by nobody;
//   - exactly one kernel K stores T, once, and nothing but K and the call reads T;
//   - K reads X only in the loop that stores T, at T's store index, before that store (each point
//     reads its own element before overwriting it), never through a view, and reads no extern
//     result (an extern call may return a view of X);
//   - no step between K and the call touches X or an extern result (they expect X's old value).
// The write order is kept: K runs where it ran, and later copies are checked against the program
// as earlier rewrites left it. A refused pair keeps its copy, and the reason is reported.
#include <algorithm>

#include "scheduler/internal.h"

namespace ember::scheduler::detail {

using loop_ir::Buffer;
using loop_ir::ScalarOp;

namespace {

bool is_copy(const loop_ir::ExternCall& call) {
  if (!call.mutates_first_arg || !call.kwargs.empty() || call.args.size() != 2) return false;
  if (call.callable == "torch.Tensor.copy_") return call.args[0].kind == ir::Arg::Kind::Value;
  if (call.callable != "torch._foreach_copy_") return false;
  const ir::Arg& dst = call.args[0];
  const ir::Arg& src = call.args[1];
  auto values = [](const ir::Arg& a) {
    return (a.kind == ir::Arg::Kind::List || a.kind == ir::Arg::Kind::Tuple) &&
           std::all_of(a.items.begin(), a.items.end(), [](const ir::Arg& i) { return i.kind == ir::Arg::Kind::Value; });
  };
  return values(dst) && values(src) && dst.items.size() == src.items.size();
}

// The (destination, source) argument pairs of a copy call.
std::vector<std::pair<ir::Arg*, ir::Arg*>> pairs_of(loop_ir::ExternCall& call) {
  if (call.args[0].kind == ir::Arg::Kind::Value) return {{&call.args[0], &call.args[1]}};
  std::vector<std::pair<ir::Arg*, ir::Arg*>> out;
  for (size_t j = 0; j < call.args[0].items.size(); ++j) out.emplace_back(&call.args[0].items[j], &call.args[1].items[j]);
  return out;
}

bool touches(const Program& program, const WorkStep& step, BufferId root) {
  return accesses_of(program, step).touches_root(root);
}

bool reads_extern_result(const Program& program, const WorkStep& step) {
  const Accesses acc = accesses_of(program, step);
  return std::any_of(acc.reads.begin(), acc.reads.end(),
                     [&](BufferId b) { return program.buffers[b].kind == Buffer::Kind::Extern; });
}

std::vector<sym::Expr> simplified(const Kernel& k, const Node& n) {
  std::vector<sym::Expr> out;
  const loop_ir::VarRanges ranges = var_ranges(k, n.loop);
  for (const sym::Expr& e : n.index) out.push_back(loop_ir::simplify(e, ranges));
  return out;
}

class InputStores {
 public:
  InputStores(Program& program, std::vector<WorkStep>& steps, std::vector<FusionDecision>& decisions)
      : p_(program), steps_(steps), decisions_(decisions) {}

  void run() {
    for (size_t c = 0; c < steps_.size(); ++c) {
      if (steps_[c].kind != loop_ir::Step::Kind::Extern) continue;
      loop_ir::ExternCall& call = p_.externs[steps_[c].extern_index];
      if (!is_copy(call) || results_used(call, c)) continue;
      std::vector<size_t> done;
      std::vector<std::pair<ir::Arg*, ir::Arg*>> pairs = pairs_of(call);
      for (size_t j = 0; j < pairs.size(); ++j)
        if (rewrite(call, c, pairs[j].first->value, pairs[j].second->value)) done.push_back(j);
      if (done.empty()) continue;
      if (done.size() == pairs.size()) {
        steps_.erase(steps_.begin() + static_cast<std::ptrdiff_t>(c));
        --c;
        continue;
      }
      drop_pairs(call, done);
    }
  }

 private:
  bool results_used(const loop_ir::ExternCall& call, size_t c) const {
    for (BufferId r : call.results) {
      if (std::find(p_.outputs.begin(), p_.outputs.end(), r) != p_.outputs.end()) return true;
      for (size_t s = c + 1; s < steps_.size(); ++s)
        if (touches(p_, steps_[s], r)) return true;
      for (const Buffer& b : p_.buffers)
        if (b.kind == Buffer::Kind::View && p_.storage_root(b.id) == r) return true;
    }
    return false;
  }

  // Why the pair cannot be rewritten; empty when it can, with `*kernel` the step that stores `t`.
  std::string refusal(const loop_ir::ExternCall& call, size_t c, BufferId x, BufferId t, size_t* kernel) const {
    const Buffer& xb = p_.buffers[x];
    const Buffer& tb = p_.buffers[t];
    if (xb.kind != Buffer::Kind::Input) return "the destination is not a graph input itself";
    if (tb.kind != Buffer::Kind::Temp) return "the value is not a temporary";
    if (xb.dtype != tb.dtype || xb.sizes != tb.sizes || xb.strides != tb.strides || xb.offset != tb.offset)
      return "the value's dtype or layout differs from the input's";
    const std::vector<BufferId> args = call.buffer_args();
    if (std::count(args.begin(), args.end(), x) != 1 || std::count(args.begin(), args.end(), t) != 1)
      return "the call names the input or the value twice";
    std::optional<size_t> writer;
    for (size_t s = 0; s < steps_.size(); ++s) {
      if (s == c || !touches(p_, steps_[s], t)) continue;
      const bool stores = steps_[s].kind == loop_ir::Step::Kind::Kernel &&
                          std::any_of(steps_[s].kernel.nodes.begin(), steps_[s].kernel.nodes.end(),
                                      [&](const Node& n) { return n.op == ScalarOp::Store && n.buffer == t; });
      if (!stores || writer) return "another step reads the value, or several write it";
      writer = s;
    }
    if (!writer || *writer > c) return "no kernel before the copy computes the value";
    for (size_t s = *writer + 1; s < c; ++s)
      if (touches(p_, steps_[s], x) || reads_extern_result(p_, steps_[s]))
        return steps_[s].label + " runs between the kernel and the copy and uses the input or an extern result";
    const WorkStep& k = steps_[*writer];
    if (reads_extern_result(p_, k)) return k.label + " reads an extern result, which may alias the input";
    const Node* store = nullptr;
    for (const Node& n : k.kernel.nodes) {
      if (n.op != ScalarOp::Store || n.buffer != t) continue;
      if (store) return k.label + " stores the value twice";
      store = &n;
    }
    const std::vector<sym::Expr> at = simplified(k.kernel, *store);
    bool stored = false;  // past the store: a read of X there would see the new value
    for (const Node& n : k.kernel.nodes) {
      stored = stored || &n == store;
      if (n.op == ScalarOp::Store && p_.storage_root(n.buffer) == x) return k.label + " already writes the input";
      if (n.op != ScalarOp::Load || p_.storage_root(n.buffer) != x) continue;
      if (stored) return k.label + " reads the input after storing the value";
      if (n.buffer != x || n.loop != store->loop || simplified(k.kernel, n) != at)
        return k.label + " reads the input at another index (or through a view) than it stores the value";
    }
    *kernel = *writer;
    return "";
  }

  bool rewrite(const loop_ir::ExternCall& call, size_t c, BufferId x, BufferId t) {
    size_t kernel = 0;
    const std::string why = refusal(call, c, x, t, &kernel);
    FusionDecision d;
    d.producer = steps_[c].label;
    if (!why.empty()) {
      d.consumer = "store into " + p_.buffers[x].name();
      d.reason = why;
      decisions_.push_back(std::move(d));
      return false;
    }
    WorkStep& k = steps_[kernel];
    for (Node& n : k.kernel.nodes)
      if ((n.op == ScalarOp::Store || n.op == ScalarOp::Load) && n.buffer == t) n.buffer = x;
    d.kind = FusionDecision::Kind::Store;
    d.producer = k.label;
    d.consumer = p_.buffers[x].name();
    d.reason = p_.buffers[t].name() + "'s value, instead of " + call.callable;
    decisions_.push_back(std::move(d));
    return true;
  }

  static void drop_pairs(loop_ir::ExternCall& call, const std::vector<size_t>& done) {
    for (size_t n = done.size(); n-- > 0;) {
      const auto at = static_cast<std::ptrdiff_t>(done[n]);
      call.args[0].items.erase(call.args[0].items.begin() + at);
      call.args[1].items.erase(call.args[1].items.begin() + at);
      if (call.results.size() > done[n]) call.results.erase(call.results.begin() + at);
    }
  }

  Program& p_;
  std::vector<WorkStep>& steps_;
  std::vector<FusionDecision>& decisions_;
};

}  // namespace

void store_into_inputs(Program& program, std::vector<WorkStep>& steps, std::vector<FusionDecision>& decisions) {
  InputStores(program, steps, decisions).run();
}

}  // namespace ember::scheduler::detail
