// Trace's part in dynamic shapes (docs/dynamic-shapes.md): which input dimensions become shape
// symbols, sizes as Python values (size SymInts), calls on symbolic operands, and the shape guard.
#include <algorithm>
#include <functional>
#include <set>
#include <stdexcept>

#include "frontend/interp/trace.h"

namespace ember::frontend {

namespace {

// Whether `source` reaches its tensor through a module (a parameter, buffer or tensor attribute of
// an nn.Module): such tensors keep static shapes, as torch.compile's do by default.
bool through_module(const SourceRef& source) {
  for (const Source* s = source.get(); s; s = s->base.get())
    if (s->kind == Source::Kind::ModuleMember) return true;
  return false;
}

// The dims listed in the set-valued attribute `name` of `obj` (torch._dynamo's mark_dynamic and
// mark_static store them there; ember.mark_dynamic/mark_static use the same attributes).
std::vector<int64_t> marked_dims(PyObject* obj, const char* name) {
  std::vector<int64_t> out;
  PyRef dims = PyRef::steal(PyObject_GetAttrString(obj, name));
  if (!dims) {
    PyErr_Clear();
    return out;
  }
  PyRef it = PyRef::steal(PyObject_GetIter(dims.get()));
  if (!it) {
    PyErr_Clear();
    return out;
  }
  while (PyRef item = PyRef::steal(PyIter_Next(it.get()))) {
    long long d = PyLong_AsLongLong(item.get());
    if (d == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      continue;
    }
    out.push_back(d);
  }
  PyErr_Clear();
  return out;
}

}  // namespace

std::vector<bool> Trace::dynamic_dims(PyObject* obj, const SourceRef& source, const TensorMeta& meta) const {
  size_t rank = meta.sizes.size();
  std::vector<bool> out(rank, false);
  if (dynamic.mode == Dynamic::Never || through_module(source) || rank == 0) return out;
  static PyObject* parameter_type = [] {
    PyRef m = PyRef::steal(PyImport_ImportModule("torch.nn.parameter"));
    PyObject* t = m ? PyObject_GetAttrString(m.get(), "Parameter") : nullptr;
    if (!t) PyErr_Clear();
    return t;  // kept for the process
  }();
  if (parameter_type && PyObject_IsInstance(obj, parameter_type) == 1) return out;
  PyErr_Clear();
  auto mark = [&](const std::vector<int64_t>& dims, bool value) {
    for (int64_t d : dims) {
      if (d < 0) d += static_cast<int64_t>(rank);
      if (d >= 0 && d < static_cast<int64_t>(rank)) out[static_cast<size_t>(d)] = value;
    }
  };
  if (dynamic.mode == Dynamic::Always) {
    out.assign(rank, true);
  } else if (dynamic.seen) {
    // Automatic dynamic: a dimension whose size differs from the one an earlier compile of this
    // code saw becomes symbolic, and stays so for later compiles (-1 in the record).
    std::vector<int64_t>& seen = (*dynamic.seen)[source->str()];
    if (seen.size() != rank) {
      seen = meta.sizes;
    } else {
      for (size_t d = 0; d < rank; ++d) {
        if (seen[d] != meta.sizes[d]) seen[d] = -1;
        out[d] = seen[d] == -1;
      }
    }
  }
  mark(marked_dims(obj, "_dynamo_dynamic_indices"), true);
  mark(marked_dims(obj, "_dynamo_static_indices"), false);
  // Sizes 0 and 1 decide broadcasting and emptiness: never symbolic.
  for (size_t d = 0; d < rank; ++d) out[d] = out[d] && meta.sizes[d] >= 2;
  return out;
}

bool Trace::dynamic_int(PyObject* obj, const SourceRef& source) const {
  if (dynamic.mode == Dynamic::Never) return false;
  // An argument: a local, or an item of one (`*args`, `**kwargs`: a compiled module's forward
  // receives its arguments so).
  const Source* root = source.get();
  while (root->kind == Source::Kind::Item || root->kind == Source::Kind::DictItem) root = root->base.get();
  bool argument = root->kind == Source::Kind::Local;
  // Otherwise what the guards read and capture (runtime::SymbolBinding gets the value from them):
  // an attribute, a global, a closure variable, or an item of a list, tuple or dict reached from
  // one (`self.sizes[0]`, `cfg["n"]`), as Dynamo's automatic dynamic covers such ints.
  Source::Kind kind = source->kind;
  if (!argument && kind != Source::Kind::Attr && kind != Source::Kind::Global && kind != Source::Kind::Closure &&
      kind != Source::Kind::Item && kind != Source::Kind::DictItem)
    return false;
  int overflow = 0;
  long long value = PyLong_AsLongLongAndOverflow(obj, &overflow);
  if (overflow || (value == -1 && PyErr_Occurred())) {
    PyErr_Clear();
    return false;
  }
  // torch.compile(dynamic=True) makes the frame's int arguments symbolic from the first call; ints
  // read from modules and globals it specializes (recompiling on each new value): here those follow
  // automatic dynamic under either setting, so a counter attribute compiles at most twice.
  bool dynamic_now = dynamic.mode == Dynamic::Always && argument;
  if (!dynamic_now && dynamic.seen) {
    std::vector<int64_t>& seen = (*dynamic.seen)["int " + source->str()];
    if (seen.empty()) {
      seen.push_back(value);
    } else if (seen[0] != value) {
      seen[0] = -1;  // never a value itself: a recorded -1 can only mean "changed"
    }
    dynamic_now = seen[0] == -1;
  }
  // torch.compile does not specialize ints 0 and 1 (create_unspecified_symbol), and neither does
  // Ember for 1: broadcasting rules already refuse to guess whether a symbol is 1. An int symbol
  // is >= 1 all the same, so a size made from it is never empty and a division by it never by
  // zero: 0 and negative ints are compiled apart.
  return dynamic_now && value >= 1;
}

VarRef Trace::int_symbol(PyObject* obj, const SourceRef& source) {
  sym::Expr e = shapes.int_symbol(PyLong_AsLongLong(obj), source);
  shape_slots_.push_back(ShapeSlot{e, source, -1, false});
  guards.int_slot(source, static_cast<int>(shape_slots_.size()) - 1);
  auto s = std::make_shared<SymIntVar>();
  s->value = PyRef::borrow(obj);
  s->size = e;
  auto plan = std::make_shared<ValuePlan>();
  plan->kind = ValuePlan::Kind::FromSource;
  plan->source = source;
  s->expr = std::move(plan);
  s->leaves.emplace_back(source, PyRef::borrow(obj));
  has_size_ints_ = true;
  return s;
}

void Trace::symbolize_input(const SourceRef& source, const TensorMeta& meta, const std::vector<bool>& dyn,
                            ir::TensorType* type, std::vector<int>* size_slots, std::vector<int>* stride_slots) {
  if (std::find(dyn.begin(), dyn.end(), true) == dyn.end()) return;
  // Strides become expressions of the sizes when the layout is dense in some dimension order
  // (contiguous, or a permutation of it: what torch's ops make) after the broadcast dims (stride 0,
  // an expanded tensor's: 0 for every size, guarded so); another layout stays static.
  size_t rank = meta.sizes.size();
  std::vector<size_t> order(rank);  // innermost first
  for (size_t d = 0; d < rank; ++d) order[d] = d;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return meta.strides[a] != meta.strides[b] ? meta.strides[a] < meta.strides[b] : a > b;
  });
  int64_t expected_value = 1;
  for (size_t d : order) {
    if (meta.strides[d] == expected_value) {
      expected_value *= meta.sizes[d];
    } else if (meta.sizes[d] != 1 && meta.strides[d] != 0) {  // a size-1 dim is never stepped over
      return;
    }
  }
  size_slots->assign(rank, -1);
  stride_slots->assign(rank, -1);
  for (size_t d = 0; d < rank; ++d)
    if (dyn[d]) type->sizes[d] = shapes.symbol_for(meta.sizes[d], source, static_cast<int>(d), dynamic.mode == Dynamic::Auto);
  sym::Expr expected = 1;
  expected_value = 1;
  for (size_t d : order) {
    if (meta.strides[d] != expected_value) continue;  // a size-1 dim's own stride: kept
    type->strides[d] = expected;
    expected = expected * type->sizes[d];
    expected_value *= meta.sizes[d];
  }
  auto slot_for = [&](const sym::Expr& e, size_t d, bool stride) {
    if (e.is_constant()) return -1;
    shape_slots_.push_back(ShapeSlot{e, source, static_cast<int>(d), stride});
    return static_cast<int>(shape_slots_.size()) - 1;
  };
  for (size_t d = 0; d < rank; ++d) {
    (*size_slots)[d] = slot_for(type->sizes[d], d, false);
    (*stride_slots)[d] = slot_for(type->strides[d], d, true);
  }
}

