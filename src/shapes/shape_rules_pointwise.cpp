// Shape rules of the pointwise ops: unary math, binary arithmetic and comparisons, where,
// masked_fill and clamp. The result dtype follows torch.result_type plus each op's own rule
// (true division and transcendental functions of integers give the default dtype, comparisons
// give bool, abs of complex is real); the shape is the broadcast of the tensor operands.
//
// Dtypes an op's CPU kernel refuses are nullopt even where the meta kernel accepts them
// (bitwise ops on floats, sub with bool): a rule never vouches for a call that fails when run.
//
// Output strides (masked_fill aside: its result is contiguous) are what TensorIterator
// allocates, in the cases where that is simple: every tensor operand has torch's default strides
// for its own shape (the output has default strides for the broadcast shape); or every tensor
// operand has the output's shape and the same nonzero strides, either decreasing from outer to
// inner dims (a slice: the output has default strides), channels-last (the output is too), or distinct over
// dims of size > 1 (a permutation: the output is dense in that dimension order); or, for results without size-1
// dims (or with them, where TensorIterator takes its general path) over operands of the result's dtype, the
// dimension order TensorIterator computes (ordered_strides). Anything else is nullopt.
#include <algorithm>
#include <numeric>

#include "shapes/shape_rules_internal.h"

