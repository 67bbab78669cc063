// Shape rules of torch calls that are not core ops: the table from a callable's qualified name
// (as python/ember/ops.py's qualname() spells it) to its rule, the forms that only rename a core
// op's rule (F.relu, F.softmax, torch.std, ...), and the dtype conversions (Tensor.float, .to,
// .type_as).
//
// Why: such calls are captured as `torch` nodes whose types came from torch's meta kernels, and
// several of those are Python that imports torch._dynamo (1.5-2 s in a fresh process) and runs
// for milliseconds. The table is the one place that says which torch calls have a rule; ops.def
// stays the list of core ops.
//
// Conversions: a conversion to the input's own dtype returns the input itself (its type
// unchanged, requires_grad included, in either grad mode); otherwise torch copies into a tensor
// with the input's exact strides when the input is non-overlapping and dense, and into a layout
// chosen from the input's memory format otherwise (declined here).
#include <algorithm>
#include <iterator>
#include <numeric>
#include <string_view>

#include "shapes/shape_rules_internal.h"

namespace ember::shapes {

namespace rules {

bool non_overlapping_and_dense(const Dense& t) {
  if (t.dim() == 1) return t.sizes[0] < 2 || t.strides[0] == 1;
  // Dims of size 0 or 1 do not constrain the layout; the others must tile memory from the
  // innermost (smallest stride) out.
  std::vector<size_t> order(t.sizes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (t.sizes[a] < 2) return false;
    if (t.sizes[b] < 2) return true;
    return t.strides[a] < t.strides[b];
  });
  int64_t expected = 1;
  for (size_t d : order) {
    if (t.sizes[d] < 2) return true;
    if (t.strides[d] != expected) return false;
    expected *= t.sizes[d];
  }
  return true;
}

namespace {

// The same operands, seen as a call of core op `op` (whose rule binds torch's parameter names).
Result as_core(const Call& call, ir::Op op) {
  return infer_result_types(op, call.args, call.kwargs, call.grad_enabled, call.default_dtype);
}

// F.relu(input, inplace=False): torch.relu unless in place (which returns its input mutated).
Result functional_relu(const Call& call) {
  auto b = bind(call, {"input", "inplace"});
  if (!b || !(*b)[0] || ((*b)[1] && as_bool((*b)[1]) != false)) return std::nullopt;
  std::vector<Operand> args{*(*b)[0]};
  return infer_result_types(ir::Op::Relu, args, {}, call.grad_enabled, call.default_dtype);
}

// F.mish / F.hardswish (input, inplace=False): floating inputs only, like silu, whose rule
// binds the same two parameters.
Result silu_like(const Call& call) { return as_core(call, ir::Op::Silu); }
Result functional_sigmoid(const Call& call) { return as_core(call, ir::Op::Sigmoid); }
Result functional_tanh(const Call& call) { return as_core(call, ir::Op::Tanh); }

// torch.square(input) is pow(input, 2): bool squares to int64 (an int scalar exponent promotes it).
Result square(const Call& call) {
  auto b = bind(call, {"input"});
  if (!b || !(*b)[0]) return std::nullopt;
  std::vector<Operand> args{*(*b)[0], Operand::of_literal(int64_t{2})};
  return infer_result_types(ir::Op::Pow, args, {}, call.grad_enabled, call.default_dtype);
}

// torch.max / torch.min (input, other): the elementwise forms (maximum / minimum). Their reduction
// forms (no other, or a dim) return values and indices: left to the meta kernel.
template <ir::Op kOp>
Result elementwise_extreme(const Call& call) {
  auto b = bind(call, {"input", "other"});
  if (!b || !(*b)[0] || !(*b)[1] || !(*b)[0]->tensor || !(*b)[1]->tensor) return std::nullopt;
  std::vector<Operand> args{*(*b)[0], *(*b)[1]};
  return infer_result_types(kOp, args, {}, call.grad_enabled, call.default_dtype);
}

// F.softmax / F.log_softmax(input, dim=None, _stacklevel=3, dtype=None). Without a dim torch
// picks one by a legacy rule (with a warning): declined.
Result functional_softmax_of(const Call& call, ir::Op op) {
  auto b = bind(call, {"input", "dim", "_stacklevel", "dtype"});
  if (!b || !(*b)[0] || !as_int((*b)[1])) return std::nullopt;
  if ((*b)[2] && !as_int((*b)[2])) return std::nullopt;
  std::vector<Operand> args{*(*b)[0], *(*b)[1]};
  if (!is_none((*b)[3])) args.push_back(*(*b)[3]);
  return infer_result_types(op, args, {}, call.grad_enabled, call.default_dtype);
}
Result functional_softmax(const Call& call) { return functional_softmax_of(call, ir::Op::Softmax); }
Result functional_log_softmax(const Call& call) { return functional_softmax_of(call, ir::Op::LogSoftmax); }

// std and std_mean take var's and var_mean's arguments and give their types.
Result std_rule(const Call& call) { return as_core(call, ir::Op::Var); }
Result std_mean_rule(const Call& call) { return as_core(call, ir::Op::VarMean); }

// ---- Conversions --------------------------------------------------------------------------------

Result converted(const Call& call, const Operand& self, ir::DType dt) {
  auto x = as_dense(&self);
  if (!x || is_float8(dt) || is_float8(x->dtype)) return std::nullopt;
  if (dt == x->dtype) return std::vector<ir::TensorType>{*self.tensor};  // the input itself
  if (!non_overlapping_and_dense(*x)) return std::nullopt;
  return std::vector<ir::TensorType>{
      make_type(dt, x->sizes, x->strides, computed_requires_grad(call, dt, {&*x}), *x->device)};
}

// Tensor.float() and friends take only memory_format, which the rule does not model.
template <ir::DType kDType>
Result convert_to(const Call& call) {
  if (call.args.size() != 1 || !call.kwargs.empty()) return std::nullopt;
  return converted(call, call.args[0], kDType);
}

// Tensor.to(dtype, non_blocking=False, copy=False) and Tensor.to(other, non_blocking=False,
// copy=False) on the same device. The forms with a device, copy=True and memory_format are
// declined (a device argument may name the same device; the rule does not resolve it).
Result tensor_to(const Call& call) {
  if (call.args.empty() || !call.args[0].tensor) return std::nullopt;
  const Operand* target = call.args.size() > 1 ? &call.args[1] : nullptr;
  const Operand* flags[2] = {call.args.size() > 2 ? &call.args[2] : nullptr,
                                 call.args.size() > 3 ? &call.args[3] : nullptr};
  if (call.args.size() > 4) return std::nullopt;
  for (auto& [name, operand] : call.kwargs) {
    if (name == "dtype" && !target) {
      target = &operand;
    } else if (name == "non_blocking" && !flags[0]) {
      flags[0] = &operand;
    } else if (name == "copy" && !flags[1]) {
      flags[1] = &operand;
    } else {
      return std::nullopt;
    }
  }
  if (!target || (flags[0] && !as_bool(flags[0])) || (flags[1] && as_bool(flags[1]) != false)) return std::nullopt;
  if (target->tensor) {
    // A tensor as keyword `dtype` is a TypeError.
    if (target != &call.args[1] || !(target->tensor->device == call.args[0].tensor->device)) return std::nullopt;
    return converted(call, call.args[0], target->tensor->dtype);
  }
  auto dt = as_dtype(target);
  if (!dt) return std::nullopt;
  return converted(call, call.args[0], *dt);
}

// Tensor.type_as(other): other's dtype (and device: only the same device is modeled).
Result tensor_type_as(const Call& call) {
  auto b = bind(call, {"self", "other"});
  if (!b || !(*b)[0] || !(*b)[1] || !(*b)[0]->tensor || !(*b)[1]->tensor) return std::nullopt;
  if (!((*b)[0]->tensor->device == (*b)[1]->tensor->device)) return std::nullopt;
  return converted(call, *(*b)[0], (*b)[1]->tensor->dtype);
}

// ---- nn layers (shape_rules_nn.cpp) -------------------------------------------------------------

Result baddbmm(const Call& call) { return add_matmul(call, true); }
Result conv1d(const Call& call) { return infer_conv(call, 1); }
Result conv2d(const Call& call) { return infer_conv(call, 2); }
Result nll_loss(const Call& call) { return infer_nll_loss(call, false); }
Result cross_entropy(const Call& call) { return infer_nll_loss(call, true); }

// `s + x`, `s - x`, `s * x`, `s / x` with a Python scalar on the left: the interpreter records
// operator.sub(1.0, x) (x.__rsub__) as a torch node. Its type is that of `x op s`: promotion and these
// ops' dtype rules are symmetric in their operands, and the result takes the tensor's layout.
template <ir::Op kOp>
Result scalar_left(const Call& call) {
  if (call.args.size() != 2 || !call.kwargs.empty() || call.args[0].tensor || !call.args[1].tensor) return std::nullopt;
  const std::vector<Operand> swapped{call.args[1], call.args[0]};
  return infer_binary(Call{kOp, swapped, call.kwargs, call.grad_enabled, call.default_dtype});
}

// `x += y`, `x -= y`, `x *= y`, `x /= y` on a tensor x (operator.iadd, ...): torch's in-place op, whose
// result is x itself. x's type when y broadcasts to x's sizes and the out-of-place result's dtype is x's
// (torch refuses a result x cannot hold, `int_x /= 2`; declined also where it would cast, `half_x += float_x`
// of one category). requires_grad may turn on (y requires it). Declined when x requires grad with grad
// enabled: a leaf's in-place op is an error the meta kernel reports.
template <ir::Op kOp>
Result in_place(const Call& call) {
  if (call.args.size() != 2 || !call.kwargs.empty() || !call.args[0].tensor) return std::nullopt;
  const ir::TensorType& x = *call.args[0].tensor;
  if (x.requires_grad && call.grad_enabled) return std::nullopt;
  Result r = infer_binary(Call{kOp, call.args, call.kwargs, call.grad_enabled, call.default_dtype});
  if (!r || r->size() != 1 || (*r)[0].sizes != x.sizes || (*r)[0].dtype != x.dtype) return std::nullopt;
  ir::TensorType out = x;
  out.requires_grad = (*r)[0].requires_grad;
  return std::vector<ir::TensorType>{std::move(out)};
}

struct TorchRule {
  std::string_view name;
  Result (*rule)(const Call&);
  // The rule reads sizes as expressions (constant or symbolic): it answers symbolic calls itself,
  // without the stand-ins of shape_rules_symbolic.cpp (whose read-back declines products of sizes).
  bool symbolic = false;
};

// Sorted by name, for the binary search of find_rule (checked at compile time below).
constexpr TorchRule kTorchRules[] = {
    {"operator.add", scalar_left<ir::Op::Add>},
    {"operator.iadd", in_place<ir::Op::Add>},
    {"operator.imul", in_place<ir::Op::Mul>},
    {"operator.isub", in_place<ir::Op::Sub>},
    {"operator.itruediv", in_place<ir::Op::Div>},
    {"operator.mul", scalar_left<ir::Op::Mul>},
    {"operator.sub", scalar_left<ir::Op::Sub>},
    {"operator.truediv", scalar_left<ir::Op::Div>},
    {"torch.Tensor.baddbmm", baddbmm},
    {"torch.Tensor.bfloat16", convert_to<ir::DType::BFloat16>},
    {"torch.Tensor.double", convert_to<ir::DType::Float64>},
    {"torch.Tensor.float", convert_to<ir::DType::Float32>},
    {"torch.Tensor.half", convert_to<ir::DType::Float16>},
    {"torch.Tensor.int", convert_to<ir::DType::Int32>},
    {"torch.Tensor.long", convert_to<ir::DType::Int64>},
    {"torch.Tensor.max", elementwise_extreme<ir::Op::Maximum>},
    {"torch.Tensor.min", elementwise_extreme<ir::Op::Minimum>},
    {"torch.Tensor.narrow", infer_narrow, true},
    {"torch.Tensor.repeat", infer_repeat, true},
    {"torch.Tensor.repeat_interleave", infer_repeat_interleave, true},
    {"torch.Tensor.square", square},
    {"torch.Tensor.std", std_rule},
    {"torch.Tensor.to", tensor_to},
    {"torch.Tensor.type_as", tensor_type_as},
    {"torch.baddbmm", baddbmm},
    {"torch.conv1d", conv1d},
    {"torch.conv2d", conv2d},
    {"torch.max", elementwise_extreme<ir::Op::Maximum>},
    {"torch.min", elementwise_extreme<ir::Op::Minimum>},
    {"torch.narrow", infer_narrow, true},
    {"torch.nn.functional.batch_norm", infer_batch_norm},
    {"torch.nn.functional.cross_entropy", cross_entropy},
    {"torch.nn.functional.group_norm", infer_group_norm},
    {"torch.nn.functional.hardswish", silu_like},
    {"torch.nn.functional.log_softmax", functional_log_softmax},
    {"torch.nn.functional.mish", silu_like},
    {"torch.nn.functional.nll_loss", nll_loss},
    {"torch.nn.functional.relu", functional_relu},
    {"torch.nn.functional.rms_norm", infer_rms_norm},
    {"torch.nn.functional.scaled_dot_product_attention", infer_sdpa},
    {"torch.nn.functional.sigmoid", functional_sigmoid},
    {"torch.nn.functional.softmax", functional_softmax},
    {"torch.nn.functional.tanh", functional_tanh},
    {"torch.repeat_interleave", infer_repeat_interleave, true},
    {"torch.rms_norm", infer_rms_norm},
    {"torch.square", square},
    {"torch.std", std_rule},
    {"torch.std_mean", std_mean_rule},
};

constexpr bool sorted_by_name() {
  for (size_t i = 1; i < std::size(kTorchRules); ++i)
    if (!(kTorchRules[i - 1].name < kTorchRules[i].name)) return false;
  return true;
}
static_assert(sorted_by_name(), "kTorchRules must be sorted by name, without repeats");

const TorchRule* find_rule(std::string_view name) {
  auto it = std::lower_bound(std::begin(kTorchRules), std::end(kTorchRules), name,
                             [](const TorchRule& r, std::string_view n) { return r.name < n; });
  return it != std::end(kTorchRules) && it->name == name ? it : nullptr;
}

}  // namespace

}  // namespace rules

