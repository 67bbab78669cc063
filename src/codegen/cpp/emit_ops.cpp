// One node of a kernel body as C++ statements, in scalar code and in vector code (VecF lanes).
//
// Scalar float32 math goes through ember::vec's scalar functions, the same algorithms as its
// vector ones, so a vector loop's main lanes, its masked tail and a scalar loop agree. float64
// uses <cmath>. Integer ops follow torch: wrap-around arithmetic, Python rounding for // and %.
// Every switch over ScalarOp lists every op, so a new op in ops.def fails to compile here until
// it is handled.
#include "codegen/cpp/emit_internal.h"

namespace ember::codegen::detail {

namespace {

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

// The float value of a stored element.
std::string load_value(DType dt, const std::string& element) {
  if (dt == DType::Float16) return "ev::f16_to_f32(" + element + ")";
  if (dt == DType::BFloat16) return "ev::bf16_to_f32(" + element + ")";
  return element;
}

std::string store_value(DType dt, const std::string& value) {
  if (dt == DType::Float16) return "ev::f32_to_f16(" + value + ")";
  if (dt == DType::BFloat16) return "ev::f32_to_bf16(" + value + ")";
  return value;
}

// The value of element `addr` of the load's buffer, as a scalar.
std::string scalar_load(const NodeEnv& env, const Node& n) {
  const Buffer& b = buffer_of(env, n);
  return load_value(b.dtype, "b" + std::to_string(b.id) + "[" + address(env, n) + "]");
}

// torch's conversions between dtypes (float → integer truncates; anything → bool is != 0).
std::string cast(DType from, DType to, const std::string& x) {
  if (to == DType::Bool) return from == DType::Bool ? x : "(" + x + " != 0)";
  if (to == DType::Float16) return "ev::f16_to_f32(ev::f32_to_f16(static_cast<float>(" + x + ")))";
  if (to == DType::BFloat16) return "ev::bf16_to_f32(ev::f32_to_bf16(static_cast<float>(" + x + ")))";
  if (std::string(value_type(from)) == value_type(to)) return x;
  return std::string("static_cast<") + value_type(to) + ">(" + x + ")";
}

std::string unary_scalar(const Node& n, DType dt, const std::string& x) {
  const bool f32 = is_f32_like(dt);
  const bool f64 = dt == DType::Float64;
  const bool flt = f32 || f64;
  const bool integer = is_integer(dt);
  auto math = [&](const char* vec_name, const char* std_name) {
    if (f32) return std::string("ev::") + vec_name + "(" + x + ")";
    if (f64) return std::string(std_name) + "(" + x + ")";
    unsupported(n, "needs a floating-point operand");
  };
  switch (n.op) {
    case ScalarOp::Neg:
      if (dt == DType::Bool) unsupported(n, "negation of bool");
      return "-" + x;
    case ScalarOp::Abs:
      if (f32) return "ev::abs(" + x + ")";
      if (f64) return "std::fabs(" + x + ")";
      if (dt == DType::Bool) return x;
      return "(" + x + " < 0 ? -" + x + " : " + x + ")";
    case ScalarOp::Exp: return math("exp", "std::exp");
    case ScalarOp::Log: return math("log", "std::log");
    case ScalarOp::Log1p: return math("log1p", "std::log1p");
    case ScalarOp::Expm1: return math("expm1", "std::expm1");
    case ScalarOp::Sqrt: return math("sqrt", "std::sqrt");
    case ScalarOp::Rsqrt:
      if (f64) return "1.0 / std::sqrt(" + x + ")";
      return math("rsqrt", "");
    case ScalarOp::Sin: return math("sin", "std::sin");
    case ScalarOp::Cos: return math("cos", "std::cos");
    case ScalarOp::Tanh: return math("tanh", "std::tanh");
    case ScalarOp::Sigmoid:
      if (f64) return "1.0 / (1.0 + std::exp(-" + x + "))";
      return math("sigmoid", "");
    case ScalarOp::Erf: return math("erf", "std::erf");
    case ScalarOp::Reciprocal:
      if (f64) return "1.0 / " + x;
      return math("reciprocal", "");
    case ScalarOp::Relu:
      if (f32) return "ev::relu(" + x + ")";
      if (f64) return "(" + x + " < 0.0 ? 0.0 : " + x + ")";  // NaN and -0.0 pass, as in torch
      if (dt == DType::Bool) return x;
      return "(" + x + " > 0 ? " + x + " : 0)";
    case ScalarOp::Floor:
      if (!flt) return x;
      return math("floor", "std::floor");
    case ScalarOp::Ceil:
      if (!flt) return x;
      return math("ceil", "std::ceil");
    case ScalarOp::Trunc:
      if (!flt) return x;
      return math("trunc", "std::trunc");
    case ScalarOp::Round:
      if (!flt) return x;
      return math("round", "std::nearbyint");  // the default rounding mode: half to even
    case ScalarOp::Sign:
      if (f32) return "ev::sign(" + x + ")";
      if (dt == DType::Bool) return x;
      if (f64) return "static_cast<double>((" + x + " > 0.0) - (" + x + " < 0.0))";  // sign(NaN) is 0 in torch
      return "((" + x + " > 0) - (" + x + " < 0))";
    case ScalarOp::BitwiseNot:
      if (dt == DType::Bool) return "!" + x;
      if (!integer) unsupported(n, "bitwise_not needs an integer or bool operand");
      return "~" + x;
    case ScalarOp::Load:
    case ScalarOp::Constant:
    case ScalarOp::Index:
    case ScalarOp::IsNan:
    case ScalarOp::LogicalNot:
    case ScalarOp::Cast:
    case ScalarOp::Add:
    case ScalarOp::Sub:
    case ScalarOp::Mul:
    case ScalarOp::Div:
    case ScalarOp::FloorDiv:
    case ScalarOp::Mod:
    case ScalarOp::Pow:
    case ScalarOp::Maximum:
    case ScalarOp::Minimum:
    case ScalarOp::BitwiseAnd:
    case ScalarOp::BitwiseOr:
    case ScalarOp::BitwiseXor:
    case ScalarOp::Eq:
    case ScalarOp::Ne:
    case ScalarOp::Lt:
    case ScalarOp::Le:
    case ScalarOp::Gt:
    case ScalarOp::Ge:
    case ScalarOp::LogicalAnd:
    case ScalarOp::LogicalOr:
    case ScalarOp::Where:
    case ScalarOp::ReduceSum:
    case ScalarOp::ReduceProd:
    case ScalarOp::ReduceMax:
    case ScalarOp::ReduceMin:
    case ScalarOp::WelfordMean:
    case ScalarOp::WelfordM2:
    case ScalarOp::CheckIndex:
    case ScalarOp::Store: break;
  }
  unsupported(n, "is not a unary op");
}

// NaN-propagating maximum/minimum of two scalars of `dt` (torch.maximum / torch.minimum).
std::string extremum(bool is_max, DType dt, const std::string& a, const std::string& b) {
  if (is_f32_like(dt)) return std::string(is_max ? "ev::maximum(" : "ev::minimum(") + a + ", " + b + ")";
  if (dt == DType::Bool) return "(" + a + (is_max ? " || " : " && ") + b + ")";
  const char* cmp = is_max ? " > " : " < ";
  if (dt == DType::Float64)
    return "((" + a + " != " + a + " || " + a + cmp + b + ") ? " + a + " : (" + b + " != " + b + ") ? " + b + " : " +
           a + cmp + b + " ? " + a + " : " + b + ")";
  return "(" + a + cmp + b + " ? " + a + " : " + b + ")";
}

std::string binary_scalar(const Node& n, DType dt, const std::string& a, const std::string& b) {
  const bool flt = is_f32_like(dt) || dt == DType::Float64;
  const bool integer = is_integer(dt);
  const bool boolean = dt == DType::Bool;
  switch (n.op) {
    case ScalarOp::Add:
      if (boolean) return "(" + a + " || " + b + ")";
      return a + " + " + b;
    case ScalarOp::Sub:
      if (boolean) unsupported(n, "subtraction of bools");
      return a + " - " + b;
    case ScalarOp::Mul:
      if (boolean) return "(" + a + " && " + b + ")";
      return a + " * " + b;
    case ScalarOp::Div:
      if (!flt) unsupported(n, "true division needs floating-point operands (lowering casts them)");
      return a + " / " + b;
    case ScalarOp::FloorDiv:
      if (flt) return std::string("ember::rt::floordiv_float<") + value_type(dt) + ">(" + a + ", " + b + ")";
      if (!integer) unsupported(n, "floordiv of bools");
      return std::string("ember::rt::floordiv_int<") + value_type(dt) + ">(" + a + ", " + b + ")";
    case ScalarOp::Mod:
      if (flt) return std::string("ember::rt::mod_float<") + value_type(dt) + ">(" + a + ", " + b + ")";
      if (!integer) unsupported(n, "mod of bools");
      return std::string("ember::rt::mod_int<") + value_type(dt) + ">(" + a + ", " + b + ")";
    case ScalarOp::Pow:
      if (is_f32_like(dt)) return "ev::pow(" + a + ", " + b + ")";
      if (dt == DType::Float64) return "std::pow(" + a + ", " + b + ")";
      if (!integer) unsupported(n, "pow of bools");
      return std::string("ember::rt::pow_int<") + value_type(dt) + ">(" + a + ", " + b + ")";
    case ScalarOp::Maximum: return extremum(true, dt, a, b);
    case ScalarOp::Minimum: return extremum(false, dt, a, b);
    case ScalarOp::BitwiseAnd:
    case ScalarOp::BitwiseOr:
    case ScalarOp::BitwiseXor: {
      if (!integer && !boolean) unsupported(n, "bitwise ops need integer or bool operands");
      const char* op = n.op == ScalarOp::BitwiseAnd ? " & " : n.op == ScalarOp::BitwiseOr ? " | " : " ^ ";
      return "(" + a + op + b + ")";
    }
    case ScalarOp::Eq: return a + " == " + b;
    case ScalarOp::Ne: return a + " != " + b;
    case ScalarOp::Lt: return a + " < " + b;
    case ScalarOp::Le: return a + " <= " + b;
    case ScalarOp::Gt: return a + " > " + b;
    case ScalarOp::Ge: return a + " >= " + b;
    case ScalarOp::LogicalAnd: return "(" + a + " && " + b + ")";
    case ScalarOp::LogicalOr: return "(" + a + " || " + b + ")";
    case ScalarOp::Load:
    case ScalarOp::Constant:
    case ScalarOp::Index:
    case ScalarOp::Neg:
    case ScalarOp::Abs:
    case ScalarOp::Exp:
    case ScalarOp::Log:
    case ScalarOp::Log1p:
    case ScalarOp::Expm1:
    case ScalarOp::Sqrt:
    case ScalarOp::Rsqrt:
    case ScalarOp::Sin:
    case ScalarOp::Cos:
    case ScalarOp::Tanh:
    case ScalarOp::Sigmoid:
    case ScalarOp::Erf:
    case ScalarOp::Reciprocal:
    case ScalarOp::Relu:
    case ScalarOp::Floor:
    case ScalarOp::Ceil:
    case ScalarOp::Trunc:
    case ScalarOp::Round:
    case ScalarOp::Sign:
    case ScalarOp::IsNan:
    case ScalarOp::LogicalNot:
    case ScalarOp::BitwiseNot:
    case ScalarOp::Cast:
    case ScalarOp::Where:
    case ScalarOp::ReduceSum:
    case ScalarOp::ReduceProd:
    case ScalarOp::ReduceMax:
    case ScalarOp::ReduceMin:
    case ScalarOp::WelfordMean:
    case ScalarOp::WelfordM2:
    case ScalarOp::CheckIndex:
    case ScalarOp::Store: break;
  }
  unsupported(n, "is not a binary op");
}

// Scalar reductions accumulate float32 in double: a scalar loop is the one that could not be
// vectorized, often a long strided one, and double keeps its error below torch's.
std::string accumulator_type(DType dt) { return is_f32_like(dt) ? "double" : value_type(dt); }

std::string reduction_identity(const Node& n, DType dt, bool vector) {
  const bool flt = is_f32_like(dt) || dt == DType::Float64;
  std::string t = accumulator_type(dt);
  switch (n.op) {
    case ScalarOp::ReduceSum: return vector ? "0.0f" : (dt == DType::Bool ? "false" : "0");
    case ScalarOp::ReduceProd: return vector ? "1.0f" : (dt == DType::Bool ? "true" : "1");
    case ScalarOp::ReduceMax:
      if (vector) return "-std::numeric_limits<float>::infinity()";
      if (flt) return "-std::numeric_limits<" + t + ">::infinity()";
      return dt == DType::Bool ? "false" : "std::numeric_limits<" + t + ">::lowest()";
    case ScalarOp::ReduceMin:
      if (vector) return "std::numeric_limits<float>::infinity()";
      if (flt) return "std::numeric_limits<" + t + ">::infinity()";
      return dt == DType::Bool ? "true" : "std::numeric_limits<" + t + ">::max()";
    case ScalarOp::WelfordMean:
    case ScalarOp::WelfordM2: return "0";
    case ScalarOp::Load:
    case ScalarOp::Constant:
    case ScalarOp::Index:
    case ScalarOp::Neg:
    case ScalarOp::Abs:
    case ScalarOp::Exp:
    case ScalarOp::Log:
    case ScalarOp::Log1p:
    case ScalarOp::Expm1:
    case ScalarOp::Sqrt:
    case ScalarOp::Rsqrt:
    case ScalarOp::Sin:
    case ScalarOp::Cos:
    case ScalarOp::Tanh:
    case ScalarOp::Sigmoid:
    case ScalarOp::Erf:
    case ScalarOp::Reciprocal:
    case ScalarOp::Relu:
    case ScalarOp::Floor:
    case ScalarOp::Ceil:
    case ScalarOp::Trunc:
    case ScalarOp::Round:
    case ScalarOp::Sign:
    case ScalarOp::IsNan:
    case ScalarOp::LogicalNot:
    case ScalarOp::BitwiseNot:
    case ScalarOp::Cast:
    case ScalarOp::Add:
    case ScalarOp::Sub:
    case ScalarOp::Mul:
    case ScalarOp::Div:
    case ScalarOp::FloorDiv:
    case ScalarOp::Mod:
    case ScalarOp::Pow:
    case ScalarOp::Maximum:
    case ScalarOp::Minimum:
    case ScalarOp::BitwiseAnd:
    case ScalarOp::BitwiseOr:
    case ScalarOp::BitwiseXor:
    case ScalarOp::Eq:
    case ScalarOp::Ne:
    case ScalarOp::Lt:
    case ScalarOp::Le:
    case ScalarOp::Gt:
    case ScalarOp::Ge:
    case ScalarOp::LogicalAnd:
    case ScalarOp::LogicalOr:
    case ScalarOp::Where:
    case ScalarOp::CheckIndex:
    case ScalarOp::Store: break;
  }
  unsupported(n, "is not a reduction");
}

bool is_welford(ScalarOp op) { return op == ScalarOp::WelfordMean || op == ScalarOp::WelfordM2; }

std::string welford_name(const NodeEnv& env, const Node& n) { return "wf_" + name(welford_leader(env, n)); }

// The update of a scalar reduction's accumulator with `x`.
std::string scalar_reduction_update(const NodeEnv& env, const Node& n, const std::string& x) {
  const DType dt = n.dtype;
  const std::string acc = "acc_" + name(n.id);
  switch (n.op) {
    case ScalarOp::ReduceSum:
      if (dt == DType::Bool) return acc + " = " + acc + " || " + x + ";";
      return acc + " += " + x + ";";
    case ScalarOp::ReduceProd:
      if (dt == DType::Bool) return acc + " = " + acc + " && " + x + ";";
      return acc + " *= " + x + ";";
    case ScalarOp::ReduceMax:
    case ScalarOp::ReduceMin: {
      bool is_max = n.op == ScalarOp::ReduceMax;
      // float32 accumulators are double here; the double form propagates NaN the same way.
      DType acc_dt = is_f32_like(dt) ? DType::Float64 : dt;
      return acc + " = " + extremum(is_max, acc_dt, acc, x) + ";";
    }
    case ScalarOp::WelfordMean:
    case ScalarOp::WelfordM2: {
      if (welford_leader(env, n) != n.id) return "";  // the pair's leader updates the shared state
      const std::string w = welford_name(env, n);
      return "{ const double d = " + x + " - " + w + "_mean; " + w + "_n += 1; " + w + "_mean += d / " + w +
             "_n; " + w + "_m2 += d * (" + x + " - " + w + "_mean); }";
    }
    case ScalarOp::Load:
    case ScalarOp::Constant:
    case ScalarOp::Index:
    case ScalarOp::Neg:
    case ScalarOp::Abs:
    case ScalarOp::Exp:
    case ScalarOp::Log:
    case ScalarOp::Log1p:
    case ScalarOp::Expm1:
    case ScalarOp::Sqrt:
    case ScalarOp::Rsqrt:
    case ScalarOp::Sin:
    case ScalarOp::Cos:
    case ScalarOp::Tanh:
    case ScalarOp::Sigmoid:
    case ScalarOp::Erf:
    case ScalarOp::Reciprocal:
    case ScalarOp::Relu:
    case ScalarOp::Floor:
    case ScalarOp::Ceil:
    case ScalarOp::Trunc:
    case ScalarOp::Round:
    case ScalarOp::Sign:
    case ScalarOp::IsNan:
    case ScalarOp::LogicalNot:
    case ScalarOp::BitwiseNot:
    case ScalarOp::Cast:
    case ScalarOp::Add:
    case ScalarOp::Sub:
    case ScalarOp::Mul:
    case ScalarOp::Div:
    case ScalarOp::FloorDiv:
    case ScalarOp::Mod:
    case ScalarOp::Pow:
    case ScalarOp::Maximum:
    case ScalarOp::Minimum:
    case ScalarOp::BitwiseAnd:
    case ScalarOp::BitwiseOr:
    case ScalarOp::BitwiseXor:
    case ScalarOp::Eq:
    case ScalarOp::Ne:
    case ScalarOp::Lt:
    case ScalarOp::Le:
    case ScalarOp::Gt:
    case ScalarOp::Ge:
    case ScalarOp::LogicalAnd:
    case ScalarOp::LogicalOr:
    case ScalarOp::Where:
    case ScalarOp::CheckIndex:
    case ScalarOp::Store: break;
  }
  unsupported(n, "is not a reduction");
}

std::string vector_reduction_update(const NodeEnv& env, const Node& n, const std::string& x, Mode mode) {
  const std::string acc = "acc_" + name(n.id) + env.acc_suffix;
  std::string combined;
  switch (n.op) {
    case ScalarOp::ReduceSum: combined = acc + " + " + x; break;
    case ScalarOp::ReduceProd: combined = acc + " * " + x; break;
    case ScalarOp::ReduceMax: combined = "ev::maximum(" + acc + ", " + x + ")"; break;
    case ScalarOp::ReduceMin: combined = "ev::minimum(" + acc + ", " + x + ")"; break;
    case ScalarOp::WelfordMean:
    case ScalarOp::WelfordM2:
      if (welford_leader(env, n) != n.id) return "";
      return welford_name(env, n) + env.acc_suffix + ".add(" + x + (mode == Mode::VectorTail ? ", n" : "") + ");";
    case ScalarOp::Load:
    case ScalarOp::Constant:
    case ScalarOp::Index:
    case ScalarOp::Neg:
    case ScalarOp::Abs:
    case ScalarOp::Exp:
    case ScalarOp::Log:
    case ScalarOp::Log1p:
    case ScalarOp::Expm1:
    case ScalarOp::Sqrt:
    case ScalarOp::Rsqrt:
    case ScalarOp::Sin:
    case ScalarOp::Cos:
    case ScalarOp::Tanh:
    case ScalarOp::Sigmoid:
    case ScalarOp::Erf:
    case ScalarOp::Reciprocal:
    case ScalarOp::Relu:
    case ScalarOp::Floor:
    case ScalarOp::Ceil:
    case ScalarOp::Trunc:
    case ScalarOp::Round:
    case ScalarOp::Sign:
    case ScalarOp::IsNan:
    case ScalarOp::LogicalNot:
    case ScalarOp::BitwiseNot:
    case ScalarOp::Cast:
    case ScalarOp::Add:
    case ScalarOp::Sub:
    case ScalarOp::Mul:
    case ScalarOp::Div:
    case ScalarOp::FloorDiv:
    case ScalarOp::Mod:
    case ScalarOp::Pow:
    case ScalarOp::Maximum:
    case ScalarOp::Minimum:
    case ScalarOp::BitwiseAnd:
    case ScalarOp::BitwiseOr:
    case ScalarOp::BitwiseXor:
    case ScalarOp::Eq:
    case ScalarOp::Ne:
    case ScalarOp::Lt:
    case ScalarOp::Le:
    case ScalarOp::Gt:
    case ScalarOp::Ge:
    case ScalarOp::LogicalAnd:
    case ScalarOp::LogicalOr:
    case ScalarOp::Where:
    case ScalarOp::CheckIndex:
    case ScalarOp::Store: unsupported(n, "is not a reduction");
  }
  // Lanes past the tail's count hold whatever the body computed from zero-filled loads: keep
  // them out of the accumulator.
  if (mode == Mode::VectorTail) return acc + " = ev::where(tail_mask, " + combined + ", " + acc + ");";
  return acc + " = " + combined + ";";
}

bool is_reduction(ScalarOp op) { return loop_ir::op_info(op).cls == loop_ir::OpClass::Reduce; }

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
    } else {
      out += indent + "double " + w + "_mean = 0, " + w + "_m2 = 0;\n";
      out += indent + "int64_t " + w + "_n = 0;\n";
    }
    return;
  }
  const std::string id = reduction_identity(n, n.dtype, vector);
  if (vector) {
    out += indent + "ev::VecF acc_" + name(n.id) + env.acc_suffix + " = ev::VecF::broadcast(" + id + ");\n";
  } else {
    out += indent + accumulator_type(n.dtype) + " acc_" + name(n.id) + " = " + id + ";\n";
  }
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
  std::string combined;
  switch (n.op) {
    case ScalarOp::ReduceSum: combined = a + " + " + b; break;
    case ScalarOp::ReduceProd: combined = a + " * " + b; break;
    case ScalarOp::ReduceMax: combined = "ev::maximum(" + a + ", " + b + ")"; break;
    case ScalarOp::ReduceMin: combined = "ev::minimum(" + a + ", " + b + ")"; break;
    case ScalarOp::WelfordMean:
    case ScalarOp::WelfordM2:
    case ScalarOp::Load:
    case ScalarOp::Constant:
    case ScalarOp::Index:
    case ScalarOp::Neg:
    case ScalarOp::Abs:
    case ScalarOp::Exp:
    case ScalarOp::Log:
    case ScalarOp::Log1p:
    case ScalarOp::Expm1:
    case ScalarOp::Sqrt:
    case ScalarOp::Rsqrt:
    case ScalarOp::Sin:
    case ScalarOp::Cos:
    case ScalarOp::Tanh:
    case ScalarOp::Sigmoid:
    case ScalarOp::Erf:
    case ScalarOp::Reciprocal:
    case ScalarOp::Relu:
    case ScalarOp::Floor:
    case ScalarOp::Ceil:
    case ScalarOp::Trunc:
    case ScalarOp::Round:
    case ScalarOp::Sign:
    case ScalarOp::IsNan:
    case ScalarOp::LogicalNot:
    case ScalarOp::BitwiseNot:
    case ScalarOp::Cast:
    case ScalarOp::Add:
    case ScalarOp::Sub:
    case ScalarOp::Mul:
    case ScalarOp::Div:
    case ScalarOp::FloorDiv:
    case ScalarOp::Mod:
    case ScalarOp::Pow:
    case ScalarOp::Maximum:
    case ScalarOp::Minimum:
    case ScalarOp::BitwiseAnd:
    case ScalarOp::BitwiseOr:
    case ScalarOp::BitwiseXor:
    case ScalarOp::Eq:
    case ScalarOp::Ne:
    case ScalarOp::Lt:
    case ScalarOp::Le:
    case ScalarOp::Gt:
    case ScalarOp::Ge:
    case ScalarOp::LogicalAnd:
    case ScalarOp::LogicalOr:
    case ScalarOp::Where:
    case ScalarOp::CheckIndex:
    case ScalarOp::Store: unsupported(n, "is not a reduction");
  }
  out += indent + a + " = " + combined + ";\n";
}

