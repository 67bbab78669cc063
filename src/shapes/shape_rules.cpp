// Shape rules, the shared part: operands, dispatch of every core op to its rule, argument binding, constants,
// dtype promotion and layout helpers (shape_rules_internal.h). The families live in
// shape_rules_{pointwise,reduce,views,data}.cpp.
#include "shapes/shape_rules.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "shapes/shape_rules_internal.h"

namespace ember::shapes {

Operand Operand::of_tensor(const ir::TensorType* t) {
  Operand o;
  o.kind = Kind::Tensor;
  o.tensor = t;
  return o;
}

Operand Operand::of_literal(ir::Literal lit) {
  Operand o;
  o.kind = Kind::Literal;
  o.literal = std::move(lit);
  return o;
}

Operand Operand::sequence(std::vector<Operand> items, bool tuple) {
  Operand o;
  o.kind = Kind::Sequence;
  o.items = std::move(items);
  o.tuple = tuple;
  return o;
}

Operand Operand::of_complex(std::complex<double> z) {
  Operand o;
  o.kind = Kind::Complex;
  o.complex = z;
  return o;
}

Operand Operand::opaque() { return Operand{}; }

std::optional<ir::DType> result_type(const std::vector<Operand>& operands, ir::DType default_dtype) {
  rules::Promotion promotion(default_dtype);
  for (const Operand& o : operands) {
    if (o.tensor) {
      promotion.add(o.tensor->dtype, o.tensor->sizes.empty());
      continue;
    }
    auto kind = rules::scalar_kind(&o);
    if (!kind) return std::nullopt;
    promotion.add(*kind);
  }
  return promotion.result();
}

namespace {

Operand operand_of(const ir::Arg& a, const TypeOf& type_of) {
  switch (a.kind) {
    case ir::Arg::Kind::Value:
      return Operand::of_tensor(&type_of(a.value));
    case ir::Arg::Kind::Literal:
      return Operand::of_literal(a.literal);
    case ir::Arg::Kind::List:
    case ir::Arg::Kind::Tuple: {
      std::vector<Operand> items;
      for (const ir::Arg& item : a.items) items.push_back(operand_of(item, type_of));
      return Operand::sequence(std::move(items), a.kind == ir::Arg::Kind::Tuple);
    }
  }
  return Operand::opaque();
}

}  // namespace

std::vector<Operand> operands_of(const std::vector<ir::Arg>& args, const TypeOf& type_of) {
  std::vector<Operand> out;
  for (const ir::Arg& a : args) out.push_back(operand_of(a, type_of));
  return out;
}

std::vector<std::pair<std::string, Operand>> operands_of(const std::vector<std::pair<std::string, ir::Arg>>& kwargs,
                                                         const TypeOf& type_of) {
  std::vector<std::pair<std::string, Operand>> out;
  for (const auto& [name, a] : kwargs) out.emplace_back(name, operand_of(a, type_of));
  return out;
}

std::vector<Operand> operands_of(const std::vector<ir::Arg>& args, const ir::Graph& graph) {
  return operands_of(args, [&graph](ir::ValueId v) -> const ir::TensorType& { return graph.value(v).type; });
}

std::vector<std::pair<std::string, Operand>> operands_of(const std::vector<std::pair<std::string, ir::Arg>>& kwargs,
                                                         const ir::Graph& graph) {
  return operands_of(kwargs, [&graph](ir::ValueId v) -> const ir::TensorType& { return graph.value(v).type; });
}


std::optional<std::vector<ir::TensorType>> infer_result_types(ir::Op op, const std::vector<Operand>& args,
    const std::vector<std::pair<std::string, Operand>>& kwargs, bool grad_enabled, ir::DType default_dtype,
    const sym::Symbols* facts) {
  using namespace rules;
  // torch.set_default_dtype accepts only floating dtypes; the rules are checked for these two.
  if (default_dtype != ir::DType::Float32 && default_dtype != ir::DType::Float64) return std::nullopt;
  if (has_symbolic_tensor(args, kwargs)) return infer_symbolic(op, args, kwargs, grad_enabled, default_dtype, facts);
  Call call{op, args, kwargs, grad_enabled, default_dtype, facts};
  // Every op of ops.def is listed: a new op is a compile warning here until it has a rule or is
  // declared to have none.
  switch (op) {
    case ir::Op::Neg:
    case ir::Op::Abs:
    case ir::Op::Exp:
    case ir::Op::Log:
    case ir::Op::Sqrt:
    case ir::Op::Rsqrt:
    case ir::Op::Sin:
    case ir::Op::Cos:
    case ir::Op::Tanh:
    case ir::Op::Sigmoid:
    case ir::Op::Erf:
    case ir::Op::Reciprocal:
    case ir::Op::Relu:
    case ir::Op::Gelu:
    case ir::Op::Silu:
    case ir::Op::LogicalNot:
    case ir::Op::BitwiseNot:
      return infer_unary(call);
    case ir::Op::Convert:
      return infer_convert(call);
    case ir::Op::Add:
    case ir::Op::Sub:
    case ir::Op::Mul:
    case ir::Op::Div:
    case ir::Op::FloorDivide:
    case ir::Op::Remainder:
    case ir::Op::Pow:
    case ir::Op::Maximum:
    case ir::Op::Minimum:
    case ir::Op::Eq:
    case ir::Op::Ne:
    case ir::Op::Lt:
    case ir::Op::Le:
    case ir::Op::Gt:
    case ir::Op::Ge:
    case ir::Op::BitwiseAnd:
    case ir::Op::BitwiseOr:
    case ir::Op::BitwiseXor:
      return infer_binary(call);
    case ir::Op::Where:
      return infer_where(call);
    case ir::Op::MaskedFill:
      return infer_masked_fill(call);
    case ir::Op::Clamp:
      return infer_clamp(call);
    case ir::Op::Sum:
    case ir::Op::Mean:
      return infer_sum_mean(call);
    case ir::Op::Amax:
    case ir::Op::Amin:
      return infer_amax_amin(call);
    case ir::Op::Var:
    case ir::Op::VarMean:
      return infer_var(call);
    case ir::Op::Softmax:
    case ir::Op::LogSoftmax:
      return infer_softmax(call);
    case ir::Op::LayerNorm:
      return infer_layer_norm(call);
    case ir::Op::Matmul:
      return infer_matmul(call);
    case ir::Op::Mm:
      return infer_mm(call);
    case ir::Op::Bmm:
      return infer_bmm(call);
    case ir::Op::Linear:
      return infer_linear(call);
    case ir::Op::Addmm:
      return infer_addmm(call);
    case ir::Op::View:
    case ir::Op::Reshape:
      return infer_view_reshape(call);
    case ir::Op::Permute:
      return infer_permute(call);
    case ir::Op::Transpose:
      return infer_transpose(call);
    case ir::Op::Expand:
      return infer_expand(call);
    case ir::Op::Unsqueeze:
      return infer_unsqueeze(call);
    case ir::Op::Squeeze:
      return infer_squeeze(call);
    case ir::Op::Flatten:
      return infer_flatten(call);
    case ir::Op::Getitem:
      return infer_getitem(call);
    case ir::Op::Slice:
    case ir::Op::Select:
      return infer_slice_select(call);
    case ir::Op::Contiguous:
      return infer_contiguous(call);
    case ir::Op::Cat:
    case ir::Op::Stack:
      return infer_cat_stack(call);
    case ir::Op::Split:
    case ir::Op::Chunk:
      return infer_split_chunk(call);
    case ir::Op::Gather:
      return infer_gather(call);
    case ir::Op::IndexSelect:
      return infer_index_select(call);
    case ir::Op::IndexAdd:
    case ir::Op::ScatterAdd:
      return infer_accumulate(call);
    case ir::Op::SliceScatter:
      return infer_slice_scatter(call);
    case ir::Op::Embedding:
      return infer_embedding(call);
    case ir::Op::Tril:
    case ir::Op::Triu:
      return infer_tril_triu(call);
    case ir::Op::Dropout:
      return infer_dropout(call);
    case ir::Op::PhiloxRand:
      return infer_philox_rand(call);
    case ir::Op::Arange:
      return infer_arange(call);
    // Factories take dtype and device from arguments the caller resolves; generic torch calls
    // have no rule by definition.
    case ir::Op::Zeros:
    case ir::Op::Ones:
    case ir::Op::Full:
    case ir::Op::Empty:
    case ir::Op::ZerosLike:
    case ir::Op::OnesLike:
    case ir::Op::TorchCall:
      return std::nullopt;
    // Ops that decompositions produce; capture meets them rarely, and torch's meta kernel answers.
    case ir::Op::Log1p:
    case ir::Op::Expm1:
    case ir::Op::Floor:
    case ir::Op::Ceil:
    case ir::Op::Trunc:
    case ir::Op::Round:
    case ir::Op::Sign:
    case ir::Op::LogicalAnd:
    case ir::Op::LogicalOr:
      return std::nullopt;
  }
  return std::nullopt;
}

namespace rules {

// ---- Binding ----------------------------------------------------------------------------------

namespace {

bool keyword_only(const char* spec) { return spec[0] == '*'; }

bool name_matches(const char* spec, std::string_view name) {
  std::string_view s(keyword_only(spec) ? spec + 1 : spec);
  while (true) {
    size_t bar = s.find('|');
    if (s.substr(0, bar) == name) return true;
    if (bar == std::string_view::npos) return false;
    s.remove_prefix(bar + 1);
  }
}

}  // namespace

std::optional<Bound> bind(const Call& call, std::initializer_list<const char*> names) {
  Bound b;
  size_t positional = 0;
  for (const char* spec : names) {
    if (keyword_only(spec)) break;
    ++positional;
  }
  if (call.args.size() > positional || names.size() > static_cast<size_t>(kMaxParams)) return std::nullopt;
  for (size_t i = 0; i < call.args.size(); ++i) b.slot[i] = &call.args[i];
  for (auto& [name, operand] : call.kwargs) {
    int index = -1;
    int i = 0;
    for (const char* spec : names) {
      if (name_matches(spec, name)) index = i;
      ++i;
    }
    if (index < 0 || b.slot[static_cast<size_t>(index)] != nullptr) return std::nullopt;
    b.slot[static_cast<size_t>(index)] = &operand;
  }
  return b;
}

std::optional<Sizes> sizes_operand(const Call& call, const char* keyword, const char* extra_kw,
                                   const Operand** extra) {
  if (extra) *extra = nullptr;
  const Operand* named = nullptr;
  for (auto& [name, operand] : call.kwargs) {
    if (name == keyword && !named) {
      named = &operand;
    } else if (extra_kw && name == extra_kw && extra && !*extra) {
      *extra = &operand;
    } else {
      return std::nullopt;
    }
  }
  if (named) {
    if (call.args.size() != 1) return std::nullopt;
    return as_int_list(named);
  }
  if (call.args.size() < 2) return std::nullopt;
  if (call.args.size() == 2) {
    if (auto list = as_int_list(&call.args[1])) return list;
  }
  Sizes out;
  for (size_t i = 1; i < call.args.size(); ++i) {
    auto v = as_int(&call.args[i]);
    if (!v) return std::nullopt;
    out.push_back(*v);
  }
  return out;
}

// ---- Constants ------------------------------------------------------------------------------

namespace {

// The literal an operand holds, or nullptr (absent, a tensor, a sequence, complex, opaque).
const ir::Literal* literal(const Operand* p) {
  return p && p->kind == Operand::Kind::Literal ? &p->literal : nullptr;
}

}  // namespace

bool is_none(const Operand* p) {
  const ir::Literal* l = literal(p);
  return p == nullptr || (l && std::holds_alternative<ir::NoneLiteral>(*l));
}

std::optional<int64_t> as_int(const Operand* p) {
  const ir::Literal* l = literal(p);
  if (const int64_t* v = l ? std::get_if<int64_t>(l) : nullptr) return *v;
  return std::nullopt;
}

std::optional<bool> as_bool(const Operand* p) {
  const ir::Literal* l = literal(p);
  if (const bool* v = l ? std::get_if<bool>(l) : nullptr) return *v;
  return std::nullopt;
}

std::optional<double> as_real(const Operand* p) {
  const ir::Literal* l = literal(p);
  if (const double* v = l ? std::get_if<double>(l) : nullptr) return *v;
  if (auto v = as_int(p)) return static_cast<double>(*v);
  return std::nullopt;
}

std::optional<Sizes> as_int_list(const Operand* p) {
  if (!p || p->kind != Operand::Kind::Sequence) return std::nullopt;
  Sizes out;
  out.reserve(p->items.size());
  for (const Operand& item : p->items) {
    auto v = as_int(&item);
    if (!v) return std::nullopt;
    out.push_back(*v);
  }
  return out;
}

std::optional<Sizes> as_int_or_list(const Operand* p) {
  if (auto v = as_int(p)) return Sizes{*v};
  return as_int_list(p);
}

std::optional<ir::DType> as_dtype(const Operand* p) {
  const ir::Literal* l = literal(p);
  if (const ir::DType* v = l ? std::get_if<ir::DType>(l) : nullptr) return *v;
  return std::nullopt;
}

bool is_string(const Operand* p, std::string_view text) {
  const ir::Literal* l = literal(p);
  const std::string* v = l ? std::get_if<std::string>(l) : nullptr;
  return v && *v == text;
}

std::optional<Dense> as_dense(const Operand* p) {
  if (!p || !p->tensor) return std::nullopt;
  const ir::TensorType& t = *p->tensor;
  if (t.sizes.size() != t.strides.size()) return std::nullopt;
  Dense d;
  d.dtype = t.dtype;
  d.requires_grad = t.requires_grad;
  d.device = &t.device;
  d.sizes.reserve(t.sizes.size());
  d.strides.reserve(t.strides.size());
  for (size_t i = 0; i < t.sizes.size(); ++i) {
    if (!t.sizes[i].is_constant() || !t.strides[i].is_constant()) return std::nullopt;
    if (t.sizes[i].constant() < 0) return std::nullopt;
    d.sizes.push_back(t.sizes[i].constant());
    d.strides.push_back(t.strides[i].constant());
  }
  return d;
}

std::optional<ScalarKind> scalar_kind(const Operand* p) {
  if (p && p->kind == Operand::Kind::Complex) return ScalarKind::Complex;
  const ir::Literal* l = literal(p);
  if (!l) return std::nullopt;
  if (std::holds_alternative<bool>(*l)) return ScalarKind::Bool;
  // A sym(...) literal is an int whose value the graph's symbols give on each call (`x * n`).
  if (std::holds_alternative<int64_t>(*l) || std::holds_alternative<sym::Expr>(*l)) return ScalarKind::Int;
  if (std::holds_alternative<double>(*l)) return ScalarKind::Float;
  return std::nullopt;
}

// ---- dtypes -----------------------------------------------------------------------------------

void Promotion::merge(std::optional<ir::DType>& group, ir::DType dt) {
  if (!group) {
    group = dt;
    return;
  }
  auto p = promote_types(*group, dt);
  if (!p) {
    failed_ = true;
    return;
  }
  group = *p;
}

void Promotion::add(const Dense& t) { add(t.dtype, t.dim() == 0); }

void Promotion::add(ir::DType tensor_dtype, bool zero_dim) { merge(zero_dim ? zero_dims_ : dims_, tensor_dtype); }

void Promotion::add(ScalarKind s) {
  switch (s) {
    case ScalarKind::Bool:
      merge(scalars_, ir::DType::Bool);
      return;
    case ScalarKind::Int:
      merge(scalars_, ir::DType::Int64);
      return;
    case ScalarKind::Float:
      merge(scalars_, default_dtype_);
      return;
    case ScalarKind::Complex: {
      auto c = complex_of(default_dtype_);
      if (!c) {
        failed_ = true;
        return;
      }
      merge(scalars_, *c);
      return;
    }
  }
}

namespace {

// A lower-priority group changes the result only when its category is higher; then a floating
// result keeps its precision when it becomes complex (float32 tensor + complex128 0-d -> complex64).
std::optional<ir::DType> outrank(std::optional<ir::DType> higher, std::optional<ir::DType> lower) {
  if (!higher) return lower;
  if (!lower) return higher;
  Category ch = category(*higher), cl = category(*lower);
  if (ch == Category::Float8 || cl == Category::Float8) return higher == lower ? higher : std::nullopt;
  if (static_cast<int>(cl) <= static_cast<int>(ch)) return higher;
  if (ch == Category::Floating && cl == Category::Complex) return complex_of(*higher);
  return promote_types(*higher, *lower);
}

}  // namespace

std::optional<ir::DType> Promotion::result() const {
  if (failed_) return std::nullopt;
  if (!dims_ && !zero_dims_ && !scalars_) return std::nullopt;
  auto low = outrank(zero_dims_, scalars_);
  if (!low && (zero_dims_ || scalars_)) return std::nullopt;
  auto r = outrank(dims_, low);
  return r;
}

namespace {

bool real_fits(double v, ir::DType dt) {
  return !std::isfinite(v) || std::fabs(v) <= ir::dtype_info(dt).max_finite;
}

}  // namespace

bool scalar_fits(const Operand* p, ir::DType dt) {
  auto kind = scalar_kind(p);
  if (!kind || *kind == ScalarKind::Bool) return true;
  Category c = category(dt);
  if (c == Category::Float8) return false;
  if (*kind == ScalarKind::Float) {
    return (c == Category::Floating || c == Category::Complex) && real_fits(std::get<double>(p->literal), dt);
  }
  if (*kind == ScalarKind::Complex) {
    return c == Category::Complex && real_fits(p->complex.real(), dt) && real_fits(p->complex.imag(), dt);
  }
  if (std::holds_alternative<sym::Expr>(p->literal)) {
    // Any int64 the symbols may take: int64 itself, or a floating dtype whose range holds them all.
    return dt == ir::DType::Int64 ||
           ((c == Category::Floating || c == Category::Complex) && ir::dtype_info(dt).max_finite >= 9.3e18);
  }
  int64_t v = std::get<int64_t>(p->literal);
  if (c == Category::Floating || c == Category::Complex) return real_fits(static_cast<double>(v), dt);
  if (dt == ir::DType::Int64) return true;  // its maximum is not exact as a double
  // Bool and the integers: [0, max] unsigned, [-max - 1, max] signed.
  int64_t hi = static_cast<int64_t>(ir::dtype_info(dt).max_finite);
  int64_t lo = ir::dtype_info(dt).is_signed ? -hi - 1 : 0;
  return v >= lo && v <= hi;
}

// ---- Layout -----------------------------------------------------------------------------------

Sizes contiguous_strides(const Sizes& sizes) { return ir::contiguous_strides(sizes); }

sym::Symbols facts_of(const std::set<std::string>& names, const sym::Symbols* facts, int64_t least) {
  sym::Symbols out;
  for (const std::string& name : names) {
    auto known = facts ? std::find_if(facts->begin(), facts->end(), [&](const sym::SymbolInfo& f) { return f.name == name; })
                       : sym::Symbols::const_iterator{};
    out.push_back(facts && known != facts->end() ? *known : sym::SymbolInfo{name, least, least});
  }
  return out;
}

bool holds_or_assumed(const sym::Rel& rel, Assumptions* assumed, const sym::Symbols* facts, const std::string& why) {
  std::set<std::string> names;
  sym::free_symbols(rel.lhs, names);
  sym::free_symbols(rel.rhs, names);
  sym::Symbols symbols = facts_of(names, facts, 1);
  std::optional<bool> known = sym::statically_known(rel, symbols);
  if (known) return *known;
  if (!assumed) return false;
  assumed->push_back(Assumption{rel, why});
  return true;
}

bool has_default_strides(const Dense& t) { return t.strides == contiguous_strides(t.sizes); }

bool is_contiguous(const Dense& t) {
  auto n = numel(t.sizes);
  if (n && *n == 0) return true;
  int64_t expected = 1;
  for (size_t i = t.sizes.size(); i-- > 0;) {
    if (t.sizes[i] == 1) continue;
    if (t.strides[i] != expected) return false;
    expected *= t.sizes[i];
  }
  return true;
}

bool like_has_default_strides(const Dense& x) {
  return has_default_strides(x) || std::all_of(x.sizes.begin(), x.sizes.end(), [](int64_t s) { return s > 1; });
}

std::optional<int64_t> numel(const Sizes& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) {
    if (s < 0 || __builtin_mul_overflow(n, s, &n)) return std::nullopt;
  }
  return n;
}

std::optional<int64_t> wrap_dim(int64_t dim, int64_t ndim) {
  int64_t n = std::max<int64_t>(ndim, 1);
  if (dim < -n || dim >= n) return std::nullopt;
  return dim < 0 ? dim + n : dim;
}

std::optional<Sizes> broadcast(const Sizes& a, const Sizes& b) { return ir::broadcast_shapes(a, b); }

// ---- Results ----------------------------------------------------------------------------------

namespace {

void collect_tensors(const Operand& op, std::vector<const ir::TensorType*>& out) {
  if (op.tensor) out.push_back(op.tensor);
  for (const Operand& item : op.items) collect_tensors(item, out);
}

}  // namespace

std::optional<ir::Device> result_device(const Call& call, bool cpu_scalars_mix) {
  std::vector<const ir::TensorType*> tensors;
  for (auto& a : call.args) collect_tensors(a, tensors);
  for (auto& kv : call.kwargs) collect_tensors(kv.second, tensors);
  if (tensors.empty()) return std::nullopt;
  const ir::Device* device = &tensors[0]->device;
  for (auto* t : tensors) {
    if (!t->sizes.empty()) {
      device = &t->device;
      break;
    }
  }
  for (auto* t : tensors) {
    if (t->device == *device) continue;
    if (cpu_scalars_mix && t->sizes.empty() && t->device.type == "cpu") continue;
    return std::nullopt;
  }
  return *device;
}

ir::TensorType make_type(ir::DType dt, Sizes sizes, Sizes strides, bool requires_grad, const ir::Device& device) {
  ir::TensorType t;
  t.dtype = dt;
  t.sizes.reserve(sizes.size());
  t.strides.reserve(strides.size());
  for (int64_t s : sizes) t.sizes.emplace_back(s);
  for (int64_t s : strides) t.strides.emplace_back(s);
  t.device = device;
  t.requires_grad = requires_grad;
  return t;
}

bool computed_requires_grad(const Call& call, ir::DType out, std::initializer_list<const Dense*> operands) {
  if (!call.grad_enabled || !is_differentiable(out)) return false;
  for (const Dense* d : operands)
    if (d && d->requires_grad) return true;
  return false;
}

Result computed(const Call& call, ir::DType dt, const Sizes& sizes, std::initializer_list<const Dense*> operands,
                bool cpu_scalars_mix) {
  auto device = result_device(call, cpu_scalars_mix);
  if (!device) return std::nullopt;
  return std::vector<ir::TensorType>{
      make_type(dt, sizes, contiguous_strides(sizes), computed_requires_grad(call, dt, operands), *device)};
}

ir::TensorType view_of(const Dense& base, Sizes sizes, Sizes strides) {
  return make_type(base.dtype, std::move(sizes), std::move(strides), base.requires_grad, *base.device);
}

}  // namespace rules
}  // namespace ember::shapes
