// channels_last: an inference graph with 2-d convolutions runs them on channels-last activations.
//
// Why: torch's CPU convolutions (THNN's im2col + gemm and mkldnn alike) are faster on a channels-last
// input (SqueezeNet's: 42 against 63 us a call), and on CUDA cuDNN's NHWC kernels are the tensor-core
// ones; both hand back a channels-last result, which the pointwise kernels, pools and the next
// convolution then read as it lies. Eager keeps a network contiguous unless its input or a permute
// makes it otherwise; Inductor lays conv inputs out channels-last on both devices (its layout
// optimization): SqueezeNet 1.8x eager on the CPU where Ember did 1.07x, ResNet-50 on the H200 1.75x
// where Ember did 1.31x.
//
// Needs: a graph after decompose (primitives and torch calls). Lays out a network: two 2-d
// convolutions or more whose input (4-d, floating, on the CPU or CUDA) has default strides, one of them
// reading a value the graph computes; and in any graph with channels-last values (these, or a model's
// own), lays out the weights and fills read beside them.
// Graphs that write a tensor, draw random numbers or return a value that requires grad are left alone
// (their aliasing and saved values follow the recorded layouts).
// Guarantees: values are as before and the graph's outputs keep their recorded layouts; each such conv
// input is copied channels-last first (once per value), and so is a fill read beside a channels-last
// value (and a weight beside a channels-last input); every node downstream of a value whose layout
// changed takes the layout its shape rule gives for the new operands, and a node the rules do not
// answer for gets its operands back in their recorded layouts (for the nodes after it too).
#include <algorithm>
#include <functional>
#include <map>

#include "passes/builders.h"
#include "passes/passes.h"
#include "shapes/shape_rules.h"

