// Edits of one kernel that the scheduler's decisions are built from: renaming index symbols,
// renumbering nodes, removing dead and duplicate nodes, and splitting a pointwise iteration space.
//
// Needs: kernels whose nodes are in execution order (loop indices never decrease, operands
// first). Guarantees: each edit keeps that order and computes the same stores; ids come out
// dense, in list order, so printing is deterministic.
//
// Node references live in two places: operand lists, and `t<n>` symbols inside index expressions
// (indirect indexing). Every edit that changes ids rewrites both.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "scheduler/internal.h"

namespace ember::scheduler::detail {

using loop_ir::OpClass;
using loop_ir::ScalarOp;

namespace {

bool parse_node_symbol(const std::string& name, NodeId& id) {
  if (name.size() < 2 || name[0] != 't') return false;
  int64_t v = 0;
  for (size_t k = 1; k < name.size(); ++k) {
    if (name[k] < '0' || name[k] > '9') return false;
    v = v * 10 + (name[k] - '0');
    if (v > INT32_MAX) return false;
  }
  id = static_cast<NodeId>(v);
  return true;
}

// Applies an id map to one node: operands, and t-symbols of its expressions.
void remap_node(Node& node, const std::map<NodeId, NodeId>& ids) {
  SymbolMap symbols;
  for (NodeId& op : node.operands) {
    auto it = ids.find(op);
    if (it != ids.end()) op = it->second;
  }
  std::set<NodeId> refs;
  for (const sym::Expr& e : node.index) collect_node_refs(e, refs);
  collect_node_refs(node.bound, refs);
  for (NodeId r : refs) {
    auto it = ids.find(r);
    if (it != ids.end() && it->second != r) symbols.emplace_back(node_symbol(r), sym::Expr::symbol(node_symbol(it->second)));
  }
  if (!symbols.empty()) rename_in_node(node, symbols);
}

std::string constant_key(const loop_ir::Scalar& c) {
  char buf[64];
  if (const bool* b = std::get_if<bool>(&c)) return *b ? "b1" : "b0";
  if (const int64_t* i = std::get_if<int64_t>(&c)) return "i" + std::to_string(*i);
  std::snprintf(buf, sizeof buf, "d%a", std::get<double>(c));
  return buf;
}

}  // namespace

void rename_in_node(Node& node, const SymbolMap& map) {
  for (sym::Expr& e : node.index) e = sym::substitute(e, map);
  node.bound = sym::substitute(node.bound, map);
}

void collect_node_refs(const sym::Expr& e, std::set<NodeId>& out) {
  if (e.kind() == sym::ExprKind::Symbol) {
    NodeId id;
    if (parse_node_symbol(e.symbol_name(), id)) out.insert(id);
    return;
  }
  for (const sym::Expr& x : e.operands()) collect_node_refs(x, out);
}

std::string node_symbol(NodeId id) { return "t" + std::to_string(id); }
sym::Expr var(const char* prefix, int k) { return sym::Expr::symbol(prefix + std::to_string(k)); }

bool is_reduce(const Node& node) { return loop_ir::op_info(node.op).cls == OpClass::Reduce; }

NodeId append_rounding(NodeId value, ir::DType storage, const Node& load, NodeId& next, std::vector<Node>& out) {
  auto cast = [&](NodeId from, ir::DType dt) {
    Node n;
    n.id = next++;
    n.op = ScalarOp::Cast;
    n.dtype = dt;
    n.loop = load.loop;
    n.operands = {from};
    out.push_back(n);
    return n.id;
  };
  const NodeId rounded = cast(value, storage);
  return load.dtype == storage ? rounded : cast(rounded, load.dtype);
}

int count_ops(const Kernel& kernel) {
  int n = 0;
  for (const Node& node : kernel.nodes) {
    switch (loop_ir::op_info(node.op).cls) {
      case OpClass::Unary:
      case OpClass::Binary:
      case OpClass::Compare:
      case OpClass::Ternary:
      case OpClass::Reduce:
        ++n;
        break;
      case OpClass::Leaf:
      case OpClass::Effect:
        break;
    }
  }
  return n;
}

void renumber_nodes(Kernel& kernel) {
  std::map<NodeId, NodeId> ids;
  for (size_t k = 0; k < kernel.nodes.size(); ++k) ids[kernel.nodes[k].id] = static_cast<NodeId>(k);
  for (size_t k = 0; k < kernel.nodes.size(); ++k) {
    Node& node = kernel.nodes[k];
    remap_node(node, ids);
    node.id = static_cast<NodeId>(k);
  }
}

void shift_ids(Kernel& kernel, NodeId offset) {
  std::map<NodeId, NodeId> ids;
  for (const Node& n : kernel.nodes) ids[n.id] = n.id + offset;
  for (Node& n : kernel.nodes) {
    remap_node(n, ids);
    n.id += offset;
  }
}

void remap_ids(Node& node, const std::map<NodeId, NodeId>& ids) { remap_node(node, ids); }

void remove_dead_nodes(Kernel& kernel) {
  std::map<NodeId, size_t> position;
  for (size_t k = 0; k < kernel.nodes.size(); ++k) position[kernel.nodes[k].id] = k;
  std::vector<bool> live(kernel.nodes.size(), false);
  for (size_t k = kernel.nodes.size(); k-- > 0;) {
    const Node& node = kernel.nodes[k];
    if (node.op == ScalarOp::Store) live[k] = true;
    if (!live[k]) continue;
    std::set<NodeId> refs(node.operands.begin(), node.operands.end());
    for (const sym::Expr& e : node.index) collect_node_refs(e, refs);
    collect_node_refs(node.bound, refs);
    for (NodeId r : refs) {
      auto it = position.find(r);
      if (it != position.end()) live[it->second] = true;
    }
  }
  std::vector<Node> kept;
  for (size_t k = 0; k < kernel.nodes.size(); ++k)
    if (live[k]) kept.push_back(kernel.nodes[k]);
  // Loops left without nodes do nothing; the ones that remain keep their order.
  std::vector<int> new_loop(kernel.loops.size(), -1);
  std::vector<loop_ir::Loop> loops;
  for (size_t l = 0; l < kernel.loops.size(); ++l) {
    bool used = std::any_of(kept.begin(), kept.end(), [&](const Node& n) { return n.loop == static_cast<int>(l); });
    if (!used) continue;
    new_loop[l] = static_cast<int>(loops.size());
    loops.push_back(kernel.loops[l]);
  }
  for (Node& n : kept) n.loop = new_loop[n.loop];
  kernel.nodes = std::move(kept);
  kernel.loops = std::move(loops);
  renumber_nodes(kernel);
}

void merge_duplicates(const Program& program, Kernel& kernel) {
  std::set<BufferId> stored;
  for (const Node& n : kernel.nodes)
    if (n.op == ScalarOp::Store) stored.insert(program.storage_root(n.buffer));
  std::map<NodeId, NodeId> replaced;
  std::map<std::string, NodeId> seen;
  std::vector<Node> kept;
  for (Node node : kernel.nodes) {
    remap_node(node, replaced);
    bool pure = node.op != ScalarOp::Store &&
                !(node.op == ScalarOp::Load && stored.count(program.storage_root(node.buffer)));
    if (pure) {
      std::string key = std::to_string(node.loop) + "|" + loop_ir::op_info(node.op).name + "|" +
                        ir::dtype_name(node.dtype) + "|" + std::to_string(node.buffer) + "|" +
                        constant_key(node.constant) + "|" + node.bound.str() + "|";
      for (NodeId op : node.operands) key += std::to_string(op) + ",";
      key += "|";
      for (const sym::Expr& e : node.index) key += e.str() + ",";
      auto [it, inserted] = seen.emplace(key, node.id);
      if (!inserted) {
        replaced[node.id] = it->second;
        continue;
      }
    }
    kept.push_back(std::move(node));
  }
  kernel.nodes = std::move(kept);
  renumber_nodes(kernel);
}

namespace {

// Whether the double `v` is a value of `storage` (bfloat16: 8 significant bits, float32's exponents;
// float16: 11 bits, exponents down to -14, then multiples of 2^-24, at most 65504).
bool representable(double v, ir::DType storage) {
  if (v == 0 || std::isinf(v)) return true;
  if (std::isnan(v)) return false;  // the bits of a converted NaN are the conversion's own
  int exponent = 0;
  std::frexp(v, &exponent);  // |v| in [2^(exponent-1), 2^exponent)
  const bool bf16 = storage == ir::DType::BFloat16;
  if (bf16 ? exponent > 128 : std::fabs(v) > 65504) return false;
  const int lowest = bf16 ? -126 : -14, bits = bf16 ? 8 : 11;
  const double scaled = std::ldexp(v, bits - std::max(exponent, lowest + 1));
  return scaled == std::trunc(scaled);
}

// Whether node `id`'s value is one of `storage`'s, so that rounding it to `storage` changes nothing:
// a load of such a buffer, a rounding to it, such a constant, and what neg, abs, maximum, minimum
// and where make of such values.
bool exact_in(const Program& program, const std::map<NodeId, const Node*>& by_id, NodeId id, ir::DType storage) {
  const Node& n = *by_id.at(id);
  auto exact = [&](size_t k) { return exact_in(program, by_id, n.operands.at(k), storage); };
  switch (n.op) {
    case ScalarOp::Load:
      return program.buffers.at(n.buffer).dtype == storage &&
             (n.operands.empty() || (std::holds_alternative<double>(n.constant) &&
                                     representable(std::get<double>(n.constant), storage)));
    case ScalarOp::Cast: return by_id.at(n.operands.at(0))->dtype == storage;
    case ScalarOp::Constant:
      return std::holds_alternative<double>(n.constant) && representable(std::get<double>(n.constant), storage);
    case ScalarOp::Neg:
    case ScalarOp::Abs: return exact(0);
    case ScalarOp::Maximum:
    case ScalarOp::Minimum: return exact(0) && exact(1);
    case ScalarOp::Where: return exact(1) && exact(2);
    default: return false;
  }
}

}  // namespace

void drop_exact_roundings(const Program& program, Kernel& kernel) {
  std::map<NodeId, const Node*> by_id;
  for (const Node& n : kernel.nodes) by_id[n.id] = &n;
  std::map<NodeId, NodeId> replaced;  // a cast back to f32 -> the value it rounded
  for (const Node& n : kernel.nodes) {
    if (n.op != ScalarOp::Cast || n.dtype != ir::DType::Float32) continue;
    const Node& rounding = *by_id.at(n.operands.at(0));
    if (rounding.op != ScalarOp::Cast || !(rounding.dtype == ir::DType::BFloat16 || rounding.dtype == ir::DType::Float16))
      continue;
    const NodeId value = rounding.operands.at(0);
    if (by_id.at(value)->dtype == ir::DType::Float32 && exact_in(program, by_id, value, rounding.dtype))
      replaced[n.id] = value;
  }
  if (replaced.empty()) return;
  for (Node& n : kernel.nodes) remap_node(n, replaced);
  remove_dead_nodes(kernel);
}

Kernel split_pointwise(const Kernel& kernel, size_t outer) {
  Kernel out = kernel;
  out.ranges.assign(kernel.ranges.begin(), kernel.ranges.begin() + outer);
  out.loops[0].ranges.assign(kernel.ranges.begin() + outer, kernel.ranges.end());
  SymbolMap map;
  for (size_t j = outer; j < kernel.ranges.size(); ++j)
    map.emplace_back("i" + std::to_string(j), var("r", static_cast<int>(j - outer)));
  for (Node& n : out.nodes) rename_in_node(n, map);
  return out;
}

void drop_unit_ranges(Kernel& kernel) {
  SymbolMap map;
  std::vector<sym::Expr> kept;
  for (size_t k = 0; k < kernel.ranges.size(); ++k) {
    const sym::Expr& r = kernel.ranges[k];
    if (r.is_constant() && r.constant() == 1) {
      map.emplace_back("i" + std::to_string(k), sym::Expr(0));
    } else {
      if (kept.size() != k) map.emplace_back("i" + std::to_string(k), var("i", static_cast<int>(kept.size())));
      kept.push_back(r);
    }
  }
  if (kept.size() == kernel.ranges.size()) return;
  for (Node& n : kernel.nodes) rename_in_node(n, map);
  kernel.ranges = std::move(kept);
}

std::string ranges_str(const std::vector<sym::Expr>& ranges) { return index_str(ranges); }

std::string index_str(const std::vector<sym::Expr>& index) {
  std::string s = "[";
  for (size_t k = 0; k < index.size(); ++k) s += (k ? ", " : "") + index[k].str();
  return s + "]";
}

loop_ir::VarRanges var_ranges(const Kernel& kernel, int loop) {
  loop_ir::VarRanges vr;
  for (size_t k = 0; k < kernel.ranges.size(); ++k) vr.emplace_back("i" + std::to_string(k), kernel.ranges[k]);
  if (loop >= 0 && loop < static_cast<int>(kernel.loops.size())) {
    const auto& r = kernel.loops[loop].ranges;
    for (size_t k = 0; k < r.size(); ++k) vr.emplace_back("r" + std::to_string(k), r[k]);
  }
  return vr;
}

std::optional<int64_t> buffer_bytes(const loop_ir::Buffer& buffer) {
  if (!buffer.offset.is_constant()) return std::nullopt;
  int64_t last = 0;  // element offset of the last element, from the start of the data
  for (size_t k = 0; k < buffer.sizes.size(); ++k) {
    if (!buffer.sizes[k].is_constant()) return std::nullopt;
    if (buffer.sizes[k].constant() == 0) return int64_t{0};
  }
  for (size_t k = 0; k < buffer.sizes.size(); ++k) {
    if (k >= buffer.strides.size() || !buffer.strides[k].is_constant()) return std::nullopt;
    int64_t stride = buffer.strides[k].constant();
    last += (buffer.sizes[k].constant() - 1) * (stride < 0 ? -stride : stride);
  }
  return (buffer.offset.constant() + last + 1) * ir::dtype_itemsize(buffer.dtype);
}

}  // namespace ember::scheduler::detail
