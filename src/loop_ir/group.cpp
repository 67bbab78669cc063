// Grouped kernels: a member's view through the common body, and the rule a group obeys
// (loop_ir/group.h). The scheduler forms groups with these, the verifier checks them, the C++ code
// generator emits the body once.
#include "loop_ir/group.h"

#include <algorithm>
#include <map>
#include <set>

#include "loop_ir/collapse.h"

namespace ember::loop_ir {

namespace {

// One access of the member: parameter, stream or scalar, offset from element 0 of the buffer.
struct Access {
  size_t param = 0;
  bool stream = false;
  int64_t offset = 0;
};

std::string refuse(std::string* why, const std::string& reason) {
  if (why) *why = reason;
  return reason;
}

bool one_element(const Buffer& b) {
  for (const sym::Expr& size : b.sizes)
    if (size != sym::Expr(1)) return false;
  return true;
}

// The member's accesses (one per load and store, in node order) and parameters, or a reason.
std::optional<std::vector<Access>> accesses(const Program& program, const Kernel& kernel, GroupMember& member,
                                            std::string* why, const std::vector<bool>* streams) {
  // A one-element kernel has no outer range (the scheduler drops ranges of extent 1).
  if (kernel.ranges.size() > 1 || (kernel.ranges.size() == 1 && !kernel.ranges[0].is_constant())) {
    refuse(why, "not one constant outer range");
    return std::nullopt;
  }
  if (!kernel.pointwise()) {
    refuse(why, "not pointwise (one loop without ranges)");
    return std::nullopt;
  }
  member.extent = kernel.ranges.empty() ? 1 : kernel.ranges[0].constant();
  std::vector<Access> out;
  std::map<BufferId, size_t> param_of;
  for (const Node& n : kernel.nodes) {
    if (n.op == ScalarOp::Index || n.op == ScalarOp::CheckIndex) {
      refuse(why, "reads an index value");
      return std::nullopt;
    }
    if (n.op != ScalarOp::Load && n.op != ScalarOp::Store) continue;
    if (n.op == ScalarOp::Load && !n.operands.empty()) {
      refuse(why, "a masked load");
      return std::nullopt;
    }
    const sym::Expr flat = flat_offset(program.buffers.at(n.buffer), n.index);
    const sym::Expr at_zero = sym::substitute(flat, {{"i0", sym::Expr(0)}});
    const std::optional<int64_t> step = linear_coefficient(flat, "i0");
    if (!at_zero.is_constant() || !step || (*step != 0 && *step != 1)) {
      refuse(why, "%b" + std::to_string(n.buffer) + " is read at " + flat.str() + ", not i0 + c or c");
      return std::nullopt;
    }
    auto [it, fresh] = param_of.emplace(n.buffer, member.buffers.size());
    if (fresh) {
      member.buffers.push_back(n.buffer);
      member.bases.push_back(at_zero.constant());
      member.streams.push_back(false);
    }
    // Without an outer range i0 is 0, so each buffer may be seen either way: as the group's other
    // members see it (`streams`), else a one-element buffer as the member's own stream (a
    // one-element parameter) and a larger one as a scalar it reads.
    bool stream = *step == 1;
    if (kernel.ranges.empty())
      stream = streams && it->second < streams->size() ? (*streams)[it->second] : one_element(program.buffers.at(n.buffer));
    Access a{it->second, stream, at_zero.constant()};
    // The driver moves a stream's pointer to each piece; a scalar's stays.
    if (!fresh && member.streams[a.param] != a.stream) {
      refuse(why, "%b" + std::to_string(n.buffer) + " is read both along i0 and at one element");
      return std::nullopt;
    }
    member.bases[a.param] = std::min(member.bases[a.param], a.offset);
    member.streams[a.param] = a.stream;
    out.push_back(a);
  }
  return out;
}

// `kernel` with parameter k's buffer renamed %b<k> and every index the flat [i0 + offset] or
// [offset] relative to the parameter's base, over ranges [extent].
Kernel canonical(const Kernel& kernel, const GroupMember& member, const std::vector<Access>& acc,
                 const sym::Expr& extent) {
  Kernel body = kernel;
  body.name = "body";
  body.ranges = {extent};
  size_t next = 0;
  for (Node& n : body.nodes) {
    if (n.op != ScalarOp::Load && n.op != ScalarOp::Store) continue;
    const Access& a = acc[next++];
    const sym::Expr offset(a.offset - member.bases[a.param]);
    n.buffer = static_cast<BufferId>(a.param);
    n.index = {a.stream ? sym::Expr::symbol("i0") + offset : offset};
  }
  return body;
}

}  // namespace

std::optional<GroupMember> group_member(const Program& program, const Kernel& kernel, std::string* why,
                                        const std::vector<bool>* streams) {
  GroupMember member;
  std::optional<std::vector<Access>> acc = accesses(program, kernel, member, why, streams);
  if (!acc) return std::nullopt;
  for (size_t k = 0; k < member.buffers.size(); ++k)
    member.signature += std::string(ir::dtype_name(program.buffers.at(member.buffers[k]).dtype)) + " ";
  member.signature += "\n" + print(canonical(kernel, member, *acc, sym::Expr::symbol("n")));
  return member;
}

std::optional<std::vector<bool>> group_streams(const Program& program, const std::vector<int>& kernels) {
  for (int k : kernels) {
    if (k < 0 || static_cast<size_t>(k) >= program.kernels.size() || program.kernels[k].ranges.empty()) continue;
    if (std::optional<GroupMember> m = group_member(program, program.kernels[k])) return m->streams;
    return std::nullopt;
  }
  return std::nullopt;
}

std::string group_refusal(const Program& program, const std::vector<int>& kernels) {
  if (kernels.size() < 2) return "fewer than two kernels";
  const std::optional<std::vector<bool>> streams = group_streams(program, kernels);
  std::set<BufferId> written, touched;  // roots, over the members so far
  std::optional<std::string> signature;
  for (int k : kernels) {
    if (k < 0 || static_cast<size_t>(k) >= program.kernels.size()) return "kernel " + std::to_string(k) + " does not exist";
    const Kernel& kernel = program.kernels[k];
    std::string why;
    std::optional<GroupMember> m = group_member(program, kernel, &why, streams ? &*streams : nullptr);
    if (!m) return "@" + kernel.name + ": " + why;
    if (signature && *signature != m->signature) return "@" + kernel.name + " has another body";
    signature = m->signature;
    std::set<BufferId> mine_written, mine;
    for (const Node& n : kernel.nodes) {
      if (n.op != ScalarOp::Load && n.op != ScalarOp::Store) continue;
      const BufferId root = program.storage_root(n.buffer);
      mine.insert(root);
      if (n.op == ScalarOp::Store) mine_written.insert(root);
    }
    for (BufferId b : mine_written)
      if (touched.count(b)) return "@" + kernel.name + " writes %b" + std::to_string(b) + ", which another member reads or writes";
    for (BufferId b : mine)
      if (written.count(b)) return "@" + kernel.name + " reads %b" + std::to_string(b) + ", which another member writes";
    written.insert(mine_written.begin(), mine_written.end());
    touched.insert(mine.begin(), mine.end());
  }
  return "";
}

Kernel group_body(const Program& program, const Kernel& member_kernel, const std::vector<bool>* streams,
                  const std::string& extent, Program& body_program, int64_t largest) {
  GroupMember member;
  std::optional<std::vector<Access>> acc = accesses(program, member_kernel, member, nullptr, streams);
  if (!acc) throw std::invalid_argument("group_body: @" + member_kernel.name + " is not a group member");
  // Pieces of any size down to one element; a hint of a typical piece for the heuristics.
  body_program.symbols.push_back(sym::SymbolInfo{extent, std::min<int64_t>(4096, largest), 1, largest});
  const sym::Expr n = sym::Expr::symbol(extent);
  for (size_t k = 0; k < member.buffers.size(); ++k) {
    Buffer b;
    b.kind = Buffer::Kind::Input;
    b.index = static_cast<int>(k);
    b.dtype = program.buffers.at(member.buffers[k]).dtype;
    b.device = program.buffers.at(member.buffers[k]).device;
    // Sizes only need to keep the dimension (flat_offset skips dimensions of size 1).
    b.sizes = {n + sym::Expr(1)};
    b.strides = {sym::Expr(1)};
    body_program.inputs.push_back(body_program.add_buffer(std::move(b)));
  }
  return canonical(member_kernel, member, *acc, n);
}

}  // namespace ember::loop_ir
