// functional_writes: in-place calls on intermediates nothing else can see, made out of place, in every
// graph the backend compiles (inference and training; passes.h states the contract).
//
// Why: `nn.ReLU(inplace=True)` and `out += identity` after a convolution and BatchNorm (most CNNs)
// write a value the graph made. Kept in place, each is a torch call: in an inference graph an extern
// call that also cuts the epilogue kernel in two (conv -> BN -> ReLU -> add -> ReLU was three kernels
// and three calls after the conv, not one kernel); in a training graph the joint does not
// differentiate in-place writes, so the whole graph ran eagerly. When nothing else can see the written
// storage, writing a new value instead is what eager computes, and the rest of the pipeline sees
// ordinary functional ops (relu, silu, hardswish, dropout; `x += y`, `x.mul_(y)`, `x.relu_()`).
//
// Alias rule, per storage: a value a node makes in storage of its own (returns_fresh) is a root; the
// results of the writes recognized below on a root or on an earlier such result are its other names.
// Its writes are rewritten only when no node that may return an alias of one of its names (a view, an
// unknown call, a write this pass does not rewrite: another dtype, another in-place op) comes before
// one of those writes: an alias taken before a write must see it, one taken after the last write
// aliases the last write's result, which is what eager's alias sees (`nn.Hardswish(inplace=True)`
// then `flatten`). A view of a root's storage written in place becomes a root of its own when, from
// its first write on, nothing reads the storage but the view's names (the root is then dead; see the
// comment in writes_out_of_place). A graph input is never a root (writes to inputs stay writes). Then every read of a
// name, and every graph output that is a name, is bound to the latest write's result before it,
// which is what eager reads.
#include <algorithm>
#include <array>
#include <functional>
#include <map>
#include <optional>

#include "passes/builders.h"
#include "passes/passes.h"
#include "passes/signatures.h"
#include "shapes/shape_rules.h"