namespace ember::shapes::rules {

namespace {

// A tensor or a scalar operand of a pointwise op.
struct PointwiseOperand {
  std::optional<Dense> tensor;
  std::optional<ScalarKind> scalar;
  const Operand* raw = nullptr;
};

std::optional<PointwiseOperand> operand(const Operand* p) {
  PointwiseOperand o;
  o.raw = p;
  if (!p) return std::nullopt;
  if (p->tensor) {
    o.tensor = as_dense(p);
    if (!o.tensor || is_float8(o.tensor->dtype)) return std::nullopt;
    return o;
  }
  o.scalar = scalar_kind(p);
  if (!o.scalar) return std::nullopt;
  return o;
}

}  // namespace

namespace {

// The general case, for outputs whose dims all have size > 1 and operands that are not 0-d:
// TensorIterator and torch's Python elementwise meta kernels order the output's dims alike.
// Both broadcast the operands (stride 0 on broadcast dims), sort the dims from the innermost
// by comparing, operand after operand, the strides of two dims (skipping an operand where
// either is 0; equal strides put the smaller dim inside), and lay the output out densely in
// that order. Size-1 output dims (whose strides the two kernels choose differently, unless on
// `general_path`: below) and 0-d operands (which floor_divide's meta kernel treats apart) are left out, and so are operands of
// another dtype than the result's: the Python kernels first convert them, and the converted
// copy has a layout of its own. Except `unconverted`: where's condition, which torch never converts
// (checked against CPU and meta results over permuted and expanded conditions and operands, 0-d
// and scalar operands included: the masks transformers builds, expanded bools).
//
// Size-1 output dims too on TensorIterator's `general_path` (general_layout_path: no fast setup then
// copies an operand's strides): an operand's size-1 dim keeps its stride in the sort where the output's
// dim is 1 too (0 where broadcast), and the output's size-1 dim gets the product of the sizes inside it
// in the order found. The meta kernels agree (checked against CPU and meta results of add, sub, mul, div,
// pow, maximum, eq, lt, atan2, fmod, remainder, hypot, logical_and, where and the unary ops but gelu,
// over permuted operands with a size-1 dim broadcast, a 0-d operand, or slices, and over odd strides of
// size-1 dims, `[1, 2]{1, 2}`; not in float16 and bfloat16, whose meta kernels are Python's). Served: T5's
// `where(causal[1, 1, T, T], bias[1, H, T, T], min)`, BLOOM's `where(mask[B, 1, T, T], zeros(()), min)`,
// Falcon's rotate_half of a one-head key `-k[..., 2:]`.
std::optional<Sizes> ordered_strides(const Sizes& out, const std::vector<const Dense*>& tensors,
                                     std::optional<ir::DType> result_dtype, const Dense* unconverted,
                                     bool general_path) {
  size_t n = out.size();
  if (!result_dtype || n == 0 || std::any_of(out.begin(), out.end(), [&](int64_t s) { return s < (general_path ? 1 : 2); }))
    return std::nullopt;
  std::vector<Sizes> strides;
  for (const Dense* t : tensors) {
    if (t->dim() == 0 || (t->dtype != *result_dtype && t != unconverted)) return std::nullopt;
    Sizes s(n, 0);
    size_t offset = n - t->sizes.size();
    for (size_t i = 0; i < t->sizes.size(); ++i) s[offset + i] = t->sizes[i] == 1 && out[offset + i] != 1 ? 0 : t->strides[i];
    strides.push_back(std::move(s));
  }
  // -1: dim a goes inside dim b; 1: outside; 0: no operand decides.
  auto compare = [&](size_t a, size_t b) {
    for (const Sizes& s : strides) {
      if (s[a] == 0 || s[b] == 0) continue;
      if (s[a] < s[b]) return -1;
      if (s[a] > s[b]) return 1;
      if (out[a] > out[b]) return 1;
    }
    return 0;
  };
  // order[0] is the innermost dim. An insertion sort from the logical order (last dim
  // innermost) that stops at the first decided comparison, as both kernels do: with undecided
  // pairs the result is not a plain sort.
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = n - 1 - i;
  for (size_t i = 1; i < n; ++i) {
    size_t moving = i;
    for (size_t j = i; j-- > 0;) {
      int c = compare(order[j], order[moving]);
      if (c > 0) {
        std::swap(order[j], order[moving]);
        moving = j;
      } else if (c < 0) {
        break;
      }
    }
  }
  Sizes result(n);
  int64_t inside = 1;
  for (size_t d : order) {
    result[d] = inside;
    inside *= out[d];
  }
  return result;
}

std::optional<Sizes> shared_layout_strides(const Sizes& out, const std::vector<const Dense*>& tensors);

}  // namespace

std::optional<Sizes> pointwise_strides(const Sizes& out, const std::vector<const Dense*>& tensors,
                                       std::optional<ir::DType> result_dtype, const Dense* unconverted,
                                       bool general_path) {
  bool all_default = true;
  for (const Dense* t : tensors) all_default = all_default && has_default_strides(*t);
  if (all_default) return contiguous_strides(out);
  if (auto shared = shared_layout_strides(out, tensors)) return shared;
  return ordered_strides(out, tensors, result_dtype, unconverted, general_path);
}

bool general_layout_path(ir::Op op, const Sizes& out, const std::vector<const Dense*>& tensors) {
  if (op == ir::Op::Gelu || op == ir::Op::Clamp) return false;
  bool general = false;
  for (const Dense* t : tensors) {
    if (t->dtype == ir::DType::Float16 || t->dtype == ir::DType::BFloat16) return false;  // Python meta kernels
    if (t->dim() == 0) {
      general = general || !out.empty();
      continue;
    }
    if (t->sizes.size() != out.size()) return false;
    general = general || !non_overlapping_and_dense(*t);
    for (size_t d = 0; d < out.size(); ++d) general = general || (t->sizes[d] == 1 && out[d] != 1);
  }
  return general;
}

namespace {

std::optional<Sizes> shared_layout_strides(const Sizes& out, const std::vector<const Dense*>& tensors) {
  // One layout shared by every operand (0-d tensors are left out of this case: floor_divide's
  // meta kernel then gives default strides).
  const Sizes* shared = nullptr;
  for (const Dense* t : tensors) {
    if (t->dim() == 0 || t->sizes != out) return std::nullopt;
    if (shared && *shared != t->strides) return std::nullopt;
    shared = &t->strides;
  }
  if (!shared) return std::nullopt;
  const Sizes& s = *shared;
  if (std::find(s.begin(), s.end(), 0) != s.end() || std::find(out.begin(), out.end(), 0) != out.end())
    return std::nullopt;
  // Channels-last, whatever the strides of size-1 dims (a batch of one): TensorIterator's fast setup and the
  // Python meta kernels' short cut both lay the result out channels-last from its sizes. Not a layout that
  // is row-major too (TensorIterator then takes its contiguous setup first).
  if (ir::strictly_channels_last(out, s)) return ir::channels_last_strides(out);
  // Strides decreasing from outer to inner dims (equal only between size-1 dims): TensorIterator
  // keeps the dims in order, so the result gets default strides (a slice such as x[:, :4]).
  bool in_order = true;
  for (size_t d = 1; d < s.size(); ++d)
    in_order = in_order && (s[d - 1] > s[d] || (s[d - 1] == s[d] && out[d - 1] == 1 && out[d] == 1));
  if (in_order) return contiguous_strides(out);
  // Distinct strides over dims of size > 1 (a permuted tensor): the result is dense in the
  // same dimension order.
  std::vector<size_t> order(out.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return s[a] < s[b]; });
  Sizes strides(out.size());
  int64_t inside = 1;
  for (size_t i = 0; i < order.size(); ++i) {
    size_t d = order[i];
    if (out[d] <= 1 || (i > 0 && s[order[i - 1]] == s[d])) return std::nullopt;
    strides[d] = inside;
    inside *= out[d];
  }
  return strides;
}

}  // namespace