void Trace::specialize_sizes(Var& v, const std::string& use) {
  if (v.unread()) return;  // contents the trace has not read hold no values it made
  auto fix = [&](VarRef& item) {
    if ((item->kind == VarKind::SymInt && item->as<SymIntVar>().is_size()) || item->kind == VarKind::Slice) {
      item = specialize(item, use);
    } else {
      specialize_sizes(*item, use);
    }
  };
  if (v.kind == VarKind::Tuple || v.kind == VarKind::List) {
    for (VarRef& item : v.as<SequenceVar>().items) fix(item);
  } else if (v.kind == VarKind::Dict) {
    for (VarRef& item : v.as<DictVar>().values) fix(item);
  }
}

VarRef Trace::size_int(const sym::Expr& e_in) {
  sym::Expr e = shapes.resolve(e_in);
  if (e.is_constant()) return make_object(PyRef::steal(PyLong_FromLongLong(e.constant())));
  auto s = std::make_shared<SymIntVar>();
  s->value = PyRef::steal(PyLong_FromLongLong(shapes.hint(e)));
  s->size = e;
  has_size_ints_ = true;
  return s;
}

VarRef Trace::size_tuple(const std::vector<sym::Expr>& xs, bool torch_size) {
  bool any = false;
  for (const sym::Expr& e : xs) any = any || symbolic(e);
  if (!any) {
    PyRef tuple = PyRef::steal(PyTuple_New(static_cast<Py_ssize_t>(xs.size())));
    for (size_t i = 0; i < xs.size(); ++i) PyTuple_SET_ITEM(tuple.get(), i, PyLong_FromLongLong(shapes.hint(xs[i])));
    if (!torch_size) return constant(std::move(tuple));
    PyRef size = PyRef::steal(PyObject_CallOneArg(table.size_type.get(), tuple.get()));
    if (!size) throw PythonError();
    return constant(std::move(size));
  }
  std::vector<VarRef> items;
  for (const sym::Expr& e : xs) items.push_back(size_int(e));
  auto seq = std::make_shared<SequenceVar>(VarKind::Tuple, std::move(items));
  if (torch_size) seq->named_type = table.size_type;
  return seq;
}

