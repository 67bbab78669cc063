// Trace: basic tensor subscripts over symbolic sizes (docs/dynamic-shapes.md, "Subscripts").
//
// `x[..., None]`, `x[:, -1:]`, `x[:, :1]`, `x[i]`, `x[:, :T]`, `x[..., s:e]`, `x[::k]` (T, s, e, k size
// ints or dynamic ints: the slice is a SliceVar, BUILD_SLICE) become select, slice
// and unsqueeze nodes in canonical form (0 <= start <= end <= size, 0 <= index < size), whose types
// this file computes. Why not one getitem node with a shape rule: Python clamps each bound against
// the dim's size, and whether a constant bound falls inside a symbolic size is a question about the
// symbol's range; the trace answers it with size_relation (free when the symbols' facts decide it,
// else one relation guard), which a shape rule in src/shapes cannot record. The canonical nodes
// then need no clamping at run time, and a slice bound may be an expression (a `sym(...)` literal).
#include "frontend/interp/trace.h"

namespace ember::frontend {

namespace {

// One item of a basic index, its ints as expressions over the shape symbols.
struct IndexItem {
  enum class Kind : uint8_t { Int, Slice, NewAxis, Ellipsis };
  Kind kind = Kind::Int;
  sym::Expr index = 0;                    // Int
  std::optional<sym::Expr> start, stop;   // Slice: nullopt for an omitted bound
  sym::Expr step = 1;                     // Slice: a constant >= 1, or an expression (a size or int symbol)
};

// An int bound of a constant slice (None: nullopt); false for anything else.
bool constant_bound(PyObject* o, std::optional<sym::Expr>* out) {
  if (o == Py_None) return true;
  if (!PyLong_CheckExact(o)) return false;
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
  if (overflow) return false;
  *out = sym::Expr(static_cast<int64_t>(v));
  return true;
}

std::optional<IndexItem> constant_item(PyObject* o) {
  IndexItem item;
  if (o == Py_None) {
    item.kind = IndexItem::Kind::NewAxis;
  } else if (o == Py_Ellipsis) {
    item.kind = IndexItem::Kind::Ellipsis;
  } else if (PyLong_CheckExact(o)) {
    std::optional<sym::Expr> v;
    if (!constant_bound(o, &v)) return std::nullopt;
    item.index = *v;
  } else if (PySlice_Check(o)) {
    auto* s = reinterpret_cast<PySliceObject*>(o);
    std::optional<sym::Expr> step;
    item.kind = IndexItem::Kind::Slice;
    if (!constant_bound(s->start, &item.start) || !constant_bound(s->stop, &item.stop) || !constant_bound(s->step, &step))
      return std::nullopt;
    item.step = step ? *step : sym::Expr(1);
    if (item.step.constant() <= 0) return std::nullopt;  // torch refuses: its error, from the getitem node
  } else {
    return std::nullopt;  // tensors, lists, bools: advanced indexing
  }
  return item;
}

// A bound of a SliceVar: None, an int constant or a size SymInt.
bool slice_bound(const VarRef& v, std::optional<sym::Expr>* out) {
  if (is_size_int(v)) {
    *out = *v->as<SymIntVar>().size;
    return true;
  }
  PyObject* c = Trace::as_constant(*v);
  return c && constant_bound(c, out);
}

std::optional<IndexItem> index_item(const VarRef& v) {
  if (is_size_int(v)) {
    IndexItem item;
    item.index = *v->as<SymIntVar>().size;
    return item;
  }
  if (v->kind == VarKind::Slice) {
    const auto& s = v->as<SliceVar>();
    IndexItem item;
    item.kind = IndexItem::Kind::Slice;
    std::optional<sym::Expr> step;
    if (!slice_bound(s.start, &item.start) || !slice_bound(s.stop, &item.stop) || !slice_bound(s.step, &step)) return std::nullopt;
    item.step = step ? *step : sym::Expr(1);
    if (item.step.is_constant() && item.step.constant() <= 0) return std::nullopt;
    return item;
  }
  PyObject* c = Trace::as_constant(*v);
  return c ? constant_item(c) : std::nullopt;
}

}  // namespace

VarRef Trace::symbolic_subscript(const VarRef& x, const VarRef& index) {
  std::vector<IndexItem> items;
  auto add = [&](std::optional<IndexItem> item) {
    if (item) items.push_back(*item);
    return item.has_value();
  };
  PyObject* c = as_constant(*index);
  if (c && PyTuple_CheckExact(c)) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(c); ++i)
      if (!add(constant_item(PyTuple_GET_ITEM(c, i)))) return nullptr;
  } else if (!c && index->kind == VarKind::Tuple && !index->as<SequenceVar>().named_type) {
    for (const VarRef& v : index->as<SequenceVar>().items)
      if (!add(index_item(v))) return nullptr;
  } else if (!add(index_item(index))) {
    return nullptr;
  }
  const ir::TensorType& in = x->as<TensorVar>().type;
  bool any_symbolic = symbolic(in);
  int64_t consumed = 0, ellipses = 0;
  for (const IndexItem& it : items) {
    any_symbolic = any_symbolic || (it.kind == IndexItem::Kind::Int && symbolic(it.index)) ||
                   (it.start && symbolic(*it.start)) || (it.stop && symbolic(*it.stop)) || symbolic(it.step);
    consumed += it.kind == IndexItem::Kind::Int || it.kind == IndexItem::Kind::Slice;
    ellipses += it.kind == IndexItem::Kind::Ellipsis;
  }
  int64_t rank = static_cast<int64_t>(in.sizes.size());
  if (!any_symbolic || ellipses > 1 || consumed > rank) return nullptr;  // static, or torch's IndexError

  auto le = [&](const sym::Expr& a, const sym::Expr& b) { return size_relation(sym::Rel{a, sym::RelOp::Le, b}); };
  VarRef cur = x;
  size_t dim = 0;  // the dim of `cur` the next item applies to
  bool emitted = false;
  auto emit = [&](ir::Op op, std::vector<VarRef> args, ir::TensorType type) {
    args.insert(args.begin(), cur);
    cur = record_typed(op, std::string(), op_callable(op), args, {}, {std::move(type)});
    emitted = true;
  };
  auto dim_var = [&]() { return constant(PyRef::steal(PyLong_FromSize_t(dim))); };
  for (const IndexItem& it : items) {
    ir::TensorType t = cur->as<TensorVar>().type;
    switch (it.kind) {
      case IndexItem::Kind::Int: {
        const sym::Expr size = t.sizes[dim];
        sym::Expr k = le(0, it.index) ? it.index : it.index + size;
        if (!le(0, k) || !size_relation(sym::Rel{k, sym::RelOp::Lt, size})) return nullptr;  // IndexError
        t.sizes.erase(t.sizes.begin() + static_cast<std::ptrdiff_t>(dim));
        t.strides.erase(t.strides.begin() + static_cast<std::ptrdiff_t>(dim));
        emit(ir::Op::Select, {dim_var(), size_int(k)}, std::move(t));
        break;
      }
      case IndexItem::Kind::Slice: {
        const sym::Expr size = t.sizes[dim];
        // Python's slice.indices for a positive step: a negative bound counts from the end, then
        // both clamp into [0, size]; an end before the start is the start.
        auto bound = [&](const std::optional<sym::Expr>& b, const sym::Expr& omitted) {
          if (!b) return omitted;
          if (le(0, *b)) return le(*b, size) ? *b : size;
          sym::Expr from_end = *b + size;
          return le(0, from_end) ? from_end : sym::Expr(0);
        };
        sym::Expr start = bound(it.start, 0), stop = bound(it.stop, size);
        if (!le(start, stop)) stop = start;
        // A symbolic step is >= 1 by its symbol's range (ints below 1 are compiled apart), so the
        // relation is free; a step that could be 0 or negative leaves the subscript to torch.
        if (!le(1, it.step)) return nullptr;
        const bool unit = it.step == sym::Expr(1);
        if (start == sym::Expr(0) && stop == size && unit) {  // all of the dim
          ++dim;
          break;
        }
        t.sizes[dim] = unit ? stop - start : floordiv(stop - start + it.step - sym::Expr(1), it.step);
        t.strides[dim] = t.strides[dim] * it.step;
        emit(ir::Op::Slice, {dim_var(), size_int(start), size_int(stop), size_int(it.step)}, std::move(t));
        ++dim;
        break;
      }
      case IndexItem::Kind::NewAxis: {
        // torch's unsqueeze: the new dim steps over the one it is inserted before.
        sym::Expr stride = dim < t.sizes.size() ? t.sizes[dim] * t.strides[dim] : sym::Expr(1);
        t.sizes.insert(t.sizes.begin() + static_cast<std::ptrdiff_t>(dim), sym::Expr(1));
        t.strides.insert(t.strides.begin() + static_cast<std::ptrdiff_t>(dim), stride);
        emit(ir::Op::Unsqueeze, {dim_var()}, std::move(t));
        ++dim;
        break;
      }
      case IndexItem::Kind::Ellipsis:
        dim += static_cast<size_t>(rank - consumed);
        break;
    }
  }
  if (emitted) return cur;
  // `x[:]`, `x[:, 0:]`, `x[...]`: a new view of all of x, as the whole of dim 0.
  const ir::TensorType& t = x->as<TensorVar>().type;
  if (t.sizes.empty()) return nullptr;  // the caller records getitem
  dim = 0;
  emit(ir::Op::Slice, {dim_var(), size_int(0), size_int(t.sizes[0]), constant(PyRef::steal(PyLong_FromLong(1)))}, t);
  return cur;
}

VarRef Trace::specialize_slices(const VarRef& index) {
  if (index->kind == VarKind::Slice) return specialize(index, "a slice bound outside a basic tensor subscript");
  if (index->kind != VarKind::Tuple) return index;
  std::vector<VarRef> items = index->as<SequenceVar>().items;
  bool any = false;
  for (VarRef& item : items) {
    if (item->kind != VarKind::Slice) continue;
    item = specialize(item, "a slice bound outside a basic tensor subscript");
    any = true;
  }
  return any ? make_tuple(std::move(items)) : index;
}

}  // namespace ember::frontend