namespace {

std::optional<ir::DType> promoted(const Call& call, std::initializer_list<const PointwiseOperand*> operands) {
  Promotion promotion(call.default_dtype);
  for (const PointwiseOperand* o : operands) {
    if (o->tensor) {
      promotion.add(*o->tensor);
    } else {
      promotion.add(*o->scalar);
    }
  }
  return promotion.result();
}

// The result of a pointwise op of dtype `dt` over `operands` (tensors broadcast; scalars don't),
// laid out as TensorIterator does, or contiguous where the op copies into a contiguous result.
enum class Layout : uint8_t { Iterator, Contiguous };
Result pointwise_result(const Call& call, ir::DType dt, const std::vector<const PointwiseOperand*>& operands,
                        Layout layout = Layout::Iterator, const Dense* unconverted = nullptr) {
  Sizes out;
  std::vector<const Dense*> tensors;
  bool requires_grad = false;
  for (const PointwiseOperand* o : operands) {
    if (!o->tensor) continue;
    auto b = broadcast(out, o->tensor->sizes);
    if (!b) return std::nullopt;
    out = std::move(*b);
    tensors.push_back(&*o->tensor);
    requires_grad = requires_grad || o->tensor->requires_grad;
  }
  if (tensors.empty()) return std::nullopt;
  // floor_divide and remainder are compositions in torch's Python meta kernels, whose
  // intermediate results reorder the dims: only the simple layouts for them.
  bool composite = call.op == ir::Op::FloorDivide || call.op == ir::Op::Remainder;
  // A 0-d operand of the result's dtype steps through nothing (TensorIterator broadcasts it with
  // stride 0 in every dim, which the ordering skips), so the others lay the result out: `q / scale`
  // of a permuted q keeps q's order. Not one of another dtype (torch's Python meta kernels convert
  // it first: logical_and(0-d float, permuted) is contiguous) nor under the compositions.
  std::vector<const Dense*> laid;
  for (const Dense* t : tensors)
    if (composite || t->dim() != 0 || t->dtype != dt) laid.push_back(t);
  if (laid.empty()) laid = tensors;
  auto strides = pointwise_strides(out, laid, composite ? std::nullopt : std::optional<ir::DType>(dt), unconverted,
                                   !composite && general_layout_path(call.op, out, tensors));
  if (layout == Layout::Contiguous) {
    // Default strides; the meta kernel's strides of size-1 dims can differ when the inputs'
    // are not default themselves, so those cases are left to it.
    bool size_one = std::find(out.begin(), out.end(), 1) != out.end();
    if (!strides || *strides != contiguous_strides(out)) strides.reset();
    if (!strides && !size_one) strides = contiguous_strides(out);
  }
  if (!strides) return std::nullopt;
  auto device = result_device(call, true);
  if (!device) return std::nullopt;
  bool rg = requires_grad && call.grad_enabled && is_differentiable(dt);
  return std::vector<ir::TensorType>{make_type(dt, std::move(out), std::move(*strides), rg, *device)};
}

// How a unary op's result dtype follows from its input's; nullopt marks dtypes it refuses.
enum class UnaryDType : uint8_t {
  NotBool,         // neg: same dtype, bool refused
  Magnitude,       // abs: same dtype, complex to real, bool refused
  Transcendental,  // exp, log, ...: integers and bool give the default dtype
  NotComplex,      // erf: as Transcendental, complex refused
  Real,            // relu: integers and floats
  Floating,        // gelu, silu (complex silu has no derivative)
  Logical,         // logical_not: bool from anything
  Bitwise,         // bitwise_not: bool and integers
};

constexpr std::pair<ir::Op, UnaryDType> kUnary[] = {
    {ir::Op::Neg, UnaryDType::NotBool},          {ir::Op::Abs, UnaryDType::Magnitude},
    {ir::Op::Exp, UnaryDType::Transcendental},   {ir::Op::Log, UnaryDType::Transcendental},
    {ir::Op::Sqrt, UnaryDType::Transcendental},  {ir::Op::Rsqrt, UnaryDType::Transcendental},
    {ir::Op::Sin, UnaryDType::Transcendental},   {ir::Op::Cos, UnaryDType::Transcendental},
    {ir::Op::Tanh, UnaryDType::Transcendental},  {ir::Op::Sigmoid, UnaryDType::Transcendental},
    {ir::Op::Erf, UnaryDType::NotComplex},       {ir::Op::Reciprocal, UnaryDType::Transcendental},
    {ir::Op::Relu, UnaryDType::Real},            {ir::Op::Gelu, UnaryDType::Floating},
    {ir::Op::Silu, UnaryDType::Floating},  {ir::Op::LogicalNot, UnaryDType::Logical},
    {ir::Op::BitwiseNot, UnaryDType::Bitwise},
};

std::optional<ir::DType> unary_dtype(UnaryDType rule, ir::DType in, ir::DType default_dtype) {
  Category c = category(in);
  bool integer = c == Category::Bool || c == Category::Integral;
  switch (rule) {
    case UnaryDType::NotBool:
      if (c != Category::Bool) return in;
      return std::nullopt;
    case UnaryDType::Magnitude:
      if (c == Category::Complex) return real_of(in);
      if (c != Category::Bool) return in;
      return std::nullopt;
    case UnaryDType::Transcendental:
      return integer ? default_dtype : in;
    case UnaryDType::NotComplex:
      if (c == Category::Complex) return std::nullopt;
      return integer ? default_dtype : in;
    case UnaryDType::Real:
      if (c == Category::Integral || c == Category::Floating) return in;
      return std::nullopt;
    case UnaryDType::Floating:
      if (c == Category::Floating) return in;
      return std::nullopt;
    case UnaryDType::Logical:
      return ir::DType::Bool;
    case UnaryDType::Bitwise:
      if (integer) return in;
      return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace

Result infer_unary(const Call& call) {
  const UnaryDType* rule = nullptr;
  for (auto& [op, r] : kUnary)
    if (op == call.op) rule = &r;
  if (!rule) return std::nullopt;
  std::optional<Bound> b;
  if (call.op == ir::Op::Gelu) {
    b = bind(call, {"input", "*approximate"});
    // approximate must be the string "none" or "tanh"; None is a TypeError.
    if (b && (*b)[1] && !is_string((*b)[1], "none") && !is_string((*b)[1], "tanh")) return std::nullopt;
  } else if (call.op == ir::Op::Silu) {
    b = bind(call, {"input", "inplace"});
    if (b && (*b)[1] && as_bool((*b)[1]) != false) return std::nullopt;  // in place returns its input
  } else {
    b = bind(call, {"input"});
  }
  if (!b) return std::nullopt;
  auto x = operand((*b)[0]);
  if (!x || !x->tensor) return std::nullopt;
  auto out = unary_dtype(*rule, x->tensor->dtype, call.default_dtype);
  if (!out) return std::nullopt;
  return pointwise_result(call, *out, {&*x});
}

// prims.convert_element_type(a, dtype): a pointwise copy into `dtype`, laid out as TensorIterator
// lays out a one-input op (a dense input keeps its strides, as Tensor.to does).
Result infer_convert(const Call& call) {
  auto b = bind(call, {"a", "dtype"});
  if (!b) return std::nullopt;
  auto x = operand((*b)[0]);
  auto dt = as_dtype((*b)[1]);
  if (!x || !x->tensor || !dt) return std::nullopt;
  // Its meta kernel keeps the input's strides of size-1 dims, which the iterator's layout does
  // not model: inputs with non-default ones are left to it.
  const Dense& t = *x->tensor;
  Sizes contiguous = contiguous_strides(t.sizes);
  for (size_t d = 0; d < t.sizes.size(); ++d)
    if (t.sizes[d] == 1 && t.strides[d] != contiguous[d]) return std::nullopt;
  return pointwise_result(call, *dt, {&*x});
}

namespace {

// add/sub's alpha, checked as torch checks it against the result dtype.
bool alpha_ok(const Operand* alpha, ir::DType dt) {
  if (!alpha) return true;
  auto kind = scalar_kind(alpha);
  if (!kind) return false;
  switch (*kind) {
    case ScalarKind::Bool:
      return dt == ir::DType::Bool;
    case ScalarKind::Int:
      return scalar_fits(alpha, dt);
    case ScalarKind::Float:
    case ScalarKind::Complex:
      return scalar_fits(alpha, dt);
  }
  return false;
}

// How a binary op's result dtype follows from the promoted dtype of its operands.
enum class BinaryDType : uint8_t {
  Any,           // add, mul: any promoted dtype
  NoBool,        // sub: no bool operand at all
  Division,      // div: true division of integers gives the default dtype; rounding modes keep it
  RealNotBool,   // floor_divide, remainder
  Power,         // pow
  Ordered,       // maximum, minimum: tensors only, no complex
  Equality,      // eq, ne: bool
  Comparison,    // lt, le, gt, ge: bool, no complex
  Bitwise,       // bitwise and/or/xor: bool and integers
};

constexpr std::pair<ir::Op, BinaryDType> kBinary[] = {
    {ir::Op::Add, BinaryDType::Any},          {ir::Op::Sub, BinaryDType::NoBool},
    {ir::Op::Mul, BinaryDType::Any},          {ir::Op::Div, BinaryDType::Division},
    {ir::Op::FloorDivide, BinaryDType::RealNotBool}, {ir::Op::Remainder, BinaryDType::RealNotBool},
    {ir::Op::Pow, BinaryDType::Power},        {ir::Op::Maximum, BinaryDType::Ordered},
    {ir::Op::Minimum, BinaryDType::Ordered},  {ir::Op::Eq, BinaryDType::Equality},
    {ir::Op::Ne, BinaryDType::Equality},      {ir::Op::Lt, BinaryDType::Comparison},
    {ir::Op::Le, BinaryDType::Comparison},    {ir::Op::Gt, BinaryDType::Comparison},
    {ir::Op::Ge, BinaryDType::Comparison},    {ir::Op::BitwiseAnd, BinaryDType::Bitwise},
    {ir::Op::BitwiseOr, BinaryDType::Bitwise}, {ir::Op::BitwiseXor, BinaryDType::Bitwise},
};

bool is_bool_operand(const PointwiseOperand& o) {
  return o.scalar == ScalarKind::Bool || (o.tensor && o.tensor->dtype == ir::DType::Bool);
}

}  // namespace

Result infer_binary(const Call& call) {
  const BinaryDType* rule = nullptr;
  for (auto& [op, r] : kBinary)
    if (op == call.op) rule = &r;
  if (!rule) return std::nullopt;
  bool has_alpha = call.op == ir::Op::Add || call.op == ir::Op::Sub;
  // alpha is keyword-only (torch.add(x, 2, y) is a deprecated overload meaning x + 2 * y), and
  // so is rounding_mode.
  std::optional<Bound> b = has_alpha                    ? bind(call, {"input", "other", "*alpha"})
                           : call.op == ir::Op::Div     ? bind(call, {"input", "other", "*rounding_mode"})
                           : call.op == ir::Op::Pow     ? bind(call, {"input", "exponent"})
                                                        : bind(call, {"input", "other"});
  if (!b) return std::nullopt;
  auto x = operand((*b)[0]);
  auto y = operand((*b)[1]);
  if (!x || !y || !x->tensor) return std::nullopt;
  auto common = promoted(call, {&*x, &*y});
  if (!common) return std::nullopt;
  // A scalar outside the computation dtype's range wraps or is refused, depending on the op.
  if (!scalar_fits(y->raw, *common)) return std::nullopt;
  Category c = category(*common);
  std::optional<ir::DType> out;
  switch (*rule) {
    case BinaryDType::Any:
      out = common;
      break;
    case BinaryDType::NoBool:
      if (!is_bool_operand(*x) && !is_bool_operand(*y)) out = common;
      break;
    case BinaryDType::Division: {
      const Operand* mode = (*b)[2];
      if (is_none(mode)) {
        out = c == Category::Bool || c == Category::Integral ? call.default_dtype : *common;
      } else if ((is_string(mode, "trunc") || is_string(mode, "floor")) && c != Category::Bool &&
                 c != Category::Complex) {
        out = common;
      }
      break;
    }
    case BinaryDType::RealNotBool:
      if (c != Category::Bool && c != Category::Complex) out = common;
      break;
    case BinaryDType::Power: {
      if (is_bool_operand(*x) && is_bool_operand(*y)) break;
      // Integers to negative integer powers are refused for a scalar exponent.
      auto e = as_int(y->raw);
      if (e && *e < 0 && !is_differentiable(x->tensor->dtype)) break;
      out = common;
      break;
    }
    case BinaryDType::Ordered:
      if (y->tensor && c != Category::Complex) out = common;
      break;
    case BinaryDType::Equality:
      out = ir::DType::Bool;
      break;
    case BinaryDType::Comparison:
      if (c != Category::Complex) out = ir::DType::Bool;
      break;
    case BinaryDType::Bitwise:
      if (c == Category::Bool || c == Category::Integral) out = common;
      break;
  }
  if (!out) return std::nullopt;
  if (has_alpha && !alpha_ok((*b)[2], *common)) return std::nullopt;
  return pointwise_result(call, *out, {&*x, &*y});
}

Result infer_where(const Call& call) {
  auto b = bind(call, {"condition", "input|self", "other"});
  if (!b) return std::nullopt;
  auto cond = operand((*b)[0]);
  auto x = operand((*b)[1]);
  auto y = operand((*b)[2]);
  if (!cond || !x || !y || !cond->tensor || cond->tensor->dtype != ir::DType::Bool) return std::nullopt;
  auto common = promoted(call, {&*x, &*y});
  if (!common || !scalar_fits(x->raw, *common) || !scalar_fits(y->raw, *common)) return std::nullopt;
  return pointwise_result(call, *common, {&*cond, &*x, &*y}, Layout::Iterator, &*cond->tensor);
}

Result infer_masked_fill(const Call& call) {
  auto b = bind(call, {"input", "mask", "value"});
  if (!b) return std::nullopt;
  auto x = operand((*b)[0]);
  auto mask = operand((*b)[1]);
  auto value = operand((*b)[2]);
  if (!x || !mask || !value || !x->tensor || !mask->tensor || mask->tensor->dtype != ir::DType::Bool)
    return std::nullopt;
  ir::DType dt = x->tensor->dtype;
  if (value->tensor) {
    if (value->tensor->dim() != 0) return std::nullopt;
    // A value that requires grad needs a differentiable result; a complex value, a complex one.
    if (value->tensor->requires_grad && !is_differentiable(dt)) return std::nullopt;
    if (is_complex(value->tensor->dtype) && !is_complex(dt)) return std::nullopt;
  } else if (!scalar_fits(value->raw, dt)) {
    return std::nullopt;  // the value is cast to the tensor's dtype: only casts that cannot fail
  }
  // masked_fill fills a contiguous copy of the input broadcast against the mask.
  return pointwise_result(call, dt, {&*x, &*mask, &*value}, Layout::Contiguous);
}

Result infer_clamp(const Call& call) {
  auto b = bind(call, {"input", "min", "max"});
  if (!b) return std::nullopt;
  auto x = operand((*b)[0]);
  if (!x || !x->tensor) return std::nullopt;
  std::optional<PointwiseOperand> lo, hi;
  if (!is_none((*b)[1]) && !(lo = operand((*b)[1]))) return std::nullopt;
  if (!is_none((*b)[2]) && !(hi = operand((*b)[2]))) return std::nullopt;
  if (!lo && !hi) return std::nullopt;
  // Mixing a tensor bound with a scalar bound picks an overload that treats the scalar as a tensor.
  if (lo && hi && lo->tensor.has_value() != hi->tensor.has_value()) return std::nullopt;
  std::vector<const PointwiseOperand*> operands{&*x};
  if (lo) operands.push_back(&*lo);
  if (hi) operands.push_back(&*hi);
  auto common = lo && hi ? promoted(call, {&*x, &*lo, &*hi}) : promoted(call, {&*x, lo ? &*lo : &*hi});
  if (!common) return std::nullopt;
  Category c = category(*common);
  if (c == Category::Bool || c == Category::Complex) return std::nullopt;
  for (const PointwiseOperand* o : operands)
    if (!scalar_fits(o->raw, *common)) return std::nullopt;
  return pointwise_result(call, *common, operands);
}

}  // namespace ember::shapes::rules