void emit_reduction_final(const NodeEnv& env, const Node& n, bool vector, const std::string& indent, std::string& out) {
  const std::string t = value_type(n.dtype);
  const std::string lhs = indent + "const " + t + " " + name(n.id) + " = ";
  if (is_welford(n.op)) {
    const std::string w = welford_name(env, n);
    const char* field = n.op == ScalarOp::WelfordMean ? "mean" : "m2";
    if (vector) {
      if (welford_leader(env, n) == n.id) out += indent + "const ev::WelfordS " + w + "_r = " + w + ".reduce();\n";
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
  switch (n.op) {
    case ScalarOp::ReduceSum: out += lhs + "ev::reduce_add(" + acc + ");\n"; return;
    case ScalarOp::ReduceMax: out += lhs + "ev::reduce_max(" + acc + ");\n"; return;
    case ScalarOp::ReduceMin: out += lhs + "ev::reduce_min(" + acc + ");\n"; return;
    case ScalarOp::ReduceProd:
      out += indent + "float " + acc + "_p = 1.0f;\n";
      out += indent + "for (int l = 0; l < ev::VecF::kSize; ++l) " + acc + "_p *= " + acc + ".lane(l);\n";
      out += lhs + acc + "_p;\n";
      return;
    case ScalarOp::Load:
    case ScalarOp::Constant:
    case ScalarOp::Index:
    case ScalarOp::Neg:
    case ScalarOp::Abs:
    case ScalarOp::Exp:
    case ScalarOp::Log:
    case ScalarOp::Log1p:
    case ScalarOp::Expm1:
    case ScalarOp::Sqrt:
    case ScalarOp::Rsqrt:
    case ScalarOp::Sin:
    case ScalarOp::Cos:
    case ScalarOp::Tanh:
    case ScalarOp::Sigmoid:
    case ScalarOp::Erf:
    case ScalarOp::Reciprocal:
    case ScalarOp::Relu:
    case ScalarOp::Floor:
    case ScalarOp::Ceil:
    case ScalarOp::Trunc:
    case ScalarOp::Round:
    case ScalarOp::Sign:
    case ScalarOp::IsNan:
    case ScalarOp::LogicalNot:
    case ScalarOp::BitwiseNot:
    case ScalarOp::Cast:
    case ScalarOp::Add:
    case ScalarOp::Sub:
    case ScalarOp::Mul:
    case ScalarOp::Div:
    case ScalarOp::FloorDiv:
    case ScalarOp::Mod:
    case ScalarOp::Pow:
    case ScalarOp::Maximum:
    case ScalarOp::Minimum:
    case ScalarOp::BitwiseAnd:
    case ScalarOp::BitwiseOr:
    case ScalarOp::BitwiseXor:
    case ScalarOp::Eq:
    case ScalarOp::Ne:
    case ScalarOp::Lt:
    case ScalarOp::Le:
    case ScalarOp::Gt:
    case ScalarOp::Ge:
    case ScalarOp::LogicalAnd:
    case ScalarOp::LogicalOr:
    case ScalarOp::Where:
    case ScalarOp::WelfordMean:
    case ScalarOp::WelfordM2:
    case ScalarOp::CheckIndex:
    case ScalarOp::Store: break;
  }
  unsupported(n, "is not a reduction");
}

void emit_scalar_node(const NodeEnv& env, const Node& n, const std::string& indent, std::string& out) {
  require_supported(n.dtype, "node %t" + std::to_string(n.id));
  auto operand = [&](size_t k) { return name(n.operands.at(k)); };
  auto operand_dtype = [&](size_t k) { return env.node(n.operands.at(k)).dtype; };
  const std::string def = indent + "const " + value_type(n.dtype) + " " + name(n.id) + " = ";
  const loop_ir::OpClass cls = loop_ir::op_info(n.op).cls;
  if (n.op == ScalarOp::Load) {
    std::string value = scalar_load(env, n);
    if (!n.operands.empty()) value = operand(0) + " ? " + value + " : " + literal(n.constant, n.dtype);
    out += def + value + ";\n";
  } else if (n.op == ScalarOp::Constant) {
    out += def + literal(n.constant, n.dtype) + ";\n";
  } else if (n.op == ScalarOp::Index) {
    out += def + c_index(n.index.at(0), env.symbols) + ";\n";
  } else if (n.op == ScalarOp::Store) {
    const Buffer& b = buffer_of(env, n);
    out += indent + "b" + std::to_string(b.id) + "[" + address(env, n) + "] = " + store_value(b.dtype, operand(0)) + ";\n";
  } else if (n.op == ScalarOp::CheckIndex) {
    const int64_t bound = constant_of(n.bound, "the bound of check_index %t" + std::to_string(n.id));
    const int site = static_cast<int>(env.check_sites->size());
    env.check_sites->push_back(env.kernel->name + " %t" + std::to_string(n.id));
    out += def + operand(0) + ";\n";
    out += indent + "if (" + name(n.id) + " < 0 || " + name(n.id) + " >= " + std::to_string(bound) + ") {\n";
    out += indent + "  ember::rt::report_index_error(ctx, " + std::to_string(site) + ", " + name(n.id) + ", " +
           std::to_string(bound) + ");\n";
    out += indent + "  goto " + env.next_label + ";\n";
    out += indent + "}\n";
  } else if (n.op == ScalarOp::Cast) {
    out += def + cast(operand_dtype(0), n.dtype, operand(0)) + ";\n";
  } else if (n.op == ScalarOp::IsNan) {
    DType dt = operand_dtype(0);
    out += def + (is_f32_like(dt) || dt == DType::Float64 ? operand(0) + " != " + operand(0) : "false") + ";\n";
  } else if (n.op == ScalarOp::LogicalNot) {
    out += def + "!" + operand(0) + ";\n";
  } else if (n.op == ScalarOp::Where) {
    out += def + operand(0) + " ? " + operand(1) + " : " + operand(2) + ";\n";
  } else if (is_reduction(n.op)) {
    std::string update = scalar_reduction_update(env, n, operand(0));
    if (!update.empty()) out += indent + update + "\n";
  } else if (cls == loop_ir::OpClass::Unary) {
    out += def + unary_scalar(n, n.dtype, operand(0)) + ";\n";
  } else if (cls == loop_ir::OpClass::Binary || cls == loop_ir::OpClass::Compare) {
    out += def + binary_scalar(n, cls == loop_ir::OpClass::Compare ? operand_dtype(0) : n.dtype, operand(0), operand(1)) +
           ";\n";
  } else {
    unsupported(n, "has no scalar C++ form");
  }
}

// ---- vector code

namespace {

bool vector_buffer_dtype(DType dt) { return is_f32_like(dt); }

}  // namespace

std::string vector_refusal(const NodeEnv& env, const Node& n, const std::string& var,
                           const std::function<bool(NodeId)>& inside) {
  const std::string self = "%t" + std::to_string(n.id);
  for (NodeId o : n.operands) {
    if (inside(o)) continue;
    if (env.node(o).dtype != DType::Float32)
      return self + " uses %t" + std::to_string(o) + " (" + ir::dtype_name(env.node(o).dtype) +
             ") from outside the loop, which vector code can only broadcast when it is f32";
  }
  auto operand_dtype = [&](size_t k) { return env.node(n.operands.at(k)).dtype; };
  const bool f32 = n.dtype == DType::Float32;
  const bool mask = n.dtype == DType::Bool;
  auto access = [&](bool store) -> std::string {
    const Buffer& b = buffer_of(env, n);
    if (!vector_buffer_dtype(b.dtype))
      return self + (store ? " stores to " : " loads from ") + ir::dtype_name(b.dtype) + " buffer %" + b.name();
    std::optional<int64_t> c = linear_coefficient(element_offset(b, n.index), var);
    if (!c || *c != 1) {
      if (!store && c && *c == 0) return "";  // invariant in var: one scalar load, broadcast
      return self + (store ? " stores to %" : " loads from %") + b.name() + " with stride " +
             (c ? std::to_string(*c) : std::string("that is not constant")) + " along " + var;
    }
    return "";
  };
  switch (n.op) {
    case ScalarOp::Load:
      if (!n.operands.empty()) return self + " is a masked load";
      return access(false);
    case ScalarOp::Store: {
      std::string why = access(true);
      if (why.empty() && operand_dtype(0) != DType::Float32) why = self + " stores a non-f32 value";
      return why;
    }
    case ScalarOp::Constant: return f32 ? "" : self + " is a " + ir::dtype_name(n.dtype) + " constant";
    case ScalarOp::Index:
    case ScalarOp::CheckIndex: return self + " computes an integer index";
    case ScalarOp::Neg:
    case ScalarOp::Abs:
    case ScalarOp::Exp:
    case ScalarOp::Log:
    case ScalarOp::Log1p:
    case ScalarOp::Expm1:
    case ScalarOp::Sqrt:
    case ScalarOp::Rsqrt:
    case ScalarOp::Sin:
    case ScalarOp::Cos:
    case ScalarOp::Tanh:
    case ScalarOp::Sigmoid:
    case ScalarOp::Erf:
    case ScalarOp::Reciprocal:
    case ScalarOp::Relu:
    case ScalarOp::Floor:
    case ScalarOp::Ceil:
    case ScalarOp::Trunc:
    case ScalarOp::Round:
    case ScalarOp::Sign:
    case ScalarOp::Add:
    case ScalarOp::Sub:
    case ScalarOp::Mul:
    case ScalarOp::Div:
    case ScalarOp::Pow:
    case ScalarOp::Maximum:
    case ScalarOp::Minimum:
    case ScalarOp::ReduceSum:
    case ScalarOp::ReduceProd:
    case ScalarOp::ReduceMax:
    case ScalarOp::ReduceMin:
    case ScalarOp::WelfordMean:
    case ScalarOp::WelfordM2: return f32 ? "" : self + " computes in " + ir::dtype_name(n.dtype);
    case ScalarOp::Cast:
      if (f32 && (operand_dtype(0) == DType::Float32 || operand_dtype(0) == DType::Bool)) return "";
      return self + " casts " + ir::dtype_name(operand_dtype(0)) + " to " + ir::dtype_name(n.dtype);
    case ScalarOp::IsNan:
    case ScalarOp::Eq:
    case ScalarOp::Ne:
    case ScalarOp::Lt:
    case ScalarOp::Le:
    case ScalarOp::Gt:
    case ScalarOp::Ge:
      return mask && operand_dtype(0) == DType::Float32 ? "" : self + " compares non-f32 values";
    case ScalarOp::LogicalNot:
    case ScalarOp::LogicalAnd:
    case ScalarOp::LogicalOr:
      for (size_t k = 0; k < n.operands.size(); ++k)
        if (operand_dtype(k) != DType::Bool) return self + " takes a non-bool operand";
      return "";
    case ScalarOp::Where:
      return f32 && operand_dtype(0) == DType::Bool ? "" : self + " selects " + ir::dtype_name(n.dtype) + " values";
    case ScalarOp::FloorDiv:
    case ScalarOp::Mod:
    case ScalarOp::BitwiseNot:
    case ScalarOp::BitwiseAnd:
    case ScalarOp::BitwiseOr:
    case ScalarOp::BitwiseXor: return self + " (" + loop_ir::op_info(n.op).name + ") has no vector form yet";
  }
  return self + " has an unknown op";
}

void emit_vector_node(const NodeEnv& env, const Node& n, const std::string& var, Mode mode,
                      const std::function<bool(NodeId)>& inside, const std::string& indent, std::string& out) {
  auto operand = [&](size_t k) { return vector_operand_name(n.operands.at(k), inside(n.operands.at(k))); };
  const bool tail = mode == Mode::VectorTail;
  const std::string count = tail ? ", n" : "";
  const std::string type = n.dtype == DType::Bool ? "ev::MaskF" : "ev::VecF";
  const std::string def = indent + "const " + type + " " + name(n.id) + " = ";
  auto call = [&](const char* fn) { return def + "ev::" + fn + "(" + operand(0) + ");\n"; };
  auto infix = [&](const char* op) { return def + operand(0) + op + operand(1) + ";\n"; };
  switch (n.op) {
    case ScalarOp::Load: {
      // vector_refusal admitted it: the coefficient along var is 0 (broadcast) or 1 (contiguous).
      const Buffer& b = buffer_of(env, n);
      std::optional<int64_t> c = linear_coefficient(element_offset(b, n.index), var);
      if (c && *c == 0) {
        out += def + "ev::VecF::broadcast(" + scalar_load(env, n) + ");\n";
        return;
      }
      const std::string ptr = "b" + std::to_string(b.id) + " + " + address(env, n);
      if (b.dtype == DType::Float16) {
        out += def + "ev::load_f16(" + ptr + count + ");\n";
      } else if (b.dtype == DType::BFloat16) {
        out += def + "ev::load_bf16(" + ptr + count + ");\n";
      } else {
        out += def + "ev::VecF::load(" + ptr + count + ");\n";
      }
      return;
    }
    case ScalarOp::Store: break;
    case ScalarOp::Constant: out += def + "ev::VecF::broadcast(" + literal(n.constant, n.dtype) + ");\n"; return;
    case ScalarOp::Neg: out += def + "-" + operand(0) + ";\n"; return;
    case ScalarOp::Abs: out += call("abs"); return;
    case ScalarOp::Exp:
      // A masked tail's dead lanes hold 0 - max, which may be positive: the tail keeps exp.
      out += call(!tail && exp_argument_nonpositive(env, n) ? "exp_nonpositive" : "exp");
      return;
    case ScalarOp::Log: out += call("log"); return;
    case ScalarOp::Log1p: out += call("log1p"); return;
    case ScalarOp::Expm1: out += call("expm1"); return;
    case ScalarOp::Sqrt: out += call("sqrt"); return;
    case ScalarOp::Rsqrt: out += call("rsqrt"); return;
    case ScalarOp::Sin: out += call("sin"); return;
    case ScalarOp::Cos: out += call("cos"); return;
    case ScalarOp::Tanh: out += call("tanh"); return;
    case ScalarOp::Sigmoid: out += call("sigmoid"); return;
    case ScalarOp::Erf: out += call("erf"); return;
    case ScalarOp::Reciprocal: out += call("reciprocal"); return;
    case ScalarOp::Relu: out += call("relu"); return;
    case ScalarOp::Floor: out += call("floor"); return;
    case ScalarOp::Ceil: out += call("ceil"); return;
    case ScalarOp::Trunc: out += call("trunc"); return;
    case ScalarOp::Round: out += call("round"); return;
    case ScalarOp::Sign: out += call("sign"); return;
    case ScalarOp::IsNan: out += call("isnan"); return;
    case ScalarOp::LogicalNot: out += def + "!" + operand(0) + ";\n"; return;
    case ScalarOp::Cast:
      if (env.node(n.operands[0]).dtype == DType::Bool) {
        out += def + "ev::where(" + operand(0) + ", ev::VecF::broadcast(1.0f), ev::VecF::broadcast(0.0f));\n";
      } else {
        out += def + operand(0) + ";\n";
      }
      return;
    case ScalarOp::Add: out += infix(" + "); return;
    case ScalarOp::Sub: out += infix(" - "); return;
    case ScalarOp::Mul: out += infix(" * "); return;
    case ScalarOp::Div:
      // A divisor from outside the region is fixed over the loop: ranged_loop declared its
      // ev::DivisorF next to its broadcast (same bits as " / ", fewer divides).
      if (!inside(n.operands.at(1))) {
        out += def + "ev::divide(" + operand(0) + ", " + divisor_name(n.operands.at(1)) + ");\n";
      } else {
        out += infix(" / ");
      }
      return;
    case ScalarOp::Pow: out += def + "ev::pow(" + operand(0) + ", " + operand(1) + ");\n"; return;
    case ScalarOp::Maximum: out += def + "ev::maximum(" + operand(0) + ", " + operand(1) + ");\n"; return;
    case ScalarOp::Minimum: out += def + "ev::minimum(" + operand(0) + ", " + operand(1) + ");\n"; return;
    case ScalarOp::Eq: out += infix(" == "); return;
    case ScalarOp::Ne: out += infix(" != "); return;
    case ScalarOp::Lt: out += infix(" < "); return;
    case ScalarOp::Le: out += infix(" <= "); return;
    case ScalarOp::Gt: out += infix(" > "); return;
    case ScalarOp::Ge: out += infix(" >= "); return;
    case ScalarOp::LogicalAnd: out += infix(" & "); return;
    case ScalarOp::LogicalOr: out += infix(" | "); return;
    case ScalarOp::Where:
      out += def + "ev::where(" + operand(0) + ", " + operand(1) + ", " + operand(2) + ");\n";
      return;
    case ScalarOp::ReduceSum:
    case ScalarOp::ReduceProd:
    case ScalarOp::ReduceMax:
    case ScalarOp::ReduceMin:
    case ScalarOp::WelfordMean:
    case ScalarOp::WelfordM2: {
      std::string update = vector_reduction_update(env, n, operand(0), mode);
      if (!update.empty()) out += indent + update + "\n";
      return;
    }
    case ScalarOp::Index:
    case ScalarOp::CheckIndex:
    case ScalarOp::FloorDiv:
    case ScalarOp::Mod:
    case ScalarOp::BitwiseNot:
    case ScalarOp::BitwiseAnd:
    case ScalarOp::BitwiseOr:
    case ScalarOp::BitwiseXor: unsupported(n, "has no vector form (vector_refusal should have kept it scalar)");
  }
  // Store.
  const Buffer& b = buffer_of(env, n);
  const std::string ptr = "b" + std::to_string(b.id) + " + " + address(env, n);
  if (b.dtype == DType::Float16) {
    out += indent + "ev::store_f16(" + ptr + ", " + operand(0) + count + ");\n";
  } else if (b.dtype == DType::BFloat16) {
    out += indent + "ev::store_bf16(" + ptr + ", " + operand(0) + count + ");\n";
  } else {
    out += indent + operand(0) + ".store(" + ptr + count + ");\n";
  }
}

}  // namespace ember::codegen::detail
