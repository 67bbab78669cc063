// A matmul and the bias added to it as one torch call: decompose turns `F.linear(x, w, b)` into
// `matmul(x, permute(w)) + b` (so the add can fuse with what follows it), but eager runs linear as
// one addmm with the bias inside the GEMM, while the decomposed form ran the matmul, then a
// kernel reading and writing the whole result again only to add the bias (vit_attention's qkv
// projection: 1.8 MB read and written per call). When lowering meets `add(mm, b)` whose matmul
// result has no other use, it rewrites the matmul's extern call into `torch.nn.functional.linear(x,
// B^T, b)` (B^T a View of the matmul's right operand: no copy) and binds the add's value to its
// result: what eager calls, with eager's bits.
//
// Needs (else the add lowers as before): the matmul (`torch.matmul` or `torch.mm`) lowered to an
// extern call with a left operand of rank >= 2 and a 2-d right one; the bias a 1-d graph input (a
// buffer that exists before the matmul runs) of the result's last size, not broadcast otherwise;
// one float dtype (f32 or f64: f16/bf16 linear with a bias never decomposes); the matmul result
// used only by this add and not returned; no in-place op after the matmul.
//
// After lowering, a matmul (or linear) extern of a [..., M, K] operand whose leading dims merge with M
// by their strides and a [K, N] one calls torch.mm (linear) on the [B*M, K] view and returns a
// [B*M, N] result that the [..., M, N] buffer views (fold_matmul_batch_dims): torch.matmul folds the
// same way, through reshape, view, mm and _unsafe_view dispatches on every call, which was host time
// per step on a GPU (LLaMA's 87 matmuls a step, 2026-12-03 profile). Same call, same bits. A result
// the program returns is not a view for the caller: an extern `aten._unsafe_view` right after the call
// makes it the [..., M, N] tensor (eager's matmul ends with the same call, so the caller sees what
// eager returns: no view whose in-place writes autograd would refuse); the remaining 32 matmuls of a
// LLaMA training forward, whose results the backward saves, cost 21 us of host time each that way on
// the H200's host (2026-12-04 profile: aten::matmul 55.8 us a call against aten::mm's 34.9).
#include <algorithm>
#include <map>
#include <stdexcept>

#include "lowering/lower_internal.h"

