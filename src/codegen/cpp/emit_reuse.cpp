// Reuse of expensive values across the loops of one kernel (docs/codegen-cpp.md, "Performance").
//
// A fused reduction recomputes: softmax's third loop computes exp(x - max) again, which its second
// loop already computed for the sum. When a later vector loop computes a value that an earlier
// vector loop over the same ranges computed with the same operations from the same operands, the
// earlier loop stores it into a per-outer-point scratch array and the later loop loads it back.
//
// Needs: both loops vectorized (so both write and read whole rows through VecF), equal extents,
// loads of buffers the kernel never writes (the value read again would be the same), no index
// expression reading node values (t<n> symbols name different nodes in the two loops).
// Guarantees: the loaded bits equal what recomputation would give (the same operations on the
// same inputs); only values with a transcendental op in them are cached (loading a cheap value
// costs about what recomputing it does); scratch stays small enough for L1/L2 (kMaxScratch).
//
// Symbolic extents (shape symbols): only one-variable loops, compared as expressions; the limits
// are checked at the hints (a heuristic), and the scratch is a per-thread array grown to the run-time
// extent (ember::rt::thread_scratch) instead of a stack array; never in the output row (its
// disjointness test needs constant extents).
#include <algorithm>
#include <limits>
#include <optional>

#include "codegen/cpp/emit_internal.h"

