// Extern calls: every node lowering does not turn into kernels (matmul, convolution, attention,
// embedding, in-place and random ops, unknown torch callables, primitives in a form the families
// refuse) runs through torch, with its literals as written and its tensor arguments as buffers.
//
// A tensor argument must be a real tensor: a realized value passes its own buffer, a view passes
// a View buffer of its base (so an in-place call writes where eager writes), and a view that
// cannot alias (a copying reshape) passes a copy. Results are Extern buffers typed as the graph
// says. Order is the graph's: kernels that read a buffer before an in-place call are earlier
// steps, and nothing is computed lazily except views, which alias in eager too.
#include "lowering/lower_internal.h"

namespace ember::lowering::detail {

namespace {

ir::Arg convert_arg(Lowerer& L, const ir::Arg& a) {
  switch (a.kind) {
    case ir::Arg::Kind::Value: return ir::Arg::of_value(L.materialize(a.value, /*for_output=*/false));
    case ir::Arg::Kind::Literal: return a;
    case ir::Arg::Kind::List:
    case ir::Arg::Kind::Tuple: {
      ir::Arg out = a;
      for (ir::Arg& item : out.items) item = convert_arg(L, item);
      return out;
    }
  }
  throw std::logic_error("lowering: unknown argument kind");
}

}  // namespace

void lower_extern(Lowerer& L, const ir::Node& node) {
  loop_ir::ExternCall call;
  call.callable = std::string(node.callable());
  for (const ir::Arg& a : node.args) call.args.push_back(convert_arg(L, a));
  for (const auto& kw : node.kwargs) call.kwargs.emplace_back(kw.first, convert_arg(L, kw.second));
  call.result_form = node.result_form;
  call.mutates_first_arg = node.mutates_first_arg();
  for (ir::ValueId r : node.results) {
    const ir::TensorType& t = L.type(r);
    loop_ir::Buffer b;
    b.kind = loop_ir::Buffer::Kind::Extern;
    b.dtype = t.dtype;
    b.sizes = t.sizes;
    b.strides = t.strides;
    b.device = t.device;
    BufferId id = L.program().add_buffer(std::move(b));
    call.results.push_back(id);
    L.bind_realized(r, id);
  }
  L.program().steps.push_back(
      loop_ir::Step{loop_ir::Step::Kind::Extern, static_cast<int>(L.program().externs.size())});
  L.program().externs.push_back(std::move(call));
}

}  // namespace ember::lowering::detail