VarRef Trace::size_query(const std::string& query, const std::vector<VarRef>& args,
                         const std::vector<std::pair<std::string, VarRef>>& kwargs) {
  const ir::TensorType& t = args[0]->as<TensorVar>().type;
  bool sizes = query == "size", strides = query == "stride";
  if (sizes || strides) {
    const std::vector<sym::Expr>& xs = sizes ? t.sizes : t.strides;
    const VarRef* dim = args.size() > 1 ? &args[1] : nullptr;
    for (auto& [k, v] : kwargs)
      if (k == "dim") dim = &v;
    if (!dim || ((*dim)->kind == VarKind::Object && (*dim)->as<ObjectVar>().obj.get() == Py_None)) return size_tuple(xs, sizes);
    std::optional<sym::Expr> d = size_expr(*dim);
    if (!d || !d->is_constant()) return nullptr;
    int64_t rank = static_cast<int64_t>(xs.size()), k = d->constant();
    if (k < -rank || k >= rank) return nullptr;  // the meta tensor raises torch's IndexError
    return size_int(xs[static_cast<size_t>(k < 0 ? k + rank : k)]);
  }
  if (query == "numel" || query == "nelement") {
    sym::Expr n = 1;
    for (const sym::Expr& e : t.sizes) n = n * e;
    return size_int(n);
  }
  if (query == "__len__" && !t.sizes.empty()) return size_int(t.sizes[0]);
  return nullptr;
}