namespace ember::codegen::detail {

namespace {

// Elements per scratch array and in all of a kernel's: 32 KiB and 64 KiB of floats, so the rows
// stay in L1/L2 between the two loops and the stack frame stays modest.
constexpr int64_t kMaxScratch = 8192;
constexpr int64_t kMaxScratchTotal = 16384;

// Same computation, operands aside.
bool same_node_fields(const Node& a, const Node& b) {
  if (a.op != b.op || a.dtype != b.dtype || a.operands.size() != b.operands.size()) return false;
  if (a.op == ScalarOp::Constant) return a.constant == b.constant;
  if (a.op == ScalarOp::Index) return a.index == b.index && !reads_node_values(a.index.at(0));
  if (a.op == ScalarOp::Load) {
    if (a.buffer != b.buffer || a.index.size() != b.index.size() || !a.operands.empty()) return false;
    for (size_t d = 0; d < a.index.size(); ++d)
      if (a.index[d] != b.index[d] || reads_node_values(a.index[d])) return false;
    return true;
  }
  const loop_ir::OpClass cls = loop_ir::op_info(a.op).cls;
  return cls == loop_ir::OpClass::Unary || cls == loop_ir::OpClass::Binary || cls == loop_ir::OpClass::Compare ||
         cls == loop_ir::OpClass::Ternary;
}

// Where a scratch array can live in the output instead: the loop that reads it back (l2) stores
// into a float32 output or temporary, at exactly the scratch's row-major layout per outer point,
// and the rows of different outer points do not overlap. The earlier loop then writes the kept
// values straight into the output row and the later one overwrites them in place, element by
// element after reading them: the output's lines are fetched while the earlier (expensive) loop
// runs, and the later loop's loads and stores hit L1 (softmax: exp pass, then out *= 1/sum).
// Needs: that store is the buffer's only one in the kernel and nothing loads the buffer; every
// read of the scratch is in l2 and comes before the store in the loop body.
std::optional<std::string> output_row_scratch(const NodeEnv& env, const std::vector<std::vector<int64_t>>& loops,
                                              const std::vector<int64_t>& outer, int l2,
                                              const std::vector<NodeId>& readers) {
  const Kernel& k = *env.kernel;
  const Program& p = *env.program;
  const std::vector<int64_t>& ext = loops[static_cast<size_t>(l2)];
  const Node* store = nullptr;
  for (const Node& n : k.nodes) {
    if (n.op != ScalarOp::Store || n.loop != l2) continue;
    const Buffer& b = p.buffers.at(n.buffer);
    const Buffer::Kind kind = p.buffers.at(p.storage_root(n.buffer)).kind;
    if (b.dtype != DType::Float32 || (kind != Buffer::Kind::Output && kind != Buffer::Kind::Temp)) continue;
    store = &n;
    break;
  }
  if (store == nullptr) return std::nullopt;
  const BufferId root = p.storage_root(store->buffer);
  for (const Node& n : k.nodes)
    if ((n.op == ScalarOp::Load || n.op == ScalarOp::Store) && &n != store && p.storage_root(n.buffer) == root)
      return std::nullopt;
  for (NodeId r : readers)
    if (env.node(r).loop != l2 || env.position.at(r) > env.position.at(store->id)) return std::nullopt;
  const sym::Expr offset = element_offset(p.buffers.at(store->buffer), store->index);
  if (reads_node_values(offset)) return std::nullopt;
  int64_t elements = 1;
  for (size_t d = ext.size(); d-- > 0;) {
    std::optional<int64_t> c = linear_coefficient(offset, "r" + std::to_string(d));
    if (!c || *c != elements) return std::nullopt;
    elements *= ext[d];
  }
  // Rows of different outer points are disjoint when the outer strides, smallest first, each
  // step over everything the smaller ones span (the non-overlap test of a strided layout).
  std::vector<std::pair<int64_t, int64_t>> strides;  // |coefficient|, extent
  for (size_t d = 0; d < outer.size(); ++d) {
    std::optional<int64_t> c = linear_coefficient(offset, "i" + std::to_string(d));
    if (!c) return std::nullopt;
    if (outer[d] > 1 || outer[d] < 0) strides.push_back({*c < 0 ? -*c : *c, outer[d]});
  }
  std::sort(strides.begin(), strides.end());
  // A symbolic extent (-1) spans an unknown length: only the largest stride may have one.
  int64_t span = elements;
  for (const auto& [stride, extent] : strides) {
    if (stride < span) return std::nullopt;
    span = extent < 0 ? std::numeric_limits<int64_t>::max() : stride * extent;
  }
  return env.buffer_name(store->buffer) + " + " + c_index(offset, env.symbols);
}

}  // namespace

LoopReuse plan_loop_reuse(const NodeEnv& env, const std::vector<std::vector<int64_t>>& loops,
                          const std::vector<bool>& vector_loop) {
  LoopReuse plan;
  const Kernel& k = *env.kernel;
  const Program& p = *env.program;
  std::vector<BufferId> written;
  for (const Node& n : k.nodes)
    if (n.op == ScalarOp::Store) written.push_back(p.storage_root(n.buffer));
  // A store into an input or an extern's result may alias anything the kernel loads.
  for (BufferId b : written) {
    Buffer::Kind kind = p.buffers.at(b).kind;
    if (kind == Buffer::Kind::Input || kind == Buffer::Kind::Extern) return plan;
  }
  auto loads_unwritten = [&](const Node& n) {
    return n.op != ScalarOp::Load ||
           std::find(written.begin(), written.end(), p.storage_root(n.buffer)) == written.end();
  };
  int64_t total = 0;
  for (size_t l2 = 1; l2 < loops.size(); ++l2) {
    if (!vector_loop[l2] || loops[l2].empty()) continue;
    const std::vector<sym::Expr>& ranges = k.loops[l2].ranges;
    const bool symbolic = !std::all_of(ranges.begin(), ranges.end(), [](const sym::Expr& e) { return e.is_constant(); });
    if (symbolic && ranges.size() != 1) continue;
    int64_t elements = 1;
    for (int64_t e : loops[l2]) elements *= e;
    if (elements > kMaxScratch) continue;
    for (size_t l1 = l2; l1-- > 0;) {
      if (!vector_loop[l1] || loops[l1] != loops[l2] || k.loops[l1].ranges != ranges) continue;
      // match[n2] = the node of loop l1 computing the same value (bottom-up, operands first).
      std::unordered_map<NodeId, NodeId> match;
      std::unordered_map<NodeId, bool> costly;  // the matched value has a transcendental in it
      for (const Node& n2 : k.nodes) {
        if (n2.loop != static_cast<int>(l2) || plan.load_instead.count(n2.id) || !loads_unwritten(n2)) continue;
        for (const Node& n1 : k.nodes) {
          if (n1.loop != static_cast<int>(l1) || !same_node_fields(n1, n2)) continue;
          bool same = true;
          bool cost = op_spelling(n2.op).transcendental;
          for (size_t o = 0; o < n2.operands.size() && same; ++o) {
            NodeId a = n1.operands[o], b = n2.operands[o];
            if (env.node(b).loop == static_cast<int>(l2)) {
              auto it = match.find(b);
              same = it != match.end() && it->second == a;
              if (same) cost = cost || costly[b];
            } else {
              same = a == b;
            }
          }
          if (!same) continue;
          match[n2.id] = n1.id;
          costly[n2.id] = cost;
          break;
        }
      }
      // Cache the matched costly values that some unmatched node of l2 uses (the largest ones).
      for (const Node& user : k.nodes) {
        if (user.loop != static_cast<int>(l2) || match.count(user.id)) continue;
        for (NodeId o : user.operands) {
          auto it = match.find(o);
          if (it == match.end() || !costly[o] || plan.load_instead.count(o)) continue;
          if (total + elements > kMaxScratchTotal) continue;
          NodeId source = it->second;
          // The source may itself be loaded from an earlier loop's scratch: read that one.
          auto loaded = plan.load_instead.find(source);
          if (loaded != plan.load_instead.end()) {
            plan.load_instead[o] = loaded->second;
            continue;
          }
          auto existing = plan.store_after.find(source);
          std::string scratch = existing != plan.store_after.end() ? existing->second : "sc_t" + std::to_string(source);
          if (existing == plan.store_after.end()) {
            plan.store_after[source] = scratch;
            plan.scratch.push_back({scratch, elements});
            if (symbolic) plan.run_time_sized[scratch] = ranges[0];
            total += elements;
          }
          plan.load_instead[o] = scratch;
        }
      }
    }
  }
  if (plan.load_instead.empty()) return plan;
  std::vector<int64_t> outer;  // -1: symbolic
  for (const sym::Expr& r : k.ranges) outer.push_back(r.is_constant() ? r.constant() : -1);
  for (const auto& [name, elements] : plan.scratch) {
    std::vector<NodeId> readers;
    int l2 = -1;
    for (const auto& [id, scratch] : plan.load_instead) {
      if (scratch != name) continue;
      readers.push_back(id);
      l2 = std::max(l2, env.node(id).loop);
    }
    if (l2 < 0) continue;
    if (plan.run_time_sized.count(name)) continue;
    std::optional<std::string> ptr = output_row_scratch(env, loops, outer, l2, readers);
    bool taken = false;  // one scratch per output row
    for (const auto& [other, other_ptr] : plan.in_output) taken = taken || (ptr && other_ptr == *ptr);
    if (ptr && !taken) plan.in_output[name] = *ptr;
  }
  // Nodes of later loops that only fed the replaced values are not emitted.
  std::unordered_map<NodeId, bool> live;
  for (size_t i = k.nodes.size(); i-- > 0;) {
    const Node& n = k.nodes[i];
    const loop_ir::OpClass cls = loop_ir::op_info(n.op).cls;
    // Roots: reductions, stores, and values a later loop reads from scratch.
    if (cls == loop_ir::OpClass::Reduce || cls == loop_ir::OpClass::Effect || plan.store_after.count(n.id))
      live[n.id] = true;
    if (!live[n.id]) continue;
    if (plan.load_instead.count(n.id)) continue;
    for (NodeId o : n.operands) live[o] = true;
  }
  for (const Node& n : k.nodes)
    if (!live[n.id] && n.loop > 0) {
      bool in_reusing_loop = false;
      for (const auto& [id, name] : plan.load_instead) in_reusing_loop = in_reusing_loop || env.node(id).loop == n.loop;
      if (in_reusing_loop) plan.dead.insert(n.id);
    }
  return plan;
}

std::string scratch_offset(const std::vector<int64_t>& extents) {
  std::string s;
  int64_t stride = 1;
  for (size_t d = extents.size(); d-- > 0;) {
    std::string term = "r" + std::to_string(d) + (stride == 1 ? "" : "*" + std::to_string(stride));
    s = s.empty() ? term : term + " + " + s;
    stride *= extents[d];
  }
  return s;
}

}  // namespace ember::codegen::detail