bool has_torch_call_rule(std::string_view qualified_name) { return rules::find_rule(qualified_name) != nullptr; }

std::vector<std::string> torch_call_rule_names() {
  std::vector<std::string> names;
  for (const auto& r : rules::kTorchRules) names.emplace_back(r.name);
  return names;
}

std::optional<std::vector<std::vector<sym::Expr>>> infer_result_sizes(
    std::string_view qualified_name, const std::vector<Operand>& args,
    const std::vector<std::pair<std::string, Operand>>& kwargs, Assumptions& assumed, const sym::Symbols* facts) {
  using namespace rules;
  Call call{ir::Op::TorchCall, args, kwargs, false, ir::DType::Float32, facts};
  Assumptions mine;
  std::optional<SizeLists> sizes;
  if (qualified_name == "torch.conv1d" || qualified_name == "torch.conv2d") {
    sizes = conv_sizes(call, qualified_name == "torch.conv1d" ? 1 : 2, &mine);
  } else if (qualified_name == "torch.max" || qualified_name == "torch.min" || qualified_name == "torch.Tensor.max" ||
             qualified_name == "torch.Tensor.min") {
    sizes = extreme_reduction_sizes(call);
  } else if (qualified_name == "operator.getitem") {
    sizes = advanced_index_sizes(call, &mine);
  }
  if (sizes) assumed.insert(assumed.end(), mine.begin(), mine.end());
  return sizes;
}

std::optional<std::vector<ir::TensorType>> infer_torch_call_types(
    std::string_view qualified_name, const std::vector<Operand>& args,
    const std::vector<std::pair<std::string, Operand>>& kwargs, bool grad_enabled, ir::DType default_dtype,
    const sym::Symbols* facts) {
  using namespace rules;
  if (default_dtype != ir::DType::Float32 && default_dtype != ir::DType::Float64) return std::nullopt;
  const TorchRule* rule = find_rule(qualified_name);
  if (!rule) return std::nullopt;
  if (has_symbolic_tensor(args, kwargs) && !rule->symbolic)
    return infer_symbolic_torch_call(qualified_name, args, kwargs, grad_enabled, default_dtype, facts);
  Call call{ir::Op::TorchCall, args, kwargs, grad_enabled, default_dtype, facts};
  return rule->rule(call);
}

}  // namespace ember::shapes