namespace {

// Calls `f` on every Var of a call's arguments, through tuples and lists.
template <class F>
void for_each_arg(const std::vector<VarRef>& args, const std::vector<std::pair<std::string, VarRef>>& kwargs, F&& f) {
  std::function<void(const VarRef&)> visit = [&](const VarRef& v) {
    f(v);
    if ((v->kind == VarKind::Tuple || v->kind == VarKind::List) && !v->unread())
      for (const VarRef& item : v->as<SequenceVar>().items) visit(item);
  };
  for (const VarRef& a : args) visit(a);
  for (const auto& kv : kwargs) visit(kv.second);
}

}  // namespace

bool Trace::has_symbols(const std::vector<VarRef>& args, const std::vector<std::pair<std::string, VarRef>>& kwargs) const {
  if (shapes.empty()) return false;
  bool any = false;
  for_each_arg(args, kwargs, [&](const VarRef& v) {
    if (v->kind == VarKind::Tensor) any = any || symbolic(v->as<TensorVar>().type);
    if (is_size_int(v)) any = any || symbolic(*v->as<SymIntVar>().size);
  });
  return any;
}

namespace {

// Calls `f` on every size and stride of a call's tensor arguments and on every size int among them.
template <class F>
void for_each_size_expr(const std::vector<VarRef>& args, const std::vector<std::pair<std::string, VarRef>>& kwargs, F&& f) {
  for_each_arg(args, kwargs, [&](const VarRef& v) {
    if (v->kind == VarKind::Tensor) {
      for (const auto* xs : {&v->as<TensorVar>().type.sizes, &v->as<TensorVar>().type.strides})
        for (const sym::Expr& e : *xs) f(e);
    }
    if (is_size_int(v)) f(*v->as<SymIntVar>().size);
  });
}

}  // namespace

void Trace::specialize_symbols(const std::vector<VarRef>& args, const std::vector<std::pair<std::string, VarRef>>& kwargs,
                               const std::string& why) {
  for_each_size_expr(args, kwargs, [&](const sym::Expr& e) { shapes.specialize(e, why); });
}

std::optional<std::vector<ir::TensorType>> Trace::rule_types_pinning_fewest(
    ir::Op op, const std::string& name, const std::vector<VarRef>& args,
    const std::vector<std::pair<std::string, VarRef>>& kwargs, const std::string& why) {
  std::vector<std::string> symbols;  // the call's live symbols, in order of appearance
  for_each_size_expr(args, kwargs, [&](const sym::Expr& e) {
    std::set<std::string> names;
    sym::free_symbols(shapes.resolve(e), names);
    for (const std::string& n : names)
      if (std::find(symbols.begin(), symbols.end(), n) == symbols.end()) symbols.push_back(n);
  });
  constexpr size_t kMostSymbols = 8;  // 255 subsets at most, each a rule run of microseconds
  if (symbols.empty() || symbols.size() > kMostSymbols) return std::nullopt;
  size_t n = symbols.size();
  for (size_t count = 1; count <= n; ++count) {
    for (uint32_t mask = 1; mask < (1u << n); ++mask) {
      if (static_cast<size_t>(__builtin_popcount(mask)) != count) continue;
      sym::Replacements pins;
      for (size_t i = 0; i < n; ++i)
        if (mask & (1u << i)) pins.emplace_back(symbols[i], sym::Expr(shapes.hint(sym::Expr::symbol(symbols[i]))));
      std::optional<std::vector<ir::TensorType>> types = rule_types(op, name, args, kwargs, pins);
      if (!types) continue;
      for (const auto& [symbol, value] : pins) shapes.specialize(sym::Expr::symbol(symbol), why);
      return types;
    }
  }
  return std::nullopt;
}