namespace ember::passes {

namespace {

using ir::Arg;
using ir::Op;
using ir::ValueId;

// The call's `inplace=True` keyword (canonicalize keeps `inplace` a keyword), or kwargs.end().
auto inplace_flag(ir::Node& node) {
  return std::find_if(node.kwargs.begin(), node.kwargs.end(), [](const auto& kw) {
    const bool* flag = kw.second.kind == Arg::Kind::Literal ? std::get_if<bool>(&kw.second.literal) : nullptr;
    return kw.first == "inplace" && flag && *flag;
  });
}

// The core op an in-place method, function or operator computes out of place (`x += y`, `x.mul_(y)`,
// `torch.relu_(x)`), or nullopt. Only ops whose result keeps the written dtype when every tensor they
// read has it (no comparisons, no logical ops): canonicalize then binds the core op's arguments.
std::optional<Op> out_of_place_op(const ir::Node& node) {
  static const std::map<std::string_view, Op> kOps = {
      {"iadd", Op::Add},     {"isub", Op::Sub},         {"imul", Op::Mul},   {"itruediv", Op::Div},
      {"__iadd__", Op::Add}, {"__isub__", Op::Sub},     {"__imul__", Op::Mul}, {"__itruediv__", Op::Div},
      {"add_", Op::Add},     {"sub_", Op::Sub},         {"mul_", Op::Mul},   {"div_", Op::Div},
      {"pow_", Op::Pow},     {"clamp_", Op::Clamp},     {"relu_", Op::Relu}, {"sigmoid_", Op::Sigmoid},
      {"tanh_", Op::Tanh},   {"neg_", Op::Neg},         {"abs_", Op::Abs},   {"exp_", Op::Exp},
      {"log_", Op::Log},     {"sqrt_", Op::Sqrt},       {"rsqrt_", Op::Rsqrt}, {"reciprocal_", Op::Reciprocal},
      {"erf_", Op::Erf},     {"sin_", Op::Sin},         {"cos_", Op::Cos},   {"floor_", Op::Floor},
      {"ceil_", Op::Ceil},   {"trunc_", Op::Trunc},     {"round_", Op::Round}, {"sign_", Op::Sign}};
  if (node.op != Op::TorchCall) return std::nullopt;
  const std::string_view callable = node.target;
  const size_t dot = callable.rfind('.');
  if (dot == std::string_view::npos) return std::nullopt;
  const std::string_view module = callable.substr(0, dot), name = callable.substr(dot + 1);
  auto it = kOps.find(name);
  if (it == kOps.end()) return std::nullopt;
  // Operators live in `operator`, dunders and methods on torch.Tensor, functions (`torch.relu_`) in torch.
  const bool op_form = name.front() == 'i';
  const bool dunder = name.front() == '_';
  if (op_form ? module != "operator" : dunder ? module != "torch.Tensor" : module != "torch.Tensor" && module != "torch")
    return std::nullopt;
  return it->second;
}

// Whether the node's results are new storage, never an alias of what it reads. Python's arithmetic
// operators on tensors (`0 + x`, as sum() over a list of tensors starts) always make a new tensor.
bool returns_fresh(const ir::Node& node) {
  static constexpr std::array<std::string_view, 6> kOperators = {
      "operator.add", "operator.sub", "operator.mul", "operator.truediv", "operator.neg", "operator.matmul"};
  if (node.mutates_first_arg()) return false;
  return ir::returns_new_tensors(node.callable()) ||
         std::find(kOperators.begin(), kOperators.end(), node.callable()) != kOperators.end();
}

// A view op of one tensor and literals, with one result (reshape, slice, select, flatten, getitem with
// ints and slices, permute, ...: the View family; not split/chunk, which return several).
bool is_plain_view(const ir::Node& node) {
  if (node.op == Op::TorchCall || ir::op_info(node.op).family != ir::OpFamily::View || node.results.size() != 1 ||
      node.args.empty() || node.args.front().kind != Arg::Kind::Value)
    return false;
  std::function<bool(const Arg&)> literal = [&](const Arg& a) {
    return a.kind != Arg::Kind::Value && std::all_of(a.items.begin(), a.items.end(), literal);
  };
  return std::all_of(node.args.begin() + 1, node.args.end(), literal) &&
         std::all_of(node.kwargs.begin(), node.kwargs.end(), [&](const auto& kw) { return literal(kw.second); });
}

// Whether the type's strides do not increase from one dim to the next (dims of size 1 aside): an
// out-of-place op on it is laid out row-major, as the ops after it saw it (a slice or a flatten of a
// contiguous tensor, not a transpose).
bool row_major_order(const ir::TensorType& t) {
  std::optional<int64_t> last;
  for (size_t d = 0; d < t.sizes.size(); ++d) {
    if (!t.sizes[d].is_constant() || !t.strides[d].is_constant()) return false;
    if (t.sizes[d].constant() == 1) continue;
    if (last && t.strides[d].constant() > *last) return false;
    last = t.strides[d].constant();
  }
  return true;
}

// Every tensor the node reads besides the written one has its dtype; the rest are literals.
bool reads_only_written_dtype(const ir::Graph& g, const ir::Node& node) {
  const ir::DType written = g.value(node.args.front().value).type.dtype;
  auto same = [&](const Arg& a) {
    return a.kind == Arg::Kind::Literal || (a.kind == Arg::Kind::Value && g.value(a.value).type.dtype == written);
  };
  return std::all_of(node.args.begin(), node.args.end(), same) &&
         std::all_of(node.kwargs.begin(), node.kwargs.end(), [&](const auto& kw) { return same(kw.second); });
}

// How this pass can make the node out of place, if it is a write it rewrites (on its first argument).
enum class Write { None, Flag, CoreOp };

Write write_kind(const ir::Graph& g, ir::Node& node) {
  if (node.args.empty() || node.args.front().kind != Arg::Kind::Value || node.results.size() != 1)
    return Write::None;
  if (inplace_flag(node) != node.kwargs.end()) return Write::Flag;
  return out_of_place_op(node) && reads_only_written_dtype(g, node) ? Write::CoreOp : Write::None;
}

void each_value(const Arg& a, const std::function<void(ValueId)>& f) {
  if (a.kind == Arg::Kind::Value) f(a.value);
  for (const Arg& item : a.items) each_value(item, f);
}

void remap(Arg& a, const std::function<ValueId(ValueId)>& now) {
  if (a.kind == Arg::Kind::Value) a.value = now(a.value);
  for (Arg& item : a.items) remap(item, now);
}

// The one slice a getitem takes of a tensor of constant sizes (`x[a:b]`, `x[:, a:b]`: slices of step 1,
// all but one whole), as its dim and Python's clamped bounds; nullopt for any other index.
struct SliceIndex {
  int64_t dim, start, end;
};

std::optional<SliceIndex> one_slice(const ir::Graph& g, const ir::Node& node) {
  if (node.op != Op::Getitem || node.args.size() != 2 || !node.kwargs.empty() ||
      node.args[0].kind != Arg::Kind::Value)
    return std::nullopt;
  const Arg& index = node.args[1];
  const std::vector<Arg> items = index.kind == Arg::Kind::Tuple ? index.items : std::vector<Arg>{index};
  const ir::TensorType& t = g.value(node.args[0].value).type;
  if (items.size() > t.sizes.size()) return std::nullopt;
  std::optional<SliceIndex> found;
  for (size_t d = 0; d < items.size(); ++d) {
    const ir::Slice* s = items[d].kind == Arg::Kind::Literal ? std::get_if<ir::Slice>(&items[d].literal) : nullptr;
    if (!s || s->step.value_or(1) != 1 || !t.sizes[d].is_constant()) return std::nullopt;
    const int64_t size = t.sizes[d].constant();
    auto bound = [size](std::optional<int64_t> v, int64_t dflt) {
      if (!v) return dflt;
      return std::clamp<int64_t>(*v < 0 ? *v + size : *v, 0, size);
    };
    const int64_t start = bound(s->start, 0), end = std::max(bound(s->stop, size), start);
    if (start == 0 && end == size) continue;
    if (found || start == end) return std::nullopt;
    found = SliceIndex{static_cast<int64_t>(d), start, end};
  }
  return found;
}

// The constant `x.zero_()` or `x.fill_(v)` writes, or nullopt.
std::optional<double> fill_value(const ir::Node& node) {
  if (node.op != Op::TorchCall || !node.kwargs.empty() || node.results.size() != 1 || node.args.empty() ||
      node.args[0].kind != Arg::Kind::Value)
    return std::nullopt;
  if (node.target == "torch.Tensor.zero_" && node.args.size() == 1) return 0.0;
  if (node.target == "torch.Tensor.fill_" && node.args.size() == 2) return number_literal(node.args[1]);
  return std::nullopt;
}

// Constant fills of a slice of a value the graph made in storage of its own (`b = b.clone();
// b[n:2 * n].zero_()`: torchvision's Swin V2 zeroes the key part of its qkv bias so) made functional:
// the value after the write is cat(b[:start], full(v), b[end:]) along the slice's dim, and every later
// read of b reads it — what eager reads, in ops the joint differentiates and lowering fuses. Only where
// nothing else can see the write: the view is read by the write alone, the write's result by nothing,
// and every node that read b before the write (other than such views) returned new storage, so no
// alias of b made before it must see it.
bool slice_fills_as_cats(ir::Graph& g) {
  struct Fill {
    ValueId base, view;
    SliceIndex slice;
    double value;
  };
  const std::vector<ir::Node>& nodes = g.nodes();
  const size_t n = g.values().size();
  std::vector<int64_t> producer(n, -1);
  std::vector<std::vector<size_t>> readers(n);
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (ValueId r : nodes[i].results) producer[static_cast<size_t>(r)] = static_cast<int64_t>(i);
    auto read = [&](ValueId v) {
      std::vector<size_t>& rs = readers[static_cast<size_t>(v)];
      if (rs.empty() || rs.back() != i) rs.push_back(i);
    };
    for (const Arg& a : nodes[i].args) each_value(a, read);
    for (const auto& kw : nodes[i].kwargs) each_value(kw.second, read);
  }
  std::vector<bool> output(n, false);
  for (ValueId out : g.outputs()) output[static_cast<size_t>(out)] = true;
  std::map<size_t, Fill> fills;  // by the write's position
  std::vector<bool> fill_view(nodes.size(), false);
  for (size_t w = 0; w < nodes.size(); ++w) {
    const std::optional<double> value = fill_value(nodes[w]);
    if (!value) continue;
    const ValueId view = nodes[w].args[0].value, result = nodes[w].results[0];
    const int64_t pv = producer[static_cast<size_t>(view)];
    if (pv < 0 || readers[static_cast<size_t>(view)] != std::vector<size_t>{w} || output[static_cast<size_t>(view)] ||
        !readers[static_cast<size_t>(result)].empty() || output[static_cast<size_t>(result)])
      continue;
    const std::optional<SliceIndex> slice = one_slice(g, nodes[static_cast<size_t>(pv)]);
    if (!slice) continue;
    const ValueId base = nodes[static_cast<size_t>(pv)].args[0].value;
    const int64_t pb = producer[static_cast<size_t>(base)];
    if (pb < 0 || !returns_fresh(nodes[static_cast<size_t>(pb)])) continue;
    const ir::TensorType& bt = g.value(base).type;
    if (ir::is_integral(bt.dtype) && *value != static_cast<double>(static_cast<int64_t>(*value))) continue;
    // The cat that replaces the base is row-major: the ops after it were typed with the base's layout
    // (a clone of a transposed view keeps the transpose: fuzz seed 1708378).
    if (!row_major_order(bt)) continue;
    bool unseen = true;
    for (size_t r : readers[static_cast<size_t>(base)])
      if (r < w && r != static_cast<size_t>(pv) && !fill_view[r] && !returns_fresh(nodes[r])) unseen = false;
    if (!unseen) continue;
    fill_view[static_cast<size_t>(pv)] = true;
    fills.emplace(w, Fill{base, view, *slice, *value});
  }
  if (fills.empty()) return false;
  Rewriter rw(g);
  for (size_t i = 0; i < nodes.size(); ++i) {
    auto it = fills.find(i);
    if (it == fills.end()) {
      rw.copy(nodes[i]);
      continue;
    }
    const Fill& f = it->second;
    const ValueId base = rw.mapped(f.base);
    const ir::TensorType& t = g.value(f.base).type;
    const int64_t size = t.sizes[static_cast<size_t>(f.slice.dim)].constant();
    const ValueId filled =
        build::full(rw, to_exprs(const_sizes(g.value(f.view).type)), f.value, t.dtype, t.device);
    std::vector<ValueId> pieces;
    if (f.slice.start > 0) pieces.push_back(build::slice(rw, base, f.slice.dim, 0, f.slice.start, 1));
    pieces.push_back(filled);
    if (f.slice.end < size) pieces.push_back(build::slice(rw, base, f.slice.dim, f.slice.end, size, 1));
    rw.bind(f.base, build::cat(rw, pieces, f.slice.dim, t));
    rw.bind(nodes[i].results[0], filled);
  }
  g = rw.finish();
  return true;
}

}  // namespace

