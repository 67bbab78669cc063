// Reductions (sum, amax, amin, var_mean) over any set of dims: one kernel whose ranges are the
// result's sizes (kept dims; keepdim's size-1 dims read index 0), one loop over the reduced
// extents, and a final loop without ranges that stores. A sum, max or min over at most 8 elements
// of dims other than the last is a pointwise kernel instead (lower_unrolled).
//
// The operand is cast to the result's computation dtype before it accumulates, so a sum of
// f16/bf16 accumulates in f32 and a sum of bool or int32 that the graph did not convert still
// accumulates as the result dtype, as torch does. var_mean keeps one Welford accumulator
// (welford_mean / welford_m2) and divides m2 by max(N - correction, 0), torch's formula: no
// degrees of freedom left gives inf (or nan when m2 is 0), as in eager.
#include <algorithm>

#include "lowering/lower_internal.h"

namespace ember::lowering::detail {

namespace {

using loop_ir::NodeId;

struct ReductionForm {
  ir::ValueId x = -1;
  std::vector<int64_t> dims;  // sorted, distinct, in range
  bool keepdim = false;
  int64_t correction = 1;     // var_mean only
};

// `arg` positionally at `pos`, else the keyword `name`, else nullptr.
const ir::Arg* find_arg(const ir::Node& node, size_t pos, const char* name) {
  if (pos < node.args.size()) return &node.args[pos];
  for (const auto& kw : node.kwargs)
    if (kw.first == name) return &kw.second;
  return nullptr;
}

std::string parse_form(Lowerer& L, const ir::Node& node, ReductionForm& form) {
  if (node.args.empty() || node.args[0].kind != ir::Arg::Kind::Value) return "expects a tensor operand";
  form.x = node.args[0].value;
  int64_t rank = static_cast<int64_t>(L.type(form.x).sizes.size());
  const ir::Arg* dims = find_arg(node, 1, "dim");
  if (!dims) return "expects explicit dims";
  std::optional<std::vector<int64_t>> list = int_list(*dims);
  if (!list || list->empty()) return "expects a non-empty list of int dims";
  for (int64_t d : *list) {
    int64_t n = d < 0 ? d + rank : d;
    if (n < 0 || n >= rank) return "a dim out of range";
    form.dims.push_back(n);
  }
  std::sort(form.dims.begin(), form.dims.end());
  if (std::adjacent_find(form.dims.begin(), form.dims.end()) != form.dims.end()) return "a repeated dim";
  if (const ir::Arg* k = find_arg(node, node.op == ir::Op::VarMean ? 99 : 2, "keepdim")) {
    std::optional<bool> b = bool_literal(*k);
    if (!b) return "keepdim is not a bool literal";
    form.keepdim = *b;
  }
  size_t allowed_args = node.op == ir::Op::VarMean ? 2 : 3;
  if (node.args.size() > allowed_args) return "unexpected arguments";
  for (const auto& kw : node.kwargs) {
    if (kw.first == "keepdim" || kw.first == "dim") continue;
    if (node.op == ir::Op::VarMean && kw.first == "correction") {
      std::optional<int64_t> c = int_literal(kw.second);
      if (!c) return "correction is not an int literal";
      form.correction = *c;
      continue;
    }
    return "unexpected keyword " + kw.first;
  }
  return "";
}

// The index of x for result point `out` and reduced point `r` (one entry per reduced dim).
Index operand_index(const ReductionForm& form, size_t rank, const Index& out, const Index& r) {
  Index in_index;
  size_t next_reduced = 0, next_kept = 0;
  for (size_t d = 0; d < rank; ++d) {
    bool is_reduced = next_reduced < form.dims.size() && form.dims[next_reduced] == static_cast<int64_t>(d);
    if (is_reduced) {
      in_index.push_back(r[next_reduced++]);
      if (form.keepdim) ++next_kept;
    } else {
      in_index.push_back(out.at(next_kept++));
    }
  }
  return in_index;
}

// A sum, max or min over a few elements of dims other than the last -- a constant count from 1 to
// kUnrollLimit: a grouped-query model's gradient summed over the repeated heads (2 to 8) -- is a
// pointwise kernel combining them one by one, in the loop's order. The scheduler then inlines it into
// its consumer, where a reduction kernel would stay one more kernel: its outer ranges are not its
// consumer's (Inductor unrolls reductions up to 8 elements the same way). A reduction over the last dim
// stays a loop however short: it is a row's, and fuses with the row's other loops as they are (a
// softmax over 8 elements is one kernel; unrolled, its sum would be refused inlining into the
// division, 8 loads each recomputing an exp).
constexpr int64_t kUnrollLimit = 8;

std::optional<int64_t> small_count(const ReductionForm& form, size_t rank, const std::vector<Expr>& reduced) {
  if (form.dims.back() == static_cast<int64_t>(rank) - 1) return std::nullopt;
  int64_t n = 1;
  for (const Expr& e : reduced) {
    if (!e.is_constant() || e.constant() <= 0 || e.constant() > kUnrollLimit) return std::nullopt;
    n *= e.constant();
  }
  if (n > kUnrollLimit) return std::nullopt;
  return n;
}

void lower_unrolled(Lowerer& L, const ir::Node& node, const ReductionForm& form, ScalarOp op, DType cdt,
                    const std::vector<Expr>& reduced, int64_t count) {
  const ScalarOp combine = op == ScalarOp::ReduceSum ? ScalarOp::Add
                           : op == ScalarOp::ReduceMax ? ScalarOp::Maximum
                                                       : ScalarOp::Minimum;
  KernelBuilder kb(L.program(), L.type(node.results[0]).sizes);
  Index out = kb.outer_vars();
  const size_t rank = L.type(form.x).sizes.size();
  NodeId acc = -1;
  for (int64_t k = 0; k < count; ++k) {
    Index r;  // k's coordinates over the reduced extents, the last fastest (the loop's order)
    int64_t rest = k;
    for (size_t j = reduced.size(); j-- > 0;) {
      r.insert(r.begin(), Expr(rest % reduced[j].constant()));
      rest /= reduced[j].constant();
    }
    NodeId x = kb.cast(L.load_value(kb, form.x, operand_index(form, rank, out, r)), cdt);
    acc = acc < 0 ? x : kb.binary(combine, acc, x, cdt);
  }
  BufferId buf = L.new_result_buffer(node.results[0]);
  kb.store(buf, out, acc);
  kb.finish();
  L.bind_realized(node.results[0], buf);
}

}  // namespace

std::string lower_reduction(Lowerer& L, const ir::Node& node) {
  ScalarOp op;
  if (node.op == ir::Op::Sum) {
    op = ScalarOp::ReduceSum;
  } else if (node.op == ir::Op::Amax) {
    op = ScalarOp::ReduceMax;
  } else if (node.op == ir::Op::Amin) {
    op = ScalarOp::ReduceMin;
  } else if (node.op == ir::Op::VarMean) {
    op = ScalarOp::WelfordMean;
  } else {
    return "not a reduction primitive";  // mean, var, softmax, ...: the decompose pass expands them
  }
  ReductionForm form;
  if (std::string why = parse_form(L, node, form); !why.empty()) return why;
  bool var_mean = node.op == ir::Op::VarMean;
  if (node.results.size() != (var_mean ? 2u : 1u)) return "unexpected result count";
  DType rdt = L.type(node.results[0]).dtype;
  DType cdt = compute_dtype(rdt);
  if (var_mean && !ir::is_floating(rdt)) return "var_mean of a non-float result";
  if (op == ScalarOp::ReduceSum && cdt == DType::Bool) return "a bool sum";

  const std::vector<Expr>& in_sizes = L.type(form.x).sizes;
  std::vector<Expr> reduced;
  for (int64_t d : form.dims) reduced.push_back(in_sizes[d]);

  if (!var_mean) {
    if (std::optional<int64_t> count = small_count(form, in_sizes.size(), reduced)) {
      lower_unrolled(L, node, form, op, cdt, reduced, *count);
      return "";
    }
  }
  KernelBuilder kb(L.program(), L.type(node.results[0]).sizes);
  Index out = kb.outer_vars();
  kb.add_loop(reduced);
  NodeId x = kb.cast(L.load_value(kb, form.x, operand_index(form, in_sizes.size(), out, kb.loop_vars())), cdt);

  if (!var_mean) {
    NodeId acc = kb.reduce(op, x);
    kb.add_loop({});
    BufferId buf = L.new_result_buffer(node.results[0]);
    kb.store(buf, out, acc);
    kb.finish();
    L.bind_realized(node.results[0], buf);
    return "";
  }
  NodeId mean = kb.reduce(ScalarOp::WelfordMean, x);
  NodeId m2 = kb.reduce(ScalarOp::WelfordM2, x);
  kb.add_loop({});
  Expr count = 1;
  for (const Expr& e : reduced) count = count * e;
  Expr dof = max(count - Expr(form.correction), Expr(0));
  NodeId denom = dof.is_constant() ? kb.constant(static_cast<double>(dof.constant()), cdt)
                                   : kb.cast(kb.index_value(dof), cdt);
  NodeId var = kb.binary(ScalarOp::Div, m2, denom, cdt);
  BufferId var_buf = L.new_result_buffer(node.results[0]);
  BufferId mean_buf = L.new_result_buffer(node.results[1]);
  kb.store(var_buf, out, var);
  kb.store(mean_buf, out, mean);
  kb.finish();
  L.bind_realized(node.results[0], var_buf);
  L.bind_realized(node.results[1], mean_buf);
  return "";
}

}  // namespace ember::lowering::detail