std::optional<ir::TensorType> Trace::symbolic_factory_shape(const std::string& name, const std::vector<VarRef>& args,
                                                            const std::vector<std::pair<std::string, VarRef>>& kwargs) {
  std::string fn = name.substr(name.rfind('.') + 1);
  auto kwarg = [&](const char* key) -> const VarRef* {
    for (const auto& kv : kwargs)
      if (kv.first == key) return &kv.second;
    return nullptr;
  };
  ir::TensorType out;
  static const std::set<std::string> kLike = {"zeros_like", "ones_like", "empty_like", "full_like", "rand_like",
                                               "randn_like", "to", "type_as", "float", "double", "half", "bfloat16",
                                               "long", "int", "bool", "clone", "detach", "cumsum", "cumprod"};
  if (kLike.count(fn)) {
    // torch's default memory format preserves a dense input's strides (inputs' layouts are dense).
    if (args.empty() || args[0]->kind != VarKind::Tensor || kwarg("memory_format")) return std::nullopt;
    out.sizes = args[0]->as<TensorVar>().type.sizes;
    out.strides = args[0]->as<TensorVar>().type.strides;
    return out;
  }
  if (fn == "diff") {
    // diff(input, n=1, dim=-1, prepend=None, append=None): along dim, n fewer than input, prepend
    // and append joined; a new contiguous tensor.
    static const char* const kParams[] = {"input", "n", "dim", "prepend", "append"};
    const VarRef* bound[5] = {};
    for (size_t i = 0; i < args.size() && i < 5; ++i) bound[i] = &args[i];
    for (size_t i = 0; i < 5; ++i)
      if (const VarRef* v = kwarg(kParams[i])) bound[i] = v;
    if (args.size() > 5 || !bound[0] || (*bound[0])->kind != VarKind::Tensor) return std::nullopt;
    const ir::TensorType& x = (*bound[0])->as<TensorVar>().type;
    std::optional<sym::Expr> n = bound[1] ? size_expr(*bound[1]) : sym::Expr(1);
    std::optional<sym::Expr> dim = bound[2] ? size_expr(*bound[2]) : sym::Expr(-1);
    int64_t rank = static_cast<int64_t>(x.sizes.size());
    if (!n || !dim || !n->is_constant() || !dim->is_constant() || rank == 0) return std::nullopt;
    int64_t d = dim->constant() < 0 ? dim->constant() + rank : dim->constant();
    if (d < 0 || d >= rank) return std::nullopt;
    out.sizes = x.sizes;
    for (const VarRef* joined : {bound[3], bound[4]}) {
      if (!joined || ((*joined)->kind == VarKind::Object && (*joined)->as<ObjectVar>().obj.get() == Py_None)) continue;
      if ((*joined)->kind != VarKind::Tensor || (*joined)->as<TensorVar>().type.sizes.size() != x.sizes.size())
        return std::nullopt;
      out.sizes[static_cast<size_t>(d)] = out.sizes[static_cast<size_t>(d)] + (*joined)->as<TensorVar>().type.sizes[static_cast<size_t>(d)];
    }
    sym::Expr len = out.sizes[static_cast<size_t>(d)] - *n;
    if (!size_relation(sym::Rel{0, sym::RelOp::Le, len})) return std::nullopt;  // torch clamps: let the meta kernel say
    out.sizes[static_cast<size_t>(d)] = len;
    out.strides = ir::contiguous_strides(out.sizes);
    return out;
  }
  if (fn == "arange") {
    // arange(end), arange(start, end[, step]) of ints: ceil((end - start) / step) elements.
    std::vector<const VarRef*> parts;
    for (const VarRef& a : args) parts.push_back(&a);
    for (const char* key : {"start", "end", "step"})
      if (const VarRef* v = kwarg(key)) parts.push_back(v);
    if (parts.empty() || parts.size() > 3 || (kwarg("start") && parts.size() < 2)) return std::nullopt;
    std::vector<sym::Expr> xs;
    for (const VarRef* p : parts) {
      std::optional<sym::Expr> e = size_expr(*p);
      if (!e) return std::nullopt;
      xs.push_back(*e);
    }
    sym::Expr start = xs.size() >= 2 ? xs[0] : sym::Expr(0), end = xs.size() >= 2 ? xs[1] : xs[0];
    sym::Expr step = xs.size() == 3 ? xs[2] : sym::Expr(1);
    if (!step.is_constant() || step.constant() <= 0) return std::nullopt;
    if (!size_relation(sym::Rel{start, sym::RelOp::Le, end})) return std::nullopt;  // empty: let torch say
    out.sizes = {floordiv(end - start + step - 1, step)};
    out.strides = {1};
    return out;
  }
  // `x.new_ones(sizes)` and the like: the factory's sizes after the tensor.
  bool method = fn.rfind("new_", 0) == 0;
  std::string factory = method ? fn.substr(4) : fn;
  if (factory == "zeros" || factory == "ones" || factory == "empty" || factory == "full" || factory == "rand" ||
      factory == "randn") {
    if (method && (args.empty() || args[0]->kind != VarKind::Tensor)) return std::nullopt;
    std::vector<VarRef> positional(args.begin() + (method ? 1 : 0), args.end());
    // The sizes: varargs ints, or one sequence of them (`size=` too); full's fill value follows.
    auto items_of = [&](const VarRef& v) -> std::optional<std::vector<VarRef>> {
      if (v->kind == VarKind::Tuple || v->kind == VarKind::List) return v->as<SequenceVar>().items;
      PyObject* c = as_constant(*v);
      if (!c || (!PyTuple_Check(c) && !PyList_Check(c))) return std::nullopt;
      std::vector<VarRef> out;
      for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(c); ++i) out.push_back(constant(PyRef::borrow(PySequence_Fast_GET_ITEM(c, i))));
      return out;
    };
    std::vector<VarRef> dims;
    const VarRef* size = kwarg("size");
    size_t n_positional = factory == "full" ? 1 : positional.size();
    if (!size && n_positional == 1 && !positional.empty() && items_of(positional[0])) size = &positional[0];
    if (size) {
      std::optional<std::vector<VarRef>> items = items_of(*size);
      if (!items) return std::nullopt;
      dims = std::move(*items);
    } else {
      dims.assign(positional.begin(), positional.begin() + static_cast<std::ptrdiff_t>(std::min(n_positional, positional.size())));
    }
    for (const VarRef& d : dims) {
      std::optional<sym::Expr> e = size_expr(d);
      if (!e) return std::nullopt;
      out.sizes.push_back(*e);
    }
    out.strides = ir::contiguous_strides(out.sizes);
    return out;
  }
  return std::nullopt;
}