namespace ember::passes {

namespace {

using namespace build;

bool is_conv2d(const ir::Node& node) {
  return node.op == ir::Op::TorchCall && (node.target == "torch.conv2d" || node.target == "torch.nn.functional.conv2d");
}

// The conv input this pass lays out channels-last: 4-d, floating (on CUDA not float64, which cuDNN runs
// contiguous), on the CPU or CUDA, default strides.
bool converts(const ir::TensorType& t) {
  const bool device = t.device.type == "cpu" || (t.device.type == "cuda" && t.dtype != ir::DType::Float64);
  return t.sizes.size() == 4 && is_floating_point(t.dtype) && device &&
         t.strides == contiguous_strides(t.sizes);
}

ir::TensorType channels_last_type(const ir::TensorType& t) {
  ir::TensorType out = t;
  out.strides = ir::channels_last_strides(t.sizes);
  return out;
}

bool is_channels_last(const ir::TensorType& t) {
  return ir::strictly_channels_last(t.sizes, t.strides);
}

// A value the graph fills with one number (`full`): the scheduler computes it where it is read.
bool is_fill(const ir::Graph& graph, ValueId v) {
  const ir::NodeId producer = graph.value(v).producer;
  return producer >= 0 && graph.node(producer).op == ir::Op::Full;
}

// Whether copying a value of type `t` between layouts moves its elements (two dims of size > 1 at least):
// a transpose, where [N, C, 1, 1] is the same memory in either layout.
bool transposes(const ir::TensorType& t) {
  return std::count_if(t.sizes.begin(), t.sizes.end(), [](const sym::Expr& e) { return !e.is_constant() || e.constant() > 1; }) >= 2;
}

// cuDNN on CUDA: the time of its NHWC kernels against its NCHW ones, measured on the H200 (batch 32, float32
// with TF32 and bfloat16; docs/benchmarks.md, "Session 17"): dense convolutions 0.35-1.04 (1x1 about 1, 3x3
// about 0.5), depthwise 0.2-0.6, grouped ones with 4-8 channels a group about 0.55 (one 4-channel shape 1.23),
// with 2 1.3-4.5, with 24 or more 1.5-2.0 (RegNet-Y's). Grouped convolutions of kCudnnSlowGroupWidth channels
// a group or more count as slower (16: between the measured 8 and 24); the rare 2-channel groups are not weighed.
constexpr int64_t kCudnnSlowGroupWidth = 16;
constexpr double kCudnnSlower = 1.8, kCudnnFaster = 0.7;

// A convolution's multiply-adds, its output's elements times its weight's per output channel, from the
// static sizes (a symbolic size counts 1): the weight of its time in the rule above.
double conv_work(const ir::TensorType& out, const ir::TensorType& weight) {
  double work = 1;
  for (const sym::Expr& e : out.sizes) work *= e.is_constant() ? static_cast<double>(e.constant()) : 1.0;
  for (size_t d = 1; d < weight.sizes.size(); ++d)
    work *= weight.sizes[d].is_constant() ? static_cast<double>(weight.sizes[d].constant()) : 1.0;
  return work;
}

// Calls `fn(source value, new argument)` for each tensor operand of a node: its source argument and the
// same argument mapped into the new graph (lists and tuples walked in step).
void each_operand(const ir::Arg& source, ir::Arg& now, const std::function<void(ValueId, ir::Arg&)>& fn) {
  if (source.kind == ir::Arg::Kind::Value) fn(source.value, now);
  for (size_t i = 0; i < source.items.size() && i < now.items.size(); ++i) each_operand(source.items[i], now.items[i], fn);
}

}  // namespace

bool channels_last(ir::Graph& graph) {
  // A network: two convolutions at least, one of them reading a value the graph computes. A lone
  // convolution, or several reading the graph's inputs only, would pay copies in and out for their gain.
  // A training graph (an output requires grad; decomposed intermediates may say so in any graph) keeps
  // the layouts its backward was built for.
  for (ValueId out : graph.outputs())
    if (graph.value(out).type.requires_grad) return false;
  int convs = 0;
  bool chained = false, channels_last_values = false;
  double cudnn_faster = 0, cudnn_slower = 0;  // the work of CUDA convolutions cuDNN runs faster, slower NHWC
  for (const ir::Node& node : graph.nodes()) {
    if (has_effect(node)) return false;
    for (ValueId r : node.results) channels_last_values = channels_last_values || is_channels_last(graph.value(r).type);
    if (is_conv2d(node) && node.args.size() >= 2 && node.args[0].kind == ir::Arg::Kind::Value &&
        node.args[1].kind == ir::Arg::Kind::Value && node.results.size() == 1 &&
        converts(graph.value(node.args[0].value).type)) {
      ++convs;
      const ir::TensorType& input = graph.value(node.args[0].value).type;
      const ir::TensorType& weight = graph.value(node.args[1].value).type;
      chained = chained || graph.value(node.args[0].value).producer >= 0;
      if (input.device.type == "cuda" && weight.sizes.size() == 4) {
        const bool grouped = weight.sizes[1] != input.sizes[1];
        const bool wide_groups = !weight.sizes[1].is_constant() || weight.sizes[1].constant() >= kCudnnSlowGroupWidth;
        (grouped && wide_groups ? cudnn_slower : cudnn_faster) += conv_work(graph.value(node.results[0]).type, weight);
      }
    }
  }
  // Conv inputs are laid out channels-last for a network (on CUDA, unless cuDNN would lose more time on the
  // grouped convolutions it runs slower NHWC than it gains on the rest). A graph with channels-last values
  // already (PoolFormerV2's, after its GroupNorms) gets the rest: weights and fills beside them laid out.
  const bool lays_out = convs >= 2 && chained &&
                        kCudnnSlower * cudnn_slower + kCudnnFaster * cudnn_faster <= cudnn_slower + cudnn_faster;
  if (!lays_out && !channels_last_values) return false;

  Rewriter rw(graph);
  std::map<ValueId, ValueId> laid_out;  // new value -> its channels-last copy
  int convs_moved = 0, turns_back = 0;  // convolutions given a channels-last input; layout round trips
  auto type_of = [&rw](ValueId v) -> const ir::TensorType& { return rw.type(v); };
  for (const ir::Node& node : graph.nodes()) {
    std::vector<ir::Arg> args;
    for (const ir::Arg& a : node.args) args.push_back(rw.map(a));
    Kwargs kwargs;
    for (const auto& [name, a] : node.kwargs) kwargs.emplace_back(name, rw.map(a));
    // A conv input is laid out for a network only; a weight or a fill follows a channels-last value.
    // True when it made a new copy.
    auto lay_out = [&](ir::Arg& a, bool follows) {
      if (!(lays_out || follows) || a.kind != ir::Arg::Kind::Value || !converts(rw.type(a.value))) return false;
      auto it = laid_out.find(a.value);
      const bool made = it == laid_out.end();
      if (made) it = laid_out.emplace(a.value, relayout(rw, a.value, channels_last_type(rw.type(a.value)))).first;
      a = ir::Arg::of_value(it->second);
      return made;
    };
    auto operands = [&](const std::function<void(ValueId, ir::Arg&)>& fn) {
      for (size_t i = 0; i < node.args.size(); ++i) each_operand(node.args[i], args[i], fn);
      for (size_t i = 0; i < node.kwargs.size(); ++i) each_operand(node.kwargs[i].second, kwargs[i].second, fn);
    };
    if (is_conv2d(node) && args.size() >= 2 && args[0].kind == ir::Arg::Kind::Value) {
      // The input (unless an earlier conv's layout reaches it already), then the weight beside a
      // channels-last input: torch's kernels copy a contiguous weight wider than 1x1 channels-last on
      // every call (aten's strided copy_, slower than a kernel here).
      // A computed value (not the image) copied channels-last here: the network left the layout before it.
      turns_back += lay_out(args[0], false) && graph.value(node.args[0].value).producer >= 0 &&
                    transposes(graph.value(node.args[0].value).type);
      convs_moved += rw.type(args[0].value).strides != graph.value(node.args[0].value).type.strides;
      const ir::TensorType& input = rw.type(args[0].value);
      if (input.sizes.size() == 4 && input.strides == ir::channels_last_strides(input.sizes)) lay_out(args[1], true);
    } else {
      // A fill read beside a channels-last operand (max_pool2d's -inf padding, cat to its input) is laid
      // out channels-last too: computed where it is read, the copy costs nothing, and the node can keep
      // the layout instead of sending its operands back to their traced ones.
      bool reads_channels_last = false;
      operands([&](ValueId, ir::Arg& n) { reads_channels_last = reads_channels_last || is_channels_last(rw.type(n.value)); });
      if (reads_channels_last)
        operands([&](ValueId s, ir::Arg& n) {
          if (is_fill(graph, s)) lay_out(n, true);
        });
    }
    bool moved = false;
    operands([&](ValueId s, ir::Arg& n) { moved = moved || graph.value(s).type.strides != rw.type(n.value).strides; });
    if (!moved) {
      rw.copy(node);
      continue;
    }
    std::vector<ir::TensorType> types;
    for (ValueId r : node.results) types.push_back(graph.value(r).type);
    const bool torch = node.op == ir::Op::TorchCall;
    auto ruled = torch ? shapes::infer_torch_call_types(node.target, shapes::operands_of(args, type_of),
                                                        shapes::operands_of(kwargs, type_of), false, ir::DType::Float32)
                       : shapes::infer_result_types(node.op, shapes::operands_of(args, type_of),
                                                    shapes::operands_of(kwargs, type_of), false, ir::DType::Float32);
    bool answered = ruled && ruled->size() == types.size() && (node.result_form == ir::Node::ResultForm::Single ||
                                                                node.result_form == ir::Node::ResultForm::Tuple);
    for (size_t i = 0; answered && i < types.size(); ++i)
      answered = (*ruled)[i].dtype == types[i].dtype && (*ruled)[i].sizes == types[i].sizes;
    if (!answered) {
      // No rule for the new layout: the operands go back to the layouts the node was traced with (for
      // the nodes after it too).
      operands([&](ValueId s, ir::Arg&) {
        const ValueId now = rw.mapped(s);  // restored already when the node reads `s` twice
        if (rw.type(now).strides == graph.value(s).type.strides) return;
        turns_back += transposes(graph.value(s).type);
        rw.bind(s, relayout(rw, now, graph.value(s).type));
      });
      rw.copy(node);
      continue;
    }
    bool back = !types.empty();
    for (size_t i = 0; i < types.size(); ++i) {
      back = back && (*ruled)[i].strides == types[i].strides && transposes(types[i]);
      types[i].strides = (*ruled)[i].strides;
    }
    turns_back += back;  // a copy into the traced layout inside the node (a GroupNorm's reshape into groups)
    std::vector<ValueId> results;
    if (node.result_form == ir::Node::ResultForm::Single)
      results = {torch ? rw.emit_torch(node.target, std::move(args), std::move(kwargs), types[0])
                       : rw.emit(node.op, std::move(args), std::move(kwargs), types[0])};
    else
      results = torch ? rw.emit_torch_tuple(node.target, std::move(args), std::move(kwargs), types)
                      : rw.emit_tuple(node.op, std::move(args), std::move(kwargs), types);
    for (size_t i = 0; i < results.size(); ++i) rw.bind(node.results[i], results[i]);
  }
  // The graph's outputs in their recorded layouts.
  for (ValueId out : graph.outputs()) {
    turns_back += rw.type(rw.mapped(out)).strides != graph.value(out).type.strides && transposes(graph.value(out).type);
    rw.bind(out, relayout(rw, rw.mapped(out), graph.value(out).type));
  }
  // A network whose values leave the layout and come back more often than 1.5 times a convolution (a
  // decomposed GroupNorm before each conv reshapes into groups: a copy back, then a copy channels-last for
  // the conv; diffusers' UNet and VAE: 34 and 36 against 17 and 12 convolutions) pays two transposes for a
  // convolution a few percent faster: left as traced. Measured on the zoo: the CNNs count 1 (ResNet-18,
  // SqueezeNet) to 33 / 49 (EfficientNet-B0), Visformer 75 / 57 and PoolFormer 31 / 28 are faster laid out.
  if (lays_out && 2 * turns_back > 3 * convs_moved) return false;
  graph = rw.finish();
  dce(graph);  // copies a node without a rule left unread
  return true;
}

}  // namespace ember::passes
