// One node of a kernel body as C++ statements, in scalar code and in vector code (VecF lanes).
//
// Emission dispatches on the op's class (ops.def) and takes every spelling from the C++ spelling
// tables (spelling.h): an op with a pattern needs no code here. What stays here is what a pattern
// cannot say: addresses of loads and stores, conversions between dtypes, index checks (control
// flow), accumulators and their Welford state, and the two vector-code shortcuts (a divisor fixed
// over the loop, exp of a proven non-positive argument).
#include <algorithm>
#include <limits>

#include "codegen/cpp/emit_internal.h"

namespace ember::codegen::detail {

namespace {

using loop_ir::OpClass;

std::string name(NodeId id) { return "t" + std::to_string(id); }

std::string node_desc(const Node& n) {
  return std::string("%t") + std::to_string(n.id) + " (" + loop_ir::op_info(n.op).name + " : " + ir::dtype_name(n.dtype) + ")";
}

[[noreturn]] void unsupported(const Node& n, const std::string& why) {
  throw CodegenError("node " + node_desc(n) + ": " + why);
}

const Buffer& buffer_of(const NodeEnv& env, const Node& n) { return env.program->buffers.at(n.buffer); }

std::string address(const NodeEnv& env, const Node& n) {
  return c_index(element_offset(buffer_of(env, n), n.index), env.symbols);
}

// The pointer to element `addr` of the access's buffer: "p3 + 8*i0 + r0".
std::string pointer(const NodeEnv& env, const Node& n) {
  return env.buffer_name(n.buffer) + " + " + address(env, n);
}

// Lane l's element of an access with constant stride `stride` along the vector variable:
// "p3[784*i0 + i1 + 96*r0 + 96*l]" (the variable's value is the first lane's).
std::string strided_element(const NodeEnv& env, const Node& n, int64_t stride) {
  return env.buffer_name(n.buffer) + "[" + address(env, n) + " + " + std::to_string(stride) + "*l]";
}

// An unmasked load of an integer or bool buffer whose every user is a cast to f32: vector code
// loads it converted (ev::load_float: VecF lanes of static_cast<float>, exact on every ISA) and its
// casts are the identity. Integer values of unknown range have no lanes of their own (VecI holds
// 32 bits), but a float of each element is all these users read.
bool converting_load(const NodeEnv& env, const Node& n) {
  if (n.op != ScalarOp::Load || !n.operands.empty()) return false;
  const DType dt = env.program->buffers.at(n.buffer).dtype;
  if (!is_integer(dt) && dt != DType::Bool) return false;
  bool used = false;
  const std::string as_index = name(n.id);  // an index expression reading the value (gather)
  for (const Node& user : env.kernel->nodes) {
    std::set<std::string> read;
    for (const sym::Expr& e : user.index) sym::free_symbols(e, read);
    if (read.count(as_index)) return false;
    for (NodeId o : user.operands) {
      if (o != n.id) continue;
      if (user.op != ScalarOp::Cast || user.dtype != DType::Float32) return false;
      used = true;
    }
  }
  return used;
}

// A seed or counter of philox_rand in vector code: an integer node only philox_rand operands read,
// kept a scalar (the seed: a load invariant in `var`; the counter: an index affine in `var`, its
// first lane's value) that ev::philox_uniform steps itself. Integer lanes hold 32 bits; counters
// reach past 2^32 (offset k << 32), so they cannot be VecI lanes.
bool philox_scalar(const NodeEnv& env, const Node& n, const std::string& var) {
  if (n.op == ScalarOp::Load) {
    if (!n.operands.empty() || !is_integer(n.dtype) || linear_coefficient(element_offset(buffer_of(env, n), n.index), var) != 0)
      return false;
  } else if (n.op != ScalarOp::Index || !linear_coefficient(n.index.at(0), var)) {
    return false;
  }
  bool used = false;
  const std::string as_index = name(n.id);
  for (const Node& user : env.kernel->nodes) {
    std::set<std::string> read;
    for (const sym::Expr& e : user.index) sym::free_symbols(e, read);
    if (read.count(as_index)) return false;
    for (size_t k = 0; k < user.operands.size(); ++k) {
      if (user.operands[k] != n.id) continue;
      if (user.op != ScalarOp::PhiloxRand || k != (n.op == ScalarOp::Load ? 0u : 1u)) return false;
      used = true;
    }
  }
  return used;
}

// The value of element `addr` of the load's buffer, as a scalar.
std::string scalar_load(const NodeEnv& env, const Node& n) {
  const Buffer& b = buffer_of(env, n);
  return expand(dtype_spelling(b.dtype).load, {env.buffer_name(b.id) + "[" + address(env, n) + "]"});
}

// torch's conversions between dtypes (float → integer truncates; anything → bool is != 0; f16 and
// bf16 values round to what their storage can hold).
std::string cast(DType from, DType to, const std::string& x) {
  if (to == DType::Bool) return from == DType::Bool ? x : "(" + x + " != 0)";
  if (std::string(storage_type(to)) != value_type(to)) return round_to_storage(to, "static_cast<float>(" + x + ")");
  if (std::string(value_type(from)) == value_type(to)) return x;
  return std::string("static_cast<") + value_type(to) + ">(" + x + ")";
}

// cast() in vector code, between the lane types vector_refusal admits: VecF (f32; a bf16/f16
// value, the rounding in registers, in f32 lanes too), MaskF (bool) and VecI (integers in int32
// lanes). Integer to integer is the identity: both ends hold the value.
std::string vector_cast(DType from, DType to, const std::string& x) {
  if (to == DType::BFloat16) return "ev::round_bf16(" + x + ")";
  if (to == DType::Float16) return "ev::round_f16(" + x + ")";
  const bool from_int = is_integer(from), to_int = is_integer(to);
  if (to == DType::Bool) {
    if (from == DType::Bool) return x;
    return "(" + x + (from_int ? " != ev::VecI(0))" : " != ev::VecF(0.0f))");
  }
  if (from == DType::Bool)
    return to_int ? "ev::where(" + x + ", ev::VecI(1), ev::VecI(0))"
                  : "ev::where(" + x + ", ev::VecF::broadcast(1.0f), ev::VecF::broadcast(0.0f))";
  if (from_int && !to_int) return "ev::to_float(" + x + ")";
  return x;
}

// The scalar C++ of a pattern op (an op whose row spells it) computing in `dt`.
std::string scalar_expr(const Node& n, loop_ir::ScalarOp op, DType dt, const std::vector<std::string>& operands) {
  const OpSpelling& s = op_spelling(op);
  const char* pattern = by_kind(s.scalar, value_kind(dt));
  if (!pattern) unsupported(n, s.unsupported ? s.unsupported : "has no scalar C++ form");
  return expand(pattern, operands, value_type(dt));
}

const ReductionSpelling& reduction_of(const Node& n) {
  const ReductionSpelling& r = op_spelling(n.op).reduction;
  if (!r.vector_identity) unsupported(n, "is not a reduction with an accumulator");
  return r;
}

// Scalar sums and products of float32 accumulate in double: one sequential float accumulator over a
// long row loses to torch's cascade summation (docs/codegen-cpp.md, "Float accumulators"). Max and
// min are exact in any type: float.
DType accumulator_dtype(const Node& n) {
  const bool exact = n.op == loop_ir::ScalarOp::ReduceMax || n.op == loop_ir::ScalarOp::ReduceMin;
  return value_kind(n.dtype) == ValueKind::F32 && !exact ? DType::Float64 : n.dtype;
}

bool is_welford(loop_ir::ScalarOp op) { return op == loop_ir::ScalarOp::WelfordMean || op == loop_ir::ScalarOp::WelfordM2; }

std::string welford_name(const NodeEnv& env, const Node& n) { return "wf_" + name(welford_leader(env, n)); }

// The statement updating a scalar reduction's accumulator with `x`.
std::string scalar_reduction_update(const NodeEnv& env, const Node& n, const std::string& x) {
  const std::string acc = "acc_" + name(n.id);
  if (is_welford(n.op)) {
    if (welford_leader(env, n) != n.id) return "";  // the pair's leader updates the shared state
    const std::string w = welford_name(env, n);
    return "{ const double d = " + x + " - " + w + "_mean; " + w + "_n += 1; " + w + "_mean += d / " + w +
           "_n; " + w + "_m2 += d * (" + x + " - " + w + "_mean); }";
  }
  const ReductionSpelling& r = reduction_of(n);
  if (const char* update = by_kind(r.update, value_kind(n.dtype))) return expand(update, {acc, x}) + ";";
  const DType acc_dt = accumulator_dtype(n);
  return acc + " = " + scalar_expr(n, r.combine, acc_dt, {acc, x}) + ";";
}

// acc = combine(acc, x) over VecF accumulators; `into` and `from` are accumulator names.
std::string vector_combine(const Node& n, const std::string& into, const std::string& from) {
  return expand(op_spelling(reduction_of(n).combine).vector, {into, from});
}

std::string vector_reduction_update(const NodeEnv& env, const Node& n, const std::string& x, Mode mode) {
  const std::string acc = "acc_" + name(n.id) + env.acc_suffix;
  if (is_welford(n.op)) {
    if (welford_leader(env, n) != n.id) return "";
    const std::string step = mode == Mode::VectorTail            ? ", n"
                             : env.welford_reciprocal.empty() ? std::string()
                                                              : ", " + env.welford_reciprocal;
    return welford_name(env, n) + env.acc_suffix + ".add(" + x + step + ");";
  }
  const std::string combined = vector_combine(n, acc, x);
  // Lanes past the tail's count hold whatever the body computed from zero-filled loads: keep
  // them out of the accumulator.
  if (mode == Mode::VectorTail) return acc + " = ev::where(tail_mask, " + combined + ", " + acc + ");";
  return acc + " = " + combined + ";";
}

// A check_index: its operand, and on a value outside [0, bound) the error reported (ember::rt::
// report_index_error) and then, in scalar code, the rest of the point skipped; in vector code (`lane_uniform`:
// one index for every lane, checked once a step) the value replaced by 0, a valid index since the bound is a
// constant >= 1 there, so the step reads within the buffer and stores values the raised IndexError discards.
void emit_check_index(const NodeEnv& env, const Node& n, bool vector, const std::string& indent, std::string& out) {
  const std::string bound = c_index(n.bound, env.symbols);  // a constant, or over shape symbols
  // One site per node (vector code checks it in the main body and in the tail).
  const std::string where = env.kernel->name + " %t" + std::to_string(n.id);
  std::vector<std::string>& sites = *env.check_sites;
  const auto found = std::find(sites.begin(), sites.end(), where);
  const int site = static_cast<int>(found - sites.begin());
  if (found == sites.end()) sites.push_back(where);
  // In vector code an index node (fixed_index) is a vector of equal lanes: its scalar is its expression.
  const Node& on = env.node(n.operands.at(0));
  const std::string value = vector && on.op == ScalarOp::Index ? c_index(on.index.at(0), env.symbols) : name(on.id);
  out += indent + (vector ? "" : "const ") + value_type(n.dtype) + " " + name(n.id) + " = " + value + ";\n";
  out += indent + "if (" + name(n.id) + " < 0 || " + name(n.id) + " >= " + bound + ") {\n";
  out += indent + "  ember::rt::report_index_error(ctx, " + std::to_string(site) + ", " + name(n.id) + ", " + bound + ");\n";
  out += indent + (vector ? "  " + name(n.id) + " = 0;\n" : "  goto " + env.next_label + ";\n");
  out += indent + "}\n";
}

}  // namespace

NodeId welford_leader(const NodeEnv& env, const Node& n) {
  for (const Node& other : env.kernel->nodes) {
    if (other.id == n.id) return n.id;
    if (is_welford(other.op) && other.loop == n.loop && other.operands == n.operands) return other.id;
  }
  return n.id;
}

std::string vector_operand_name(NodeId id, bool inside_region) { return inside_region ? name(id) : name(id) + "_v"; }
std::string divisor_name(NodeId id) { return name(id) + "_d"; }

void emit_reduction_init(const NodeEnv& env, const Node& n, bool vector, const std::string& indent, std::string& out) {
  if (is_welford(n.op)) {
    if (welford_leader(env, n) != n.id) return;
    const std::string w = welford_name(env, n);
    if (vector) {
      out += indent + "ev::WelfordF " + w + env.acc_suffix + ";\n";
      if (env.carried.count(n.id) && env.acc_suffix.empty()) out += indent + "ev::WelfordCarry carry_" + w + ";\n";
    } else {
      out += indent + "double " + w + "_mean = 0, " + w + "_m2 = 0;\n";
      out += indent + "int64_t " + w + "_n = 0;\n";
    }
    return;
  }
  const ReductionSpelling& r = reduction_of(n);
  if (vector) {
    out += indent + "ev::VecF acc_" + name(n.id) + env.acc_suffix + " = ev::VecF::broadcast(" + r.vector_identity + ");\n";
    if (env.carried.count(n.id) && env.acc_suffix.empty()) out += indent + "ev::SumCarry carry_" + name(n.id) + ";\n";
    return;
  }
  const std::string t = value_type(accumulator_dtype(n));
  const std::string identity = expand(by_kind(r.identity, value_kind(n.dtype)), {}, t);
  out += indent + t + " acc_" + name(n.id) + " = " + identity + ";\n";
}

void emit_reduction_merge(const NodeEnv& env, const Node& n, const std::string& into, const std::string& from,
                          const std::string& indent, std::string& out) {
  if (is_welford(n.op)) {
    if (welford_leader(env, n) != n.id) return;
    const std::string w = welford_name(env, n);
    out += indent + w + into + " = ev::welford_combine(" + w + into + ", " + w + from + ");\n";
    return;
  }
  const std::string a = "acc_" + name(n.id) + into, b = "acc_" + name(n.id) + from;
  out += indent + a + " = " + vector_combine(n, a, b) + ";\n";
}

void emit_reduction_carry(const NodeEnv& env, const Node& n, const std::string& suffix, const std::string& indent,
                          std::string& out) {
  if (is_welford(n.op)) {
    if (welford_leader(env, n) != n.id) return;
    const std::string w = welford_name(env, n);
    out += indent + "carry_" + w + ".add(" + w + suffix + ");\n";
    out += indent + w + suffix + " = ev::WelfordF();\n";
    return;
  }
  const std::string acc = "acc_" + name(n.id) + suffix;
  out += indent + "carry_" + name(n.id) + ".add(" + acc + ");\n";
  out += indent + acc + " = ev::VecF::broadcast(" + reduction_of(n).vector_identity + ");\n";
}

void emit_reduction_final(const NodeEnv& env, const Node& n, bool vector, const std::string& indent, std::string& out) {
  const std::string t = value_type(n.dtype);
  const std::string lhs = indent + "const " + t + " " + name(n.id) + " = ";
  if (is_welford(n.op)) {
    const std::string w = welford_name(env, n);
    const char* field = n.op == loop_ir::ScalarOp::WelfordMean ? "mean" : "m2";
    if (vector) {
      if (welford_leader(env, n) == n.id)
        out += indent + "const ev::WelfordS " + w + "_r = " +
               (env.carried.count(n.id) ? "carry_" + w + ".total(" + w + ")" : w + ".reduce()") + ";\n";
      out += lhs + "static_cast<" + t + ">(" + w + "_r." + field + ");\n";
    } else {
      out += lhs + "static_cast<" + t + ">(" + w + "_" + field + ");\n";
    }
    return;
  }
  const std::string acc = "acc_" + name(n.id);
  if (!vector) {
    out += lhs + "static_cast<" + t + ">(" + acc + ");\n";
    return;
  }
  if (env.carried.count(n.id)) {
    out += lhs + "carry_" + name(n.id) + ".total(" + acc + ");\n";
    return;
  }
  const ReductionSpelling& r = reduction_of(n);
  if (r.vector_final) {
    out += lhs + expand(r.vector_final, {acc}) + ";\n";
    return;
  }
  // No horizontal reduction in ev::: fold the lanes in order.
  const std::string folded = acc + "_p";
  out += indent + "float " + folded + " = " + r.vector_identity + ";\n";
  out += indent + "for (int l = 0; l < ev::VecF::kSize; ++l) " +
         expand(by_kind(r.update, ValueKind::F32), {folded, acc + ".lane(l)"}) + ";\n";
  out += lhs + folded + ";\n";
}

void emit_scalar_node(const NodeEnv& env, const Node& n, const std::string& indent, std::string& out) {
  require_supported(n.dtype, "node %t" + std::to_string(n.id));
  auto operand = [&](size_t k) { return name(n.operands.at(k)); };
  auto operand_dtype = [&](size_t k) { return env.node(n.operands.at(k)).dtype; };
  const std::string def = indent + "const " + value_type(n.dtype) + " " + name(n.id) + " = ";
  switch (loop_ir::op_info(n.op).cls) {
    case OpClass::Leaf:
      if (n.op == loop_ir::ScalarOp::Load) {
        std::string value = scalar_load(env, n);
        if (!n.operands.empty()) value = operand(0) + " ? " + value + " : " + literal(n.constant, n.dtype);
        out += def + value + ";\n";
      } else if (n.op == loop_ir::ScalarOp::Constant) {
        out += def + literal(n.constant, n.dtype) + ";\n";
      } else {
        out += def + c_index(n.index.at(0), env.symbols) + ";\n";
      }
      return;
    case OpClass::Effect: {
      const Buffer& b = buffer_of(env, n);  // an accumulating store's is f32 or an integer (verify())
      out += indent + env.buffer_name(b.id) + "[" + address(env, n) + "] " + (n.accumulate ? "+= " : "= ") +
             expand(dtype_spelling(b.dtype).store, {operand(0)}) + ";\n";
      return;
    }
    case OpClass::Reduce: {
      std::string update = scalar_reduction_update(env, n, operand(0));
      if (!update.empty()) out += indent + update + "\n";
      return;
    }
    case OpClass::Unary:
      if (n.op == loop_ir::ScalarOp::Cast) {
        out += def + cast(operand_dtype(0), n.dtype, operand(0)) + ";\n";
        return;
      }
      if (n.op == loop_ir::ScalarOp::CheckIndex) {
        emit_check_index(env, n, false, indent, out);
        return;
      }
      break;
    case OpClass::Binary:
    case OpClass::Ternary:
    case OpClass::Compare: break;
  }
  std::vector<std::string> operands;
  for (NodeId o : n.operands) operands.push_back(name(o));
  // A compare computes in its operands' dtype (its own is bool).
  const bool compare = loop_ir::op_info(n.op).cls == OpClass::Compare;
  out += def + scalar_expr(n, n.op, compare ? operand_dtype(0) : n.dtype, operands) + ";\n";
}

// ---- vector code

namespace {

// An index node fixed along `var` (position ids, arange(seq), read by a gather along a row).
bool fixed_index(const Node& n, const std::string& var) {
  return n.op == ScalarOp::Index && linear_coefficient(n.index.at(0), var) == 0;
}

// Whether the kernel stores into memory the caller sees after an error: a graph input's (an in-place
// write) or a torch call result's.
bool stores_to_caller_memory(const NodeEnv& env) {
  for (const Node& n : env.kernel->nodes) {
    if (n.op != ScalarOp::Store) continue;
    const Buffer::Kind kind = env.program->buffers.at(env.program->storage_root(n.buffer)).kind;
    if (kind == Buffer::Kind::Input || kind == Buffer::Kind::Extern) return true;
  }
  return false;
}

}  // namespace

bool lane_uniform(const NodeEnv& env, const Node& n, const std::string& var,
                  const std::function<bool(NodeId)>& inside) {
  if (!inside(n.id) || (n.dtype != DType::Bool && !is_integer(n.dtype))) return false;
  switch (loop_ir::op_info(n.op).cls) {
    case OpClass::Leaf:
      // (A converting load, read only by casts to f32, is a vector load already.)
      return n.op == ScalarOp::Load && n.operands.empty() && !converting_load(env, n) &&
             linear_coefficient(element_offset(buffer_of(env, n), n.index), var) == 0;
    case OpClass::Unary:
      // A check of a uniform index runs once a vector step, against a constant bound (emit_check_index),
      // in a kernel whose stores the raised error discards.
      if (n.op == ScalarOp::CheckIndex) {
        const Node& on = env.node(n.operands.at(0));
        return n.bound.is_constant() && n.bound.constant() >= 1 && !stores_to_caller_memory(env) &&
               (fixed_index(on, var) || lane_uniform(env, on, var, inside));
      }
      [[fallthrough]];
    case OpClass::Binary:
    case OpClass::Compare:
    case OpClass::Ternary: {
      bool any = false;
      for (NodeId o : n.operands) {
        const Node& on = env.node(o);
        if (on.op == ScalarOp::Constant && inside(o)) continue;
        if (!lane_uniform(env, on, var, inside)) return false;
        any = true;
      }
      return any;
    }
    case OpClass::Reduce:
    case OpClass::Effect: return false;
  }
  return false;
}

namespace {

// A lane_uniform node's scalar value: constants among its operands spelled as literals (they stay
// vector values of the region for its other readers).
std::string uniform_value(const NodeEnv& env, const Node& n) {
  if (n.op == ScalarOp::Load) return scalar_load(env, n);
  std::vector<std::string> operands;
  for (NodeId o : n.operands) {
    const Node& on = env.node(o);
    operands.push_back(on.op == ScalarOp::Constant ? literal(on.constant, on.dtype) : name(o));
  }
  const DType first = env.node(n.operands.at(0)).dtype;
  if (n.op == ScalarOp::Cast) return cast(first, n.dtype, operands[0]);
  const bool compare = loop_ir::op_info(n.op).cls == OpClass::Compare;
  return scalar_expr(n, n.op, compare ? first : n.dtype, operands);
}

// The other operand of a comparison that reads lane_uniform `o`, when it has int32 lanes whose
// proven range, widened by one each side, still fits int32: the clamp bounds of o's broadcast.
std::optional<std::pair<int64_t, int64_t>> uniform_clamp(const NodeEnv& env, const Node& user, NodeId o,
                                                          const std::string& var,
                                                          const std::function<bool(NodeId)>& inside) {
  if (loop_ir::op_info(user.op).cls != OpClass::Compare || user.operands.size() != 2) return std::nullopt;
  const NodeId other = user.operands[0] == o ? user.operands[1] : user.operands[0];
  if (!inside(other) || lane_uniform(env, env.node(other), var, inside)) return std::nullopt;
  const auto r = int32_lane_interval(env, env.node(other), var);
  if (!r || r->first - 1 < std::numeric_limits<int32_t>::min() || r->second + 1 > std::numeric_limits<int32_t>::max())
    return std::nullopt;
  return std::make_pair(r->first - 1, r->second + 1);
}

}  // namespace

bool gathered_load(const NodeEnv& env, const Node& n, const std::string& var) {
  if (n.op != ScalarOp::Load || !n.operands.empty() || n.dtype != DType::Float32 ||
      buffer_of(env, n).dtype != DType::Float32)
    return false;
  const sym::Expr offset = element_offset(buffer_of(env, n), n.index);
  if (reads_node_values(offset)) return false;
  const std::optional<int64_t> c = linear_coefficient(offset, var);
  return c ? *c != 0 && *c != 1 : !chunk_contiguous(offset, var);
}

std::string vector_refusal(const NodeEnv& env, const Node& n, const std::string& var,
                           const std::function<bool(NodeId)>& inside) {
  const std::string self = "%t" + std::to_string(n.id);
  if (lane_uniform(env, n, var, inside)) return "";
  for (NodeId o : n.operands) {
    if (inside(o)) {
      const Node& on = env.node(o);
      if (n.op != ScalarOp::PhiloxRand && is_integer(on.dtype) && lane_uniform(env, on, var, inside) &&
          !uniform_clamp(env, n, o, var, inside))
        return self + " uses %t" + std::to_string(o) + ", an " + ir::dtype_name(on.dtype) + " value fixed along " + var +
               " that vector code broadcasts only into a comparison with int32 lanes";
      continue;
    }
    if (env.node(o).dtype != DType::Float32)
      return self + " uses %t" + std::to_string(o) + " (" + ir::dtype_name(env.node(o).dtype) +
             ") from outside the loop, which vector code can only broadcast when it is f32";
  }
  auto operand_dtype = [&](size_t k) { return env.node(n.operands.at(k)).dtype; };
  const bool f32 = n.dtype == DType::Float32;
  // Integer values run in 32-bit lanes where they provably fit (fits_int32_lanes).
  const bool int_lanes = is_integer(n.dtype) && fits_int32_lanes(env, n, var);
  std::string computes_in;
  if (is_integer(n.dtype) && !int_lanes) {
    computes_in = self + " computes " + ir::dtype_name(n.dtype) + " values not proven to fit in int32";
  } else if (!f32 && !int_lanes) {
    computes_in = self + " computes in " + ir::dtype_name(n.dtype);
  }
  auto access = [&](bool store) -> std::string {
    const Buffer& b = buffer_of(env, n);
    if (!dtype_spelling(b.dtype).vector_load && (store || !converting_load(env, n)))
      return self + (store ? " stores to " : " loads from ") + ir::dtype_name(b.dtype) + " buffer %" + env.buffer_name(b.id);
    const sym::Expr offset = element_offset(b, n.index);
    std::optional<int64_t> c = linear_coefficient(offset, var);
    if (!c && chunk_contiguous(offset, var)) return "";  // contiguous across each chunk's lanes
    if (!store && gathered_load(env, n, var)) return "";  // a chunk's element, or lane by lane
    if (!c || *c != 1) {
      if (!store && c && *c == 0) return "";  // invariant in var: one scalar load, broadcast
      if (c && env.strided_lanes && dtype_spelling(b.dtype).vector_load) return "";  // lane by lane
      return self + (store ? " stores to %" : " loads from %") + env.buffer_name(b.id) + " with stride " +
             (c ? std::to_string(*c) : std::string("that is not constant")) + " along " + var;
    }
    return "";
  };
  // A masked f32 load contiguous along var (a cat's input) is a load under the mask's lanes
  // (VecF::load(p, MaskF): the other lanes are never read, so their addresses may lie outside the
  // buffer); one invariant along var (a cat's part of width 1) is read once if any lane needs it.
  // Strided and converting masked loads stay scalar.
  auto masked_load_refusal = [&]() -> std::string {
    const Buffer& b = buffer_of(env, n);
    if (b.dtype != DType::Float32 || !f32) return self + " is a masked load from a " + ir::dtype_name(b.dtype) + " buffer";
    const sym::Expr offset = element_offset(b, n.index);
    const std::optional<int64_t> c = linear_coefficient(offset, var);
    if (c ? *c == 0 || *c == 1 : chunk_contiguous(offset, var)) return "";
    return self + " is a masked load with stride " + (c ? std::to_string(*c) : std::string("that is not constant")) +
           " along " + var;
  };
  const OpSpelling& s = op_spelling(n.op);
  if (philox_scalar(env, n, var)) return "";
  if (n.op == ScalarOp::PhiloxRand) {
    if (!inside(n.operands[0]) || !inside(n.operands[1]) || !philox_scalar(env, env.node(n.operands[0]), var) ||
        !philox_scalar(env, env.node(n.operands[1]), var))
      return self + " (philox_rand) draws from a seed or counter not fixed or affine along " + var;
    return "";
  }
  switch (loop_ir::op_info(n.op).cls) {
    case OpClass::Leaf:
      if (n.op == loop_ir::ScalarOp::Load) return n.operands.empty() ? access(false) : masked_load_refusal();
      if (n.op == loop_ir::ScalarOp::Constant)
        return f32 || int_lanes || n.dtype == DType::Bool ? "" : self + " is a " + ir::dtype_name(n.dtype) + " constant";
      // Chunk-contiguous (`var % D + c`, D a multiple of the lanes: a rotary embedding's halves) steps
      // by one across the lanes of every chunk, as loads of such offsets do.
      if (!linear_coefficient(n.index.at(0), var) && !chunk_contiguous(n.index.at(0), var))
        return self + " computes an integer index not affine in " + var;
      return computes_in;
    case OpClass::Effect: {
      std::string why = access(true);
      if (why.empty() && operand_dtype(0) != DType::Float32) why = self + " stores a non-f32 value";
      if (why.empty() && n.accumulate && buffer_of(env, n).dtype != DType::Float32)
        why = self + " adds into a " + ir::dtype_name(buffer_of(env, n).dtype) + " buffer";
      return why;
    }
    case OpClass::Reduce: return f32 ? "" : self + " computes in " + ir::dtype_name(n.dtype);
    case OpClass::Ternary:
      if (operand_dtype(0) != DType::Bool) return self + " selects by a non-bool condition";
      return n.dtype == DType::Bool ? "" : computes_in;
    case OpClass::Unary:
      if (n.op == loop_ir::ScalarOp::CheckIndex) return self + " checks an integer index";
      if (n.op == loop_ir::ScalarOp::Cast) {
        // Between f32, bool and integers in int32 lanes (an integer operand in the region passed too),
        // and a rounding: f32 to bf16/f16 and back (loop_ir.h: such a value is read only by casts to f32).
        const DType from = operand_dtype(0);
        const bool half = n.dtype == DType::BFloat16 || n.dtype == DType::Float16;
        const bool from_ok = from == DType::Float32 || from == DType::Bool || is_integer(from) ||
                             ((from == DType::BFloat16 || from == DType::Float16) && f32);
        const bool to_ok = f32 || n.dtype == DType::Bool || (int_lanes && from != DType::Float32) ||
                           (half && from == DType::Float32);
        if (from_ok && to_ok) return "";
        return self + " casts " + ir::dtype_name(from) + " to " + ir::dtype_name(n.dtype);
      }
      break;
    case OpClass::Binary:
    case OpClass::Compare: break;
  }
  if (!s.vector) return self + " (" + loop_ir::op_info(n.op).name + ") has no vector form yet";
  const bool takes_ints = s.lanes == VectorLanes::FloatOrInt;
  if (loop_ir::op_info(n.op).cls != OpClass::Compare) {
    if (is_integer(n.dtype) && !takes_ints) return self + " (" + loop_ir::op_info(n.op).name + ") has no integer lanes";
    return computes_in;
  }
  if (s.lanes == VectorLanes::Mask) {
    for (size_t k = 0; k < n.operands.size(); ++k)
      if (operand_dtype(k) != DType::Bool) return self + " takes a non-bool operand";
    return "";
  }
  if (operand_dtype(0) == DType::Float32 || (takes_ints && is_integer(operand_dtype(0)))) return "";
  return self + " compares " + ir::dtype_name(operand_dtype(0)) + " values";
}

void emit_vector_node(const NodeEnv& env, const Node& n, const std::string& var, Mode mode,
                      const std::function<bool(NodeId)>& inside, const std::string& indent, std::string& out) {
  // A lane_uniform operand is a scalar here: broadcast where this vector node reads it.
  auto operand = [&](size_t k) {
    const NodeId o = n.operands.at(k);
    const Node& on = env.node(o);
    if (!lane_uniform(env, on, var, inside)) return vector_operand_name(o, inside(o));
    if (on.dtype == DType::Bool) return "(" + name(o) + " ? !ev::MaskF() : ev::MaskF())";
    const auto bounds = uniform_clamp(env, n, o, var, inside);  // vector_refusal saw to it
    const std::string lo = std::to_string(bounds->first), hi = std::to_string(bounds->second);
    return "ev::VecI::broadcast(static_cast<int32_t>(" + name(o) + " < " + lo + " ? " + lo + " : " + name(o) + " > " + hi +
           " ? " + hi + " : " + name(o) + "))";
  };
  const bool tail = mode == Mode::VectorTail;
  const std::string count = tail ? ", n" : "";
  const bool converting = converting_load(env, n);
  const std::string type = converting               ? "ev::VecF"
                           : n.dtype == DType::Bool ? "ev::MaskF"
                           : is_integer(n.dtype)    ? "ev::VecI"
                                                    : "ev::VecF";
  const std::string def = indent + "const " + type + " " + name(n.id) + " = ";
  const OpSpelling& s = op_spelling(n.op);
  if (philox_scalar(env, n, var)) {  // the seed, or the counter of the first lane
    const std::string value = n.op == ScalarOp::Load ? scalar_load(env, n) : c_index(n.index.at(0), env.symbols);
    out += indent + "const int64_t " + name(n.id) + " = " + value + ";\n";
    return;
  }
  if (n.op == ScalarOp::PhiloxRand) {  // its seed and counter are scalars (philox_scalar)
    const int64_t step = *linear_coefficient(env.node(n.operands[1]).index.at(0), var);
    out += def + "ev::philox_uniform(" + name(n.operands[0]) + ", " + name(n.operands[1]) + ", " + std::to_string(step) +
           ");\n";
    return;
  }
  if (lane_uniform(env, n, var, inside)) {
    if (n.op == ScalarOp::CheckIndex)
      emit_check_index(env, n, true, indent, out);
    else
      out += indent + "const " + value_type(n.dtype) + " " + name(n.id) + " = " + uniform_value(env, n) + ";\n";
    return;
  }
  switch (loop_ir::op_info(n.op).cls) {
    case OpClass::Leaf:
      if (n.op == loop_ir::ScalarOp::Constant) {
        if (n.dtype == DType::Bool) {
          out += def + (literal(n.constant, n.dtype) == "true" ? "!ev::MaskF()" : "ev::MaskF()") + ";\n";
        } else {
          out += def + type + "::broadcast(" + literal(n.constant, n.dtype) + ");\n";
        }
      } else if (n.op == loop_ir::ScalarOp::Index) {
        // The first lane's value, then `coefficient` more per lane (vector_refusal: affine in var,
        // or chunk-contiguous: one more per lane).
        const int64_t step = linear_coefficient(n.index.at(0), var).value_or(1);
        out += def + "ev::VecI::iota(static_cast<int32_t>(" + c_index(n.index.at(0), env.symbols) + "), " +
               std::to_string(step) + ");\n";
      } else if (n.op == loop_ir::ScalarOp::Load) {
        // vector_refusal admitted it: the coefficient along var is 0 (broadcast) or 1 (contiguous),
        // or the offset is contiguous within each aligned chunk (chunk_contiguous), or computed from
        // loop variables (gathered_load); a masked load only contiguous, read under its mask (and
        // the tail's lanes), the fill value elsewhere.
        const Buffer& b = buffer_of(env, n);
        const sym::Expr offset = element_offset(b, n.index);
        std::optional<int64_t> c = linear_coefficient(offset, var);
        // Element by element into an array (`element`: lane l's value), then one vector.
        auto lane_by_lane = [&](const std::string& element) {
          const std::string lanes = name(n.id) + "_lanes";
          out += indent + "alignas(64) float " + lanes + "[ev::VecF::kSize] = {};\n";
          out += indent + "for (int l = 0; l < " + (tail ? "n" : "ev::VecF::kSize") + "; ++l) " + lanes + "[l] = " +
                 element + ";\n";
          out += def + "ev::VecF::load(" + lanes + ");\n";
        };
        if (!n.operands.empty()) {
          const std::string lanes = tail ? "(" + operand(0) + " & ev::MaskF::first(n))" : operand(0);
          const std::string value = c && *c == 0 ? "(ev::any(" + lanes + ") ? ev::VecF::broadcast(" + scalar_load(env, n) +
                                                       ") : ev::VecF())"
                                                 : "ev::VecF::load(" + pointer(env, n) + ", " + lanes + ")";
          out += def + "ev::where(" + operand(0) + ", " + value + ", ev::VecF::broadcast(" +
                 literal(n.constant, n.dtype) + "));\n";
        } else if (c && *c == 0) {
          const std::string x = scalar_load(env, n);
          out += def + "ev::VecF::broadcast(" + (converting ? "static_cast<float>(" + x + ")" : x) + ");\n";
        } else if (!c && gathered_load(env, n, var)) {
          if (chunk_uniform(offset, var)) {  // var is the chunk's first lane
            out += def + "ev::VecF::broadcast(" + scalar_load(env, n) + ");\n";
          } else {  // each lane's offset at var + l (the lambda's parameter shadows var)
            lane_by_lane("[&](const int64_t " + var + ") { return " + scalar_load(env, n) + "; }(" + var + " + l)");
          }
        } else if (c && *c != 1) {  // a constant stride
          lane_by_lane(expand(dtype_spelling(b.dtype).load, {strided_element(env, n, *c)}));
        } else if (converting) {
          out += def + "ev::load_float(" + pointer(env, n) + count + ");\n";
        } else {
          out += def + expand(dtype_spelling(b.dtype).vector_load, {pointer(env, n), "", count}) + ";\n";
        }
      } else {
        unsupported(n, "has no vector form (vector_refusal should have kept it scalar)");
      }
      return;
    case OpClass::Effect: {
      const Buffer& b = buffer_of(env, n);
      std::optional<int64_t> c = linear_coefficient(element_offset(b, n.index), var);
      if (c && *c != 1) {  // strided_lanes: the vector into an array, then element by element
        const std::string lanes = name(n.id) + "_lanes";
        out += indent + "alignas(64) float " + lanes + "[ev::VecF::kSize];\n";
        out += indent + operand(0) + ".store(" + lanes + ");\n";
        // Lane by lane, in order: lanes that share an element (stride 0) all add into it.
        out += indent + "for (int l = 0; l < " + (tail ? "n" : "ev::VecF::kSize") + "; ++l) " +
               strided_element(env, n, *c) + (n.accumulate ? " += " : " = ") +
               expand(dtype_spelling(b.dtype).store, {lanes + "[l]"}) + ";\n";
        return;
      }
      std::string value = operand(0);  // contiguous lanes: distinct elements
      if (n.accumulate) value = "(" + expand(dtype_spelling(b.dtype).vector_load, {pointer(env, n), "", count}) + " + " + value + ")";
      out += indent + expand(dtype_spelling(b.dtype).vector_store, {pointer(env, n), value, count}) + ";\n";
      return;
    }
    case OpClass::Reduce: {
      std::string update = vector_reduction_update(env, n, operand(0), mode);
      if (!update.empty()) out += indent + update + "\n";
      return;
    }
    case OpClass::Unary:
      if (n.op == loop_ir::ScalarOp::Cast) {
        if (converting_load(env, env.node(n.operands[0]))) {  // the load converted already
          out += def + operand(0) + ";\n";
          return;
        }
        out += def + vector_cast(env.node(n.operands[0]).dtype, n.dtype, operand(0)) + ";\n";
        return;
      }
      // A masked tail's dead lanes hold 0 - max, which may be positive: the tail keeps exp.
      if (n.op == loop_ir::ScalarOp::Exp && !tail && exp_argument_nonpositive(env, n)) {
        out += def + "ev::exp_nonpositive(" + operand(0) + ");\n";
        return;
      }
      break;
    case OpClass::Binary:
      // A divisor from outside the region is fixed over the loop: ranged_loop declared its
      // ev::DivisorF next to its broadcast (same bits as " / ", fewer divides).
      if (n.op == loop_ir::ScalarOp::Div && !inside(n.operands.at(1))) {
        out += def + "ev::divide(" + operand(0) + ", " + divisor_name(n.operands.at(1)) + ");\n";
        return;
      }
      break;
    case OpClass::Compare:
    case OpClass::Ternary: break;
  }
  if (!s.vector) unsupported(n, "has no vector form (vector_refusal should have kept it scalar)");
  std::vector<std::string> operands;
  for (size_t k = 0; k < n.operands.size(); ++k) operands.push_back(operand(k));
  out += def + expand(s.vector, operands) + ";\n";
}

}  // namespace ember::codegen::detail