ir::TensorType Trace::at_hints(const ir::TensorType& t) const {
  ir::TensorType out = t;
  for (auto* xs : {&out.sizes, &out.strides})
    for (sym::Expr& e : *xs) e = shapes.hint(e);
  return out;
}

bool Trace::symbolic(const ir::TensorType& t) const {
  for (const auto* xs : {&t.sizes, &t.strides})
    for (const sym::Expr& e : *xs)
      if (symbolic(e)) return true;
  return false;
}

std::string Trace::where() const {
  if (!file || line < 0) return "";
  return " (" + *file + ":" + std::to_string(line) + ")";
}

bool Trace::size_relation(const sym::Rel& rel) { return shapes.evaluate(rel, rel.str() + where()); }

void Trace::finish_shapes() {
  if (shape_slots_.empty()) return;
  const sym::Symbols& symbols = shapes.all_symbols();
  // Slot k is named by the symbol it binds (the dim the symbol was made for), else `_v<k>`.
  std::vector<std::string> names(shape_slots_.size());
  for (size_t k = 0; k < symbols.size(); ++k) {
    const ShapeEnv::Binding& b = shapes.bindings()[k];
    for (size_t j = 0; j < shape_slots_.size(); ++j) {
      const ShapeSlot& slot = shape_slots_[j];
      if (!slot.stride && slot.dim == b.dim && slot.source->str() == b.source->str()) names[j] = symbols[k].name;
    }
  }
  std::vector<sym::Rel> rels;
  std::vector<std::string> texts;
  for (size_t j = 0; j < shape_slots_.size(); ++j) {
    const ShapeSlot& slot = shape_slots_[j];
    std::string read = slot.source->str();
    if (slot.dim >= 0) read += (slot.stride ? ".stride()[" : ".size()[") + std::to_string(slot.dim) + "]";
    if (names[j].empty()) {
      names[j] = "_v" + std::to_string(j);
      sym::Rel rel{sym::Expr::symbol(names[j]), sym::RelOp::Eq, shapes.resolve(slot.expr)};
      rels.push_back(rel);
      texts.push_back(read + " == " + rel.rhs.str());
    } else {
      if (slot.dim >= 0) {
        rels.push_back(sym::Rel{sym::Expr(2), sym::RelOp::Le, sym::Expr::symbol(names[j])});
        texts.push_back("2 <= " + read + " (" + names[j] + "; sizes 0 and 1 are compiled apart)");
      } else {
        rels.push_back(sym::Rel{sym::Expr(1), sym::RelOp::Le, sym::Expr::symbol(names[j])});
        texts.push_back("1 <= " + read + " (" + names[j] + "; ints below 1 are compiled apart)");
      }
    }
  }
  for (const ShapeEnv::Guard& g : shapes.guards()) {
    rels.push_back(g.rel);
    texts.push_back(g.rel.str() + ": " + g.why);
  }
  guards.shape_relations(rels, names, std::move(texts));
}

