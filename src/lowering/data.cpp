// Data-movement primitives and factories, one kernel each: cat (masked loads, one per input,
// chosen by where), gather and index_select (indirect loads whose index is checked against the
// dim size, as torch raises on an out-of-range index), index_add and scatter_add (x copied, then
// the source added by an accumulating store at checked indices), slice_scatter (where the element
// lies in the slice, a masked load of src; else x's), tril/triu (where on an index
// comparison), contiguous (a copy into the result's layout, or the input itself when torch
// would return it unchanged), full/zeros/ones (a constant), arange (an index expression),
// philox_rand (philox of the loaded seed and the counter offset + row-major position).
#include "lowering/lower_internal.h"

namespace ember::lowering::detail {

namespace {

using loop_ir::NodeId;
using loop_ir::Scalar;

Scalar zero_of(DType dt) {
  dt = compute_dtype(dt);
  if (dt == DType::Bool) return Scalar{false};
  if (ir::is_integral(dt)) return Scalar{int64_t{0}};
  return Scalar{0.0};
}

// An i64 value of `e`: a constant when it is one.
NodeId int_node(KernelBuilder& kb, const Expr& e) {
  return e.is_constant() ? kb.constant(Scalar{e.constant()}, DType::Int64) : kb.index_value(e);
}

const ir::Arg* find_arg(const ir::Node& node, size_t pos, const char* name) {
  if (pos < node.args.size()) return &node.args[pos];
  for (const auto& kw : node.kwargs)
    if (kw.first == name) return &kw.second;
  return nullptr;
}

void finish_into_result(Lowerer& L, KernelBuilder& kb, ir::ValueId r, const Index& idx, NodeId value) {
  BufferId out = L.new_result_buffer(r);
  kb.store(out, idx, value);
  kb.finish();
  L.bind_realized(r, out);
}

std::string lower_cat(Lowerer& L, const ir::Node& node) {
  if (node.args.empty() || node.args[0].kind != ir::Arg::Kind::List) return "expects a list of tensors";
  std::vector<ir::ValueId> inputs;
  for (const ir::Arg& a : node.args[0].items) {
    if (a.kind != ir::Arg::Kind::Value) return "expects a list of tensors";
    inputs.push_back(a.value);
  }
  ir::ValueId r = node.results[0];
  const std::vector<Expr>& sizes = L.type(r).sizes;
  int64_t dim = 0;
  if (const ir::Arg* d = find_arg(node, 1, "dim")) {
    std::optional<int64_t> v = int_literal(*d);
    if (!v) return "dim is not an int literal";
    dim = *v < 0 ? *v + static_cast<int64_t>(sizes.size()) : *v;
  }
  if (dim < 0 || dim >= static_cast<int64_t>(sizes.size())) return "dim out of range";
  // torch skips legacy empty inputs (1-d of size 0) whatever their rank.
  std::vector<ir::ValueId> parts;
  for (ir::ValueId v : inputs) {
    const std::vector<Expr>& s = L.type(v).sizes;
    if (s.size() == 1 && s[0] == Expr(0) && sizes.size() != 1) continue;
    if (s.size() != sizes.size()) return "inputs of different ranks";
    parts.push_back(v);
  }
  if (parts.empty()) return "no non-empty input";
  DType cdt = compute_dtype(L.type(r).dtype);

  KernelBuilder kb(L.program(), sizes);
  Index idx = kb.outer_vars();
  std::vector<Expr> offsets;
  Expr offset = 0;
  for (ir::ValueId v : parts) {
    offsets.push_back(offset);
    offset = offset + L.type(v).sizes[dim];
  }
  NodeId result = -1;
  for (size_t k = parts.size(); k-- > 0;) {
    Index at = idx;
    at[dim] = idx[dim] - offsets[k];
    NodeId local = kb.index_value(at[dim]);
    NodeId mask = -1;
    if (k > 0) mask = kb.binary(ScalarOp::Ge, local, kb.constant(Scalar{int64_t{0}}, DType::Int64), DType::Int64);
    if (k + 1 < parts.size()) {
      NodeId below = kb.binary(ScalarOp::Lt, local, int_node(kb, L.type(parts[k]).sizes[dim]), DType::Int64);
      mask = mask < 0 ? below : kb.binary(ScalarOp::LogicalAnd, mask, below, DType::Bool);
    }
    const Lazy& lz = L.lazy(parts[k]);
    Index buffer_index = lz.to_buffer_index(at);
    NodeId value;
    if (mask < 0) {  // a single input: nothing to choose
      value = kb.load(lz.buffer, buffer_index);
    } else {
      DType load_dt = compute_dtype(L.program().buffers.at(lz.buffer).dtype);
      value = kb.masked_load(lz.buffer, buffer_index, mask, zero_of(load_dt));
    }
    value = kb.cast(value, cdt);
    result = result < 0 ? value : kb.where(mask, value, result, cdt);
  }
  finish_into_result(L, kb, r, idx, result);
  return "";
}

// gather(x, dim, index) and index_select(x, dim, index).
std::string lower_indirect(Lowerer& L, const ir::Node& node) {
  bool gather = node.op == ir::Op::Gather;
  if (node.args.size() != 3 || node.args[0].kind != ir::Arg::Kind::Value || node.args[2].kind != ir::Arg::Kind::Value)
    return "expects (x, dim, index)";
  for (const auto& kw : node.kwargs) {
    std::optional<bool> b = bool_literal(kw.second);
    if (!(gather && kw.first == "sparse_grad" && b && !*b)) return "unexpected keyword " + kw.first;
  }
  ir::ValueId x = node.args[0].value, index = node.args[2].value, r = node.results[0];
  std::optional<int64_t> dim = int_literal(node.args[1]);
  size_t rank = L.type(x).sizes.size();
  if (!dim) return "dim is not an int literal";
  int64_t d = *dim < 0 ? *dim + static_cast<int64_t>(rank) : *dim;
  if (rank == 0 || d < 0 || d >= static_cast<int64_t>(rank)) return "dim out of range (or a 0-d input)";
  DType idt = L.type(index).dtype;
  if (idt != DType::Int64 && idt != DType::Int32) return "an index that is not int64 or int32";
  size_t index_rank = L.type(index).sizes.size();
  if (gather ? index_rank != rank : index_rank > 1) return "an index of unexpected rank";

  KernelBuilder kb(L.program(), L.type(r).sizes);
  Index idx = kb.outer_vars();
  NodeId i = L.load_value(kb, index, gather ? idx : (index_rank == 1 ? Index{idx[d]} : Index{}));
  NodeId checked = kb.check_index(i, L.type(x).sizes[d]);
  Index at = idx;
  at[d] = Expr::symbol("t" + std::to_string(checked));
  NodeId value = kb.cast(L.load_value(kb, x, at), L.type(r).dtype);
  finish_into_result(L, kb, r, idx, value);
  return "";
}

// index_add(x, dim, index, source) and scatter_add(x, dim, index, src): x copied into the result, then
// a kernel over the source (scatter_add: over the index) adding each element where the index sends
// it along dim, the index checked against the dim size (torch raises on one out of range). A
// float16/bfloat16 result sums in an f32 buffer, rounded once by a third kernel. On CUDA the adding
// kernel's stores are atomic adds, in any order: under deterministic algorithms the op stays torch's.
std::string lower_accumulate(Lowerer& L, const ir::Node& node) {
  const bool scatter = node.op == ir::Op::ScatterAdd;
  if (node.args.size() != 4 || !node.kwargs.empty() || node.args[0].kind != ir::Arg::Kind::Value ||
      node.args[2].kind != ir::Arg::Kind::Value || node.args[3].kind != ir::Arg::Kind::Value)
    return "expects (x, dim, index, source) and no keywords";
  const ir::ValueId x = node.args[0].value, index = node.args[2].value, source = node.args[3].value, r = node.results[0];
  const std::vector<Expr>& sizes = L.type(r).sizes;
  const size_t rank = sizes.size();
  std::optional<int64_t> dim = int_literal(node.args[1]);
  if (!dim) return "dim is not an int literal";
  const int64_t d = *dim < 0 ? *dim + static_cast<int64_t>(rank) : *dim;
  if (rank == 0 || d < 0 || d >= static_cast<int64_t>(rank)) return "dim out of range (or a 0-d input)";
  const DType idt = L.type(index).dtype, rdt = L.type(r).dtype;
  if (idt != DType::Int64 && idt != DType::Int32) return "an index that is not int64 or int32";
  if (rdt == DType::Bool) return "a bool sum";
  if (L.type(source).dtype != rdt || L.type(source).sizes.size() != rank) return "a source of another dtype or rank";
  if (L.type(index).sizes.size() != (scatter ? rank : 1)) return "an index of unexpected rank";
  if (L.options().deterministic && L.type(r).device.type == "cuda")
    return "deterministic algorithms are on, and its kernel would add atomically, in any order";

  const bool rounded = rdt == DType::Float16 || rdt == DType::BFloat16;
  BufferId sum = -1;
  if (rounded) {
    loop_ir::Buffer b;
    b.dtype = DType::Float32;
    b.sizes = sizes;
    b.strides = ir::contiguous_strides(sizes);
    b.device = L.type(r).device;
    sum = L.program().add_buffer(std::move(b));
  } else {
    sum = L.new_result_buffer(r);
  }
  {
    KernelBuilder kb(L.program(), sizes);
    Index idx = kb.outer_vars();
    kb.store(sum, idx, L.load_value(kb, x, idx));
    kb.finish();
  }
  {
    KernelBuilder kb(L.program(), L.type(scatter ? index : source).sizes);
    Index idx = kb.outer_vars();
    NodeId i = L.load_value(kb, index, scatter ? idx : Index{idx[d]});
    Index at = idx;
    at[d] = Expr::symbol("t" + std::to_string(kb.check_index(i, sizes[d])));
    kb.accumulate(sum, at, L.load_value(kb, source, idx));
    kb.finish();
  }
  if (!rounded) {
    L.bind_realized(r, sum);
    return "";
  }
  KernelBuilder kb(L.program(), sizes);
  Index idx = kb.outer_vars();
  finish_into_result(L, kb, r, idx, kb.load(sum, idx));
  return "";
}

// slice_scatter(x, src, dim, start, end, step), bounds normalized (decompositions): one kernel over x's
// sizes. Along dim, element j lies in the slice when k = j - start is in [0, step * m) and a multiple
// of step (m: src's extent there); it then reads src at k // step (a masked load), else x at j.
std::string lower_slice_scatter(Lowerer& L, const ir::Node& node) {
  if (node.args.size() != 6 || !node.kwargs.empty() || node.args[0].kind != ir::Arg::Kind::Value ||
      node.args[1].kind != ir::Arg::Kind::Value)
    return "expects (x, src, dim, start, end, step) and no keywords";
  const ir::ValueId x = node.args[0].value, src = node.args[1].value, r = node.results[0];
  const std::vector<Expr>& sizes = L.type(r).sizes;
  std::optional<int64_t> dim = int_literal(node.args[2]), step = int_literal(node.args[5]);
  std::optional<Expr> start = size_literal(node.args[3]);  // 0 <= start <= size (the primitive's form)
  if (!dim || !start || !step || *dim < 0 || *dim >= static_cast<int64_t>(sizes.size()) ||
      (start->is_constant() && start->constant() < 0) || *step < 1)
    return "bounds that are not normalized int or size literals";
  if (L.type(src).sizes.size() != sizes.size()) return "a source of another rank";
  const size_t d = static_cast<size_t>(*dim);
  const DType cdt = compute_dtype(L.type(r).dtype);

  KernelBuilder kb(L.program(), sizes);
  Index idx = kb.outer_vars();
  const Expr k = idx[d] - *start;
  const NodeId local = kb.index_value(k);
  NodeId inside = kb.binary(ScalarOp::LogicalAnd,
                            kb.binary(ScalarOp::Ge, local, kb.constant(Scalar{int64_t{0}}, DType::Int64), DType::Int64),
                            kb.binary(ScalarOp::Lt, local, int_node(kb, L.type(src).sizes[d] * Expr(*step)), DType::Int64),
                            DType::Bool);
  Index at = idx;
  at[d] = k;
  if (*step > 1) {
    const NodeId rest = kb.binary(ScalarOp::Mod, local, kb.constant(Scalar{*step}, DType::Int64), DType::Int64);
    inside = kb.binary(ScalarOp::LogicalAnd, inside,
                       kb.binary(ScalarOp::Eq, rest, kb.constant(Scalar{int64_t{0}}, DType::Int64), DType::Int64),
                       DType::Bool);
    at[d] = floordiv(k, Expr(*step));
  }
  const Lazy& from = L.lazy(src);
  const DType load_dt = compute_dtype(L.program().buffers.at(from.buffer).dtype);
  const NodeId taken = kb.cast(kb.masked_load(from.buffer, from.to_buffer_index(at), inside, zero_of(load_dt)), cdt);
  const NodeId kept = kb.cast(L.load_value(kb, x, idx), cdt);
  finish_into_result(L, kb, r, idx, kb.where(inside, taken, kept, cdt));
  return "";
}

std::string lower_triangle(Lowerer& L, const ir::Node& node) {
  if (node.args.empty() || node.args[0].kind != ir::Arg::Kind::Value) return "expects a tensor";
  ir::ValueId x = node.args[0].value, r = node.results[0];
  int64_t k = 0;
  if (const ir::Arg* a = find_arg(node, 1, "diagonal")) {
    std::optional<int64_t> v = int_literal(*a);
    if (!v) return "diagonal is not an int literal";
    k = *v;
  }
  size_t rank = L.type(r).sizes.size();
  if (rank < 2) return "a tensor of rank < 2";
  DType cdt = compute_dtype(L.type(r).dtype);
  KernelBuilder kb(L.program(), L.type(r).sizes);
  Index idx = kb.outer_vars();
  NodeId offset = kb.index_value(idx[rank - 1] - idx[rank - 2]);  // column - row
  ScalarOp keep = node.op == ir::Op::Tril ? ScalarOp::Le : ScalarOp::Ge;
  NodeId cond = kb.binary(keep, offset, kb.constant(Scalar{k}, DType::Int64), DType::Int64);
  NodeId v = L.load_value(kb, x, idx);
  finish_into_result(L, kb, r, idx, kb.where(cond, v, kb.constant(zero_of(cdt), cdt), cdt));
  return "";
}

std::string lower_contiguous(Lowerer& L, const ir::Node& node) {
  if (node.args.size() != 1 || node.args[0].kind != ir::Arg::Kind::Value) return "expects contiguous(x)";
  ir::ValueId x = node.args[0].value, r = node.results[0];
  const Lazy& in = L.lazy(x);
  if (in.layout && layout_matches(*in.layout, L.type(r))) {
    L.set_lazy(r, in);  // torch returns the input itself: keep the aliasing
    return "";
  }
  BufferId out = L.new_result_buffer(r);
  L.set_lazy(r, in);
  L.emit_copy(r, out);
  L.bind_realized(r, out);
  return "";
}

std::string lower_fill(Lowerer& L, const ir::Node& node, std::optional<ir::Literal> value) {
  ir::ValueId r = node.results[0];
  DType cdt = compute_dtype(L.type(r).dtype);
  if (!value) {
    const ir::Arg* a = find_arg(node, 1, "fill_value");
    if (!a || a->kind != ir::Arg::Kind::Literal) return "expects a literal fill value";
    value = a->literal;
  }
  std::optional<Scalar> s = scalar_of(*value, cdt);
  if (!s) return "a fill value the dtype cannot hold exactly";
  KernelBuilder kb(L.program(), L.type(r).sizes);
  Index idx = kb.outer_vars();
  finish_into_result(L, kb, r, idx, kb.constant(*s, cdt));
  return "";
}

std::string lower_arange(Lowerer& L, const ir::Node& node) {
  std::vector<ir::Literal> bounds;
  for (const ir::Arg& a : node.args) {
    if (a.kind != ir::Arg::Kind::Literal) return "expects literal bounds";
    // The end may be symbolic (`arange(s0)`): only the result's size, in its type, depends on it.
    bool end = bounds.size() == (node.args.size() == 1 ? 0 : 1);
    if (!std::holds_alternative<int64_t>(a.literal) && !std::holds_alternative<double>(a.literal) &&
        !(end && std::holds_alternative<Expr>(a.literal)))
      return "expects numeric bounds";
    bounds.push_back(a.literal);
  }
  if (bounds.empty() || bounds.size() > 3) return "expects arange(start, end, step)";
  ir::Literal start = int64_t{0}, step = int64_t{1};
  if (bounds.size() >= 2) start = bounds[0];
  if (bounds.size() == 3) step = bounds[2];
  ir::ValueId r = node.results[0];
  DType rdt = L.type(r).dtype;
  if (L.type(r).sizes.size() != 1) return "a result that is not 1-d";
  KernelBuilder kb(L.program(), L.type(r).sizes);
  Index idx = kb.outer_vars();
  NodeId value;
  if (ir::is_integral(rdt)) {
    const int64_t* s0 = std::get_if<int64_t>(&start);
    const int64_t* st = std::get_if<int64_t>(&step);
    if (!s0 || !st) return "an integer arange with float bounds";
    value = kb.index_value(Expr(*s0) + Expr(*st) * idx[0]);
  } else if (ir::is_floating(rdt)) {
    // torch accumulates in double for f32/f64 (float for f16/bf16): start + step * i.
    DType acc = rdt == DType::Float32 || rdt == DType::Float64 ? DType::Float64 : DType::Float32;
    NodeId i = kb.cast(kb.index_value(idx[0]), acc);
    NodeId prod = kb.binary(ScalarOp::Mul, kb.constant(*scalar_of(step, acc), acc), i, acc);
    value = kb.binary(ScalarOp::Add, kb.constant(*scalar_of(start, acc), acc), prod, acc);
  } else {
    return "arange of bool";
  }
  finish_into_result(L, kb, r, idx, value);
  return "";
}

// The counter of element idx is offset + its row-major position: the numbering python/ember/rng.py
// and Triton's tl.rand share, whatever kernel the value is fused into.
std::string lower_philox_rand(Lowerer& L, const ir::Node& node) {
  const ir::Arg* seed = find_arg(node, 0, "seed");
  const ir::Arg* offset = find_arg(node, 1, "offset");
  if (!seed || seed->kind != ir::Arg::Kind::Value || !offset) return "expects philox_rand(seed, offset, sizes)";
  std::optional<int64_t> base = int_literal(*offset);
  if (!base) return "an offset that is not an int literal";
  ir::ValueId r = node.results[0];
  const std::vector<Expr>& sizes = L.type(r).sizes;
  KernelBuilder kb(L.program(), sizes);
  Index idx = kb.outer_vars();
  Expr counter = Expr(*base);
  std::vector<Expr> strides = ir::contiguous_strides(sizes);
  for (size_t d = 0; d < idx.size(); ++d) counter = counter + strides[d] * idx[d];
  NodeId s = L.load_value(kb, seed->value, {});
  finish_into_result(L, kb, r, idx, kb.philox_rand(s, kb.index_value(counter)));
  return "";
}

}  // namespace

std::string lower_data(Lowerer& L, const ir::Node& node) {
  if (node.results.size() != 1) return "expects one result";
  switch (node.op) {
    case ir::Op::Cat: return lower_cat(L, node);
    case ir::Op::Gather: case ir::Op::IndexSelect: return lower_indirect(L, node);
    case ir::Op::IndexAdd: case ir::Op::ScatterAdd: return lower_accumulate(L, node);
    case ir::Op::SliceScatter: return lower_slice_scatter(L, node);
    case ir::Op::Tril: case ir::Op::Triu: return lower_triangle(L, node);
    case ir::Op::Contiguous: return lower_contiguous(L, node);
    case ir::Op::Full: return lower_fill(L, node, std::nullopt);
    case ir::Op::Zeros: case ir::Op::ZerosLike: return lower_fill(L, node, ir::Literal{int64_t{0}});
    case ir::Op::Ones: case ir::Op::OnesLike: return lower_fill(L, node, ir::Literal{int64_t{1}});
    case ir::Op::Arange: return lower_arange(L, node);
    case ir::Op::PhiloxRand: return lower_philox_rand(L, node);
    default: return "not a data primitive";  // stack, embedding, empty: extern calls
  }
}

}  // namespace ember::lowering::detail