bool writes_out_of_place(ir::Graph& g) {
  const bool filled = slice_fills_as_cats(g);
  const size_t n = g.values().size();
  constexpr ValueId kNone = -1;
  // First pass: each value's root (kNone: not storage of the graph's own), and which roots some node
  // other than a rewritable write on one of their names may alias before such a write.
  std::vector<ValueId> root(n, kNone);
  std::vector<bool> alias_taken(n, false), aliased(n, false);
  std::vector<Write> kinds;
  // For views of a root's storage (below): each value's storage root whatever names it (kNone: none or
  // several), where each value is made and last read, and per view the positions of its first and last
  // writes.
  std::vector<ValueId> storage(n, kNone), view_of(n, kNone);
  std::vector<int64_t> made(n, -1), last_read(n, -1), first_write(n, -1), last_write(n, -1);
  std::vector<bool> tangled(n, false);
  int64_t pos = 0;
  for (ir::Node& node : g.mutable_nodes()) {
    const Write kind = write_kind(g, node);
    kinds.push_back(kind);
    for (ValueId r : node.results) made[static_cast<size_t>(r)] = pos;
    auto read = [&](ValueId v) { last_read[static_cast<size_t>(v)] = pos; };
    for (const Arg& a : node.args) each_value(a, read);
    for (const auto& kw : node.kwargs) each_value(kw.second, read);
    ++pos;
    if (kind == Write::None && returns_fresh(node)) {
      for (ValueId r : node.results) root[static_cast<size_t>(r)] = storage[static_cast<size_t>(r)] = r;
      continue;
    }
    // A write's result names its first argument's storage; its other arguments it only reads.
    if (kind != Write::None) {
      const ValueId written = node.args.front().value, result = node.results.front();
      const ValueId r = root[static_cast<size_t>(written)];
      root[static_cast<size_t>(result)] = r;
      storage[static_cast<size_t>(result)] = storage[static_cast<size_t>(written)];
      if (r != kNone && alias_taken[static_cast<size_t>(r)]) aliased[static_cast<size_t>(r)] = true;
      const ValueId view = view_of[static_cast<size_t>(written)];
      if (r == kNone && view != kNone) {
        view_of[static_cast<size_t>(result)] = view;
        if (first_write[static_cast<size_t>(view)] < 0) first_write[static_cast<size_t>(view)] = pos - 1;
        last_write[static_cast<size_t>(view)] = pos - 1;
      }
      continue;
    }
    auto mark = [&](ValueId v) {
      if (root[static_cast<size_t>(v)] != kNone) alias_taken[static_cast<size_t>(root[static_cast<size_t>(v)])] = true;
    };
    for (const Arg& a : node.args) each_value(a, mark);
    for (const auto& kw : node.kwargs) each_value(kw.second, mark);
    // Any other node's results may alias the storage of what it reads.
    ValueId source = kNone;
    auto join = [&](ValueId v) {
      const ValueId s = storage[static_cast<size_t>(v)];
      if (s == kNone) return;
      if (source != kNone && source != s) tangled[static_cast<size_t>(s)] = tangled[static_cast<size_t>(source)] = true;
      source = s;
    };
    for (const Arg& a : node.args) each_value(a, join);
    for (const auto& kw : node.kwargs) each_value(kw.second, join);
    for (ValueId r : node.results) storage[static_cast<size_t>(r)] = source;
    if (source != kNone && is_plain_view(node)) view_of[static_cast<size_t>(node.results.front())] = node.results.front();
  }
  for (ValueId out : g.outputs()) last_read[static_cast<size_t>(out)] = pos;
  // A view of a root's storage (`x = cat(...)[:, :k]; x += y`, `flatten(pool(x))` then
  // `Dropout(inplace=True)`) written in place is rewritten as a root of its own when, from its first
  // write on, nothing reads the storage but the view's own names: no other alias made before the
  // first write is read at or after it, and none is made between its writes (a view of the final
  // value, made after the last write, reads what eager's would). The root itself is then dead, so
  // writing a new value instead of into it is what eager computes.
  std::vector<bool> promoted(n, false);
  for (size_t v = 0; v < n; ++v) {
    if (view_of[v] != static_cast<ValueId>(v) || first_write[v] < 0) continue;
    const ValueId r = storage[v];
    bool alone = r != kNone && !tangled[static_cast<size_t>(r)] && row_major_order(g.value(static_cast<ValueId>(v)).type);
    for (size_t a = 0; a < n && alone; ++a) {
      if (storage[a] != r || view_of[a] == static_cast<ValueId>(v)) continue;
      alone = !(made[a] < first_write[v] && last_read[a] >= first_write[v]) &&
              !(made[a] > first_write[v] && made[a] < last_write[v]);
    }
    if (!alone) continue;
    promoted[v] = true;
    for (size_t a = 0; a < n; ++a)
      if (view_of[a] == static_cast<ValueId>(v)) root[a] = static_cast<ValueId>(v);
  }
  auto rewritable = [&](ValueId v) {
    const ValueId r = root[static_cast<size_t>(v)];
    return r != kNone && !aliased[static_cast<size_t>(r)];
  };

  // Second pass: rewrite, and bind each read of a name to its storage's latest value.
  bool changed = false, core_ops = false;
  std::vector<ValueId> current(n);  // per root: the latest write's result; else the value itself
  for (size_t v = 0; v < n; ++v) current[v] = static_cast<ValueId>(v);
  const std::function<ValueId(ValueId)> now = [&](ValueId v) {
    return rewritable(v) ? current[static_cast<size_t>(root[static_cast<size_t>(v)])] : v;
  };
  size_t i = 0;
  for (ir::Node& node : g.mutable_nodes()) {
    const Write kind = kinds[i++];
    for (Arg& a : node.args) remap(a, now);
    for (auto& kw : node.kwargs) remap(kw.second, now);
    const ValueId result = node.results.empty() ? kNone : node.results.front();
    if (kind == Write::None || !rewritable(result)) continue;
    if (kind == Write::Flag) {
      node.kwargs.erase(inplace_flag(node));  // canonical form: `inplace` only when not its default
    } else {
      node.op = *out_of_place_op(node);
      node.target.clear();
      core_ops = true;
    }
    current[static_cast<size_t>(root[static_cast<size_t>(result)])] = result;
    changed = true;
  }
  std::vector<ValueId> outputs = g.outputs();
  for (ValueId& out : outputs) out = now(out);
  g.set_outputs(std::move(outputs));
  if (core_ops) canonicalize(g);  // binds the core ops' arguments to their parameters
  // A write on a view made out of place returns a new tensor: its layout is the op's own (row-major,
  // as the view's order is), not the view's strides.
  for (const ir::Node& node : g.nodes()) {
    if (node.results.size() != 1) continue;
    const ValueId result = node.results.front(), r = root[static_cast<size_t>(result)];
    if (r == kNone || !promoted[static_cast<size_t>(r)] || result == r) continue;
    ir::TensorType& type = g.mutable_values()[static_cast<size_t>(result)].type;
    std::optional<std::vector<ir::TensorType>> ruled;
    if (node.op != Op::TorchCall)
      ruled = shapes::infer_result_types(node.op, shapes::operands_of(node.args, g), shapes::operands_of(node.kwargs, g),
                                         true, ir::DType::Float32);
    type.strides = ruled && ruled->size() == 1 ? ruled->front().strides : ir::contiguous_strides(type.sizes);
  }
  return changed || filled;
}

}  // namespace ember::passes