void Trace::apply_specializations() {
  int next_slot = static_cast<int>(graph.inputs().size());
  for (size_t k = 0; k < shapes.all_symbols().size(); ++k) {
    const sym::SymbolInfo& s = shapes.all_symbols()[k];
    if (!s.from_int || shapes.specialized(s.name)) continue;
    // The runtime reads an int symbol from the captured value that follows the graph's tensor
    // inputs (runtime::SymbolBinding): its source is captured in the order of graph.symbols.
    if (guards.capture(shapes.bindings()[k].source) != next_slot++)
      throw std::logic_error("int symbol " + s.name + " is not captured right after the graph's inputs");
  }
  graph.symbols = shapes.live_symbols();
  if (shapes.replacements().empty()) return;
  auto fix_type = [&](ir::TensorType& t) {
    for (auto* xs : {&t.sizes, &t.strides})
      for (sym::Expr& e : *xs) e = shapes.resolve(e);
  };
  std::function<void(ir::Arg&)> fix_arg = [&](ir::Arg& a) {
    if (a.kind == ir::Arg::Kind::Literal) {
      if (const sym::Expr* e = std::get_if<sym::Expr>(&a.literal)) {
        sym::Expr r = shapes.resolve(*e);
        if (r.is_constant()) {
          a.literal = r.constant();
        } else {
          a.literal = r;
        }
      }
    }
    for (ir::Arg& item : a.items) fix_arg(item);
  };
  for (ir::Value& v : graph.mutable_values()) fix_type(v.type);
  for (ir::Node& n : graph.mutable_nodes()) {
    for (ir::Arg& a : n.args) fix_arg(a);
    for (auto& [k, a] : n.kwargs) fix_arg(a);
  }
}

}  // namespace ember::frontend
