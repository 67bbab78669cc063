// Autograd: ahead-of-time differentiation of a captured graph (docs/autograd.md).
//
// A graph whose outputs require grad (grad mode was on and some input requiring grad reaches an
// output) is a training graph. Eager PyTorch would record a tape while running it; Ember instead
// builds, at compile time, one joint graph that computes the forward outputs and, from one
// tangent per differentiable output, the gradient of every input that requires grad. The joint is
// decomposed, DCE'd and CSE'd like any graph, then cut in two by the partitioner: a forward graph
// that also returns the values the backward needs (saved values), and a backward graph that
// reads them and the tangents. Both are ordinary inference graphs for the rest of the pipeline.
//
//   forward:   (primals)                 -> (forward outputs, saved values)
//   backward:  (saved values, tangents)  -> (gradients of the primals that get one)
//
// Derivatives come from a table over the op table (rules.h): each core op has a rule that emits
// primitives, or is declared non-differentiable, or is differentiated through its decomposition.
// A node no rule covers (a generic torch call) becomes an autograd island: the forward runs it as
// captured; the backward recomputes it under torch autograd and asks torch for its vector-Jacobian
// product, which is always right for a deterministic op and costs one recomputation.
//
// Why before decomposition: fused rules (softmax's `y * (g - sum(g * y))`, layer_norm's) are exact
// and save less than differentiating the primitives would; rules emit the same primitives the
// decomposition does, so CSE merges what the backward recomputes with what the forward computed
// and the partitioner decides what is saved.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace ember::autograd {

// How a joint graph's inputs and outputs map to the forward's. Joint inputs are the forward's
// inputs (primals) in order, then the tangents; joint outputs are the forward's outputs in order,
// then one gradient per primal that gets one.
struct JointLayout {
  int primals = 0;
  int forward_outputs = 0;
  // Per forward output: the index among the tangents of its tangent, or -1 when it does not
  // require grad (an integer output, or one grad does not reach).
  std::vector<int> tangent_of_output;
  // Per primal: the joint output index of its gradient, or -1 when it gets none (it does not
  // require grad, or no output depends on it differentiably: torch leaves its .grad None).
  std::vector<int> grad_output_of_primal;
  // The callables differentiated through torch autograd (islands), one entry per node.
  std::vector<std::string> islands;
  // Per gradient output (in order): the tangents it depends on. When none of them flows at run time
  // (torch passes None for every such output), the primal gets None, as eager leaves its .grad
  // (set by partition()).
  std::vector<std::vector<int>> tangents_of_gradient;
  // The grad mode the forward leaves when it changes the mode inside it (torch.no_grad() blocks;
  // nullopt when it changes none). The joint drops the mode changes: what they decide is already
  // in the values' requires_grad. The runner enables grad around the call, so that torch records
  // the graph's outputs, and then sets this mode, as eager would leave it.
  std::optional<bool> grad_mode_at_end;

  int tangents() const;
  std::string str() const;  // "primals 3, tangents 1, grads of %0 %2; islands: torch.foo"
};

struct Joint {
  ir::Graph graph;
  JointLayout layout;
};

// Whether `graph` needs a joint graph: some output requires grad.
bool is_training_graph(const ir::Graph& graph);

// Inference on the CPU: attention whose shapes torch's fused kernel refuses (a 3-d mask, k and v broadcast
// over heads) becomes the math form torch runs then (training_forms.cpp, attention_as_math), which fuses
// with the kernels around it instead of calling torch's math backend op by op. True when it changed g.
bool attention_math_for_inference(ir::Graph& g);

struct JointOptions {
  // Dropout draws eager's numbers (aten's native_dropout; the backward reads its saved mask) instead
  // of Philox streams that the backward recomputes from a saved seed (CompileOptions::fallback_random).
  bool exact_random = false;
};

// Builds the joint graph of a training graph (autograd/joint.cpp). Returns nullopt with the reason
// when the graph cannot be differentiated ahead of time (it writes a value that requires grad in
// place, ...): it then runs eagerly under torch autograd. Grad-mode changes inside the graph are
// differentiated through: values computed with grad disabled do not require grad, so they get no
// backward (JointLayout::grad_mode_at_end).
std::optional<Joint> build_joint(const ir::Graph& forward, const JointOptions& options, std::string* reason);

struct PartitionOptions {
  // 1: the cut that minimizes saved bytes given what is cheap to recompute; 0: save only inputs
  // and what must run once (activation checkpointing: reductions and matmuls are recomputed too).
  // Values between make saving a cheap value cost 1/budget per byte (docs/autograd.md).
  double memory_budget = 1.0;
};

// One decision of the partitioner, for EMBER_LOGS=partition: a value saved or recomputed, and why.
struct PartitionDecision {
  ir::ValueId value = -1;  // joint value
  enum class Kind : uint8_t { Saved, Recomputed, Banned } kind = Kind::Saved;
  std::string reason;
  std::string str() const;
};

struct Partition {
  ir::Graph forward;   // primals -> forward outputs, then the saved values
  // saved values, saved primals, tangents -> the gradients of the primals that get one, in order
  ir::Graph backward;
  JointLayout layout;
  int saved = 0;                    // forward outputs past layout.forward_outputs
  std::vector<int> saved_primals;   // primals the backward reads, by index: saved as they are
  int64_t saved_bytes = 0;          // the saved values' total size (primals not counted: alive anyway)
  std::vector<PartitionDecision> decisions;
};

// Cuts a joint graph (after decompose, dce, cse) into forward and backward graphs by a minimum cut
// over byte-weighted edges (autograd/partition.cpp). Deterministic. The two graphs' values no
// longer require grad: they run under no_grad, inside torch's autograd.Function. With shape symbols,
// both graphs keep them and the backward's inputs bind every one (docs/autograd.md).
Partition partition(const Joint& joint, const PartitionOptions& options);

// Text form of a partition (goldens, EMBER_LOGS=partition): the two graphs and the decisions.
std::string print(const Partition& partition);

}  // namespace ember::autograd
