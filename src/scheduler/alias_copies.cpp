// Copies that move nothing: a kernel that loads each element of one buffer and stores it at the
// same address of a temporary, both laid out alike. It comes from two layout copies that undo each
// other once inlining has composed them: a fused attention kernel writes its output in [B, T, H, D]
// order, the traced graph's layout [B, H, T, D] is restored by one copy, and the model's
// `transpose(1, 2).contiguous()` copies it back. The kernel is dropped and the temporary becomes a
// view of the source's storage: its readers (the projection's matmul) read the source directly
// (Inductor reaches the same end by not restoring the layout: its fallback kernels keep theirs).
//
// Needs: the steps after inlining (a copy whose readers are all kernels has been inlined into them
// already; what is left is read by extern calls). Guarantees: the program reads the same values,
// provided the pair (source S, temporary T) satisfies:
//   - the kernel is pointwise: one unmasked load of S and one overwriting store of it into T, of one
//     dtype (the load may widen a float: bf16 read as f32 and stored back is the same value), over as
//     many points as T has elements; each point's store address in T's storage
//     differs from its load address in S's by one constant;
//   - T is a Temp (a root at offset 0; the program returns no Temp) that no other step writes;
//   - no kernel writes S's storage (a kernel's result is left to fusion, which removes the copy
//     better: its store goes), and no step after the copy writes it (T's readers expect the copied
//     values).
// A refused pair keeps its kernel; the reason is reported only for a kernel that does copy element
// for element into a temporary (a different address is not a refusal: most copies move data; nor is
// a copy into an output or input, which must happen).
#include <algorithm>

#include "loop_ir/collapse.h"
#include "scheduler/internal.h"

namespace ember::scheduler::detail {

using loop_ir::Buffer;
using loop_ir::ScalarOp;

namespace {


// Whether converting a `stored` value to `loaded` and back gives it back exactly: the same dtype, or a
// wider float (bf16 and f16 load as f32, the Triton and C++ targets' compute dtype).
bool round_trips(ir::DType stored, ir::DType loaded) {
  return stored == loaded || (ir::is_floating(stored) && ir::is_floating(loaded) &&
                              ir::dtype_itemsize(loaded) > ir::dtype_itemsize(stored));
}

class CopyAliases {
 public:
  CopyAliases(Program& program, std::vector<WorkStep>& steps, std::vector<FusionDecision>& decisions)
      : p_(program), steps_(steps), decisions_(decisions) {}

  void run() {
    for (size_t k = 0; k < steps_.size(); ++k) {
      const Node* load = nullptr;
      const Node* store = nullptr;
      std::optional<sym::Expr> offset = moving_nothing(k, &load, &store);
      if (!offset) continue;
      FusionDecision d;
      d.producer = p_.buffers[store->buffer].name();
      d.consumer = p_.buffers[load->buffer].name();
      const std::string why = refusal(k, load->buffer, store->buffer);
      if (!why.empty()) {
        d.producer = steps_[k].label;
        d.consumer = "alias of " + p_.buffers[store->buffer].name();
        d.reason = why;
        decisions_.push_back(std::move(d));
        continue;
      }
      Buffer& t = p_.buffers[store->buffer];
      t.kind = Buffer::Kind::View;
      t.base = load->buffer;
      t.offset = *offset;
      d.kind = FusionDecision::Kind::Alias;
      d.reason = steps_[k].label + " stored each element at the address it loaded it from";
      decisions_.push_back(std::move(d));
      steps_.erase(steps_.begin() + static_cast<std::ptrdiff_t>(k));
      --k;
    }
  }

 private:
  // For a kernel that only copies S into T element for element: T's offset from S's first element
  // (the constant difference of the two addresses), with the load and the store. Nullopt otherwise.
  std::optional<sym::Expr> moving_nothing(size_t k, const Node** load, const Node** store) const {
    if (steps_[k].kind != loop_ir::Step::Kind::Kernel) return std::nullopt;
    const Kernel& kernel = steps_[k].kernel;
    if (!kernel.pointwise() || kernel.nodes.size() != 2) return std::nullopt;
    const Node& l = kernel.nodes[0];
    const Node& s = kernel.nodes[1];
    if (l.op != ScalarOp::Load || !l.operands.empty() || s.op != ScalarOp::Store || s.accumulate ||
        s.operands != std::vector<NodeId>{l.id})
      return std::nullopt;
    const Buffer& src = p_.buffers[l.buffer];
    const Buffer& dst = p_.buffers[s.buffer];
    // A Temp root (the program returns no Temp): a copy into an Output or Input must happen.
    if (dst.kind != Buffer::Kind::Temp || dst.offset != sym::Expr(int64_t{0}) || src.dtype != dst.dtype ||
        !round_trips(src.dtype, l.dtype) || p_.storage_root(l.buffer) == s.buffer ||
        sym::product(kernel.ranges) != sym::product(dst.sizes))
      return std::nullopt;
    const sym::Expr offset = loop_ir::simplify(loop_ir::flat_offset(src, l.index) - loop_ir::flat_offset(dst, s.index),
                                               var_ranges(kernel, l.loop));
    if (!offset.is_constant()) return std::nullopt;
    *load = &l;
    *store = &s;
    return offset;
  }

  // Why T cannot become a view of S; empty when it can.
  std::string refusal(size_t k, BufferId s, BufferId t) const {
    const BufferId root = p_.storage_root(s);
    for (size_t j = 0; j < steps_.size(); ++j) {
      if (j == k) continue;
      const Accesses acc = accesses_of(p_, steps_[j]);
      if (acc.writes_root(t)) return steps_[j].label + " writes the copy too";
      if (!acc.writes_root(root)) continue;
      if (j > k) return steps_[j].label + " writes the source after the copy";
      if (steps_[j].kind == loop_ir::Step::Kind::Kernel)
        return steps_[j].label + " computes the source (fusion takes the copy)";
    }
    return "";
  }

  Program& p_;
  std::vector<WorkStep>& steps_;
  std::vector<FusionDecision>& decisions_;
};

}  // namespace

void alias_copies(Program& program, std::vector<WorkStep>& steps, std::vector<FusionDecision>& decisions) {
  CopyAliases(program, steps, decisions).run();
}

}  // namespace ember::scheduler::detail