namespace ember::lowering::detail {

namespace {

bool float_dtype(DType dt) { return dt == DType::Float32 || dt == DType::Float64; }

}  // namespace

bool lower_linear_bias(Lowerer& L, const ir::Node& add) {
  const ir::Graph& g = L.graph();
  if (add.op != ir::Op::Add || add.args.size() != 2 || !add.kwargs.empty() || add.results.size() != 1) return false;
  for (int side = 0; side < 2; ++side) {
    const ir::Arg& product = add.args[static_cast<size_t>(side)];
    const ir::Arg& bias = add.args[static_cast<size_t>(1 - side)];
    if (product.kind != ir::Arg::Kind::Value || bias.kind != ir::Arg::Kind::Value) continue;
    const ir::NodeId producer = g.value(product.value).producer;
    if (producer < 0) continue;
    const ir::Node& mm = g.node(producer);
    if ((mm.op != ir::Op::Matmul && mm.op != ir::Op::Mm) || mm.args.size() != 2 || !mm.kwargs.empty()) continue;
    const ir::TensorType& result = L.type(add.results[0]);
    const ir::TensorType& p = L.type(product.value);
    const ir::TensorType& b = L.type(bias.value);
    const ir::TensorType& right = L.type(mm.args[1].value);
    const size_t left_rank = L.type(mm.args[0].value).sizes.size();
    if (!float_dtype(result.dtype) || p.dtype != result.dtype || b.dtype != result.dtype ||
        left_rank < 2 || right.sizes.size() != 2 || b.sizes.size() != 1 ||
        b.sizes[0] != p.sizes.back() || result.sizes != p.sizes || result.strides != p.strides)
      continue;
    if (L.uses(product.value) != 1 || L.is_output(product.value) || L.mutation_after(mm.id)) continue;
    const Lazy& bias_lazy = L.lazy(bias.value);
    const loop_ir::Buffer& bias_buffer = L.program().buffers.at(static_cast<size_t>(bias_lazy.buffer));
    if (bias_buffer.kind != loop_ir::Buffer::Kind::Input || bias_lazy.remap) continue;
    // The matmul's extern call: the one whose single result is the product's buffer.
    const BufferId product_buffer = L.lazy(product.value).buffer;
    std::vector<loop_ir::ExternCall>& externs = L.program().externs;
    auto call = std::find_if(externs.begin(), externs.end(), [&](const loop_ir::ExternCall& e) {
      return e.results.size() == 1 && e.results[0] == product_buffer;
    });
    if (call == externs.end() || call->args.size() != 2 || call->args[1].kind != ir::Arg::Kind::Value) continue;
    const loop_ir::Buffer& right_buffer = L.program().buffers.at(static_cast<size_t>(call->args[1].value));
    loop_ir::Buffer transposed;
    transposed.kind = loop_ir::Buffer::Kind::View;
    transposed.dtype = right_buffer.dtype;
    transposed.sizes = {right_buffer.sizes[1], right_buffer.sizes[0]};
    transposed.strides = {right_buffer.strides[1], right_buffer.strides[0]};
    transposed.base = right_buffer.id;
    transposed.device = right_buffer.device;
    call->callable = "torch.nn.functional.linear";
    call->args = {call->args[0], ir::Arg::of_value(L.program().add_buffer(std::move(transposed))),
                  ir::Arg::of_value(bias_lazy.buffer)};
    L.bind_realized(add.results[0], product_buffer);
    return true;
  }
  return false;
}

namespace {

// Dims 0..rank-2 of `b` but those of size 1, which walk no memory whatever their stride says (a [T, 1, C]
// transpose of [1, T, C]: torch.matmul does not fold it and runs bmm over T copies of the weight's view).
std::vector<size_t> row_dims(const loop_ir::Buffer& b) {
  std::vector<size_t> dims;
  for (size_t k = 0; k + 1 < b.sizes.size(); ++k)
    if (b.sizes[k] != sym::Expr(int64_t{1})) dims.push_back(k);
  return dims;
}

// Those dims walk memory as one (each stride the next one's times its size).
bool leading_dims_merge(const loop_ir::Buffer& b) {
  const std::vector<size_t> dims = row_dims(b);
  for (size_t i = 0; i + 1 < dims.size(); ++i)
    if (b.strides[dims[i]] != b.strides[dims[i + 1]] * b.sizes[dims[i + 1]]) return false;
  return true;
}

// `b`'s [..., M, X] folded to [rows, X] (rows = the product of its leading sizes), as a buffer of `kind`.
loop_ir::Buffer folded_matrix(const loop_ir::Buffer& b, const sym::Expr& rows, loop_ir::Buffer::Kind kind) {
  const size_t rank = b.sizes.size();
  const std::vector<size_t> dims = row_dims(b);
  loop_ir::Buffer m;
  m.kind = kind;
  m.dtype = b.dtype;
  m.sizes = {rows, b.sizes[rank - 1]};
  // One row: any stride; the dense one.
  m.strides = {dims.empty() ? b.sizes[rank - 1] * b.strides[rank - 1] : b.strides[dims.back()], b.strides[rank - 1]};
  m.device = b.device;
  return m;
}

}  // namespace

void fold_matmul_batch_dims(loop_ir::Program& program) {
  std::map<BufferId, BufferId> folded;  // an operand's [B*M, K] view, shared by the calls that read it
  for (size_t e = 0; e < program.externs.size(); ++e) {
    loop_ir::ExternCall& call = program.externs[e];
    if ((call.callable != "torch.matmul" && call.callable != "torch.nn.functional.linear") || call.args.size() < 2 ||
        call.results.size() != 1 || !call.kwargs.empty() || call.mutates_first_arg ||
        call.args[0].kind != ir::Arg::Kind::Value || call.args[1].kind != ir::Arg::Kind::Value)
      continue;
    const loop_ir::Buffer left = program.buffers.at(static_cast<size_t>(call.args[0].value));
    const loop_ir::Buffer& right = program.buffers.at(static_cast<size_t>(call.args[1].value));
    const BufferId result_id = call.results[0];
    const loop_ir::Buffer result = program.buffers.at(static_cast<size_t>(result_id));
    const size_t rank = left.sizes.size();
    if (rank < 3 || right.sizes.size() != 2 || result.kind != loop_ir::Buffer::Kind::Extern ||
        result.sizes.size() != rank || result.strides[rank - 1] != sym::Expr(int64_t{1}) ||
        result.strides[rank - 2] != result.sizes[rank - 1] || !leading_dims_merge(left) || !leading_dims_merge(result))
      continue;
    const bool returned = std::find(program.outputs.begin(), program.outputs.end(), result_id) != program.outputs.end();
    sym::Expr rows = left.sizes[0];
    for (size_t k = 1; k + 1 < rank; ++k) rows = rows * left.sizes[k];
    auto view = folded.find(left.id);
    if (view == folded.end()) {
      loop_ir::Buffer left2d = folded_matrix(left, rows, loop_ir::Buffer::Kind::View);
      left2d.base = left.id;
      view = folded.emplace(left.id, program.add_buffer(std::move(left2d))).first;
    }
    call.args[0] = ir::Arg::of_value(view->second);
    const BufferId matrix = program.add_buffer(folded_matrix(result, rows, loop_ir::Buffer::Kind::Extern));
    call.results[0] = matrix;
    if (call.callable == "torch.matmul") call.callable = "torch.mm";
    if (!returned) {
      loop_ir::Buffer& viewed = program.buffers.at(static_cast<size_t>(result_id));
      viewed.kind = loop_ir::Buffer::Kind::View;
      viewed.base = matrix;
      viewed.offset = int64_t{0};
      continue;
    }
    // Returned: the next step makes the [..., M, N] result from the matrix, as eager's matmul does.
    std::vector<ir::Arg> sizes;
    for (const sym::Expr& s : result.sizes) sizes.push_back(ir::Arg::of_size(s));
    loop_ir::ExternCall unfold;
    unfold.callable = "torch.ops.aten._unsafe_view";
    unfold.args = {ir::Arg::of_value(matrix), ir::Arg::list(std::move(sizes))};
    unfold.results = {result_id};
    program.externs.insert(program.externs.begin() + static_cast<std::ptrdiff_t>(e + 1), std::move(unfold));
    const int at = static_cast<int>(e);
    auto step = program.steps.end();
    for (auto s = program.steps.begin(); s != program.steps.end(); ++s) {
      if (s->kind != loop_ir::Step::Kind::Extern) continue;
      if (s->index == at) step = s;
      if (s->index > at) ++s->index;
    }
    if (step == program.steps.end()) throw std::logic_error("fold_matmul_batch_dims: extern call " + std::to_string(at) + " runs in no step");
    program.steps.insert(step + 1, loop_ir::Step{loop_ir::Step::Kind::Extern, at + 1});
    ++e;  // past the call just inserted
  }
}

}  // namespace ember::lowering::detail
