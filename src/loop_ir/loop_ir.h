// Ember's loop IR: what a graph becomes after lowering, and what the scheduler, the memory
// planner and the code generators work on.
//
// Semantics. A Program is a straight-line list of steps over buffers. A Buffer is a strided
// array (dtype, symbolic sizes and strides, an element offset): a graph input, a graph output
// the runtime allocates, a temporary the memory planner places in the per-call arena, the result
// of an extern call (torch allocates it), or a view of another buffer. A step is either
//   - an extern call: a torch callable applied to buffers and literals (matmul, convolution,
//     attention, anything without a lowering), its results bound to buffers; or
//   - a kernel: a loop nest. For every point of its outer iteration space (`ranges`, index
//     variables i0, i1, ...) it runs its loops in order; each loop iterates its own ranges
//     (variables r0, r1, ..., scoped to that loop; a loop without ranges runs its body once).
//     Loop bodies are expression DAGs of scalar nodes (ops.def): loads of a buffer at one index
//     expression per dimension, arithmetic, reductions over the loop, and stores.
//
// Views are index remaps: a permute, slice or reshape never moves data; it changes the index
// expressions of the loads that read it. A load or store names a buffer by its *logical*
// dimensions (`load %b3[i0, r0]`); the buffer's strides and offset turn that into an address
// only in code generation, so fusion compares index expressions dimension by dimension.
//
// Index expressions are sym::Expr over: the kernel's outer variables `i<k>`, the enclosing
// loop's variables `r<k>`, shape symbols, and `t<n>` — the run-time value of integer node %t<n>
// (indirect indexing: gather, index_select). Every index is in bounds for every point of the
// iteration space, except under a load's mask: a masked load reads only where its mask is true
// and yields its constant elsewhere (cat, padding).
//
// Dtypes. Every node has a dtype. Kernel bodies never compute in float16 or bfloat16: a load
// from such a buffer yields f32 and a store into one takes f32 (round to nearest even), which
// is how torch's own kernels compute them. The one exception, a rounding: `cast` of an f32 to
// float16/bfloat16 (the f32 value rounded to that dtype) read only by casts back to f32 -- what a
// bf16/f16 buffer would hold, kept in registers (the scheduler's inlining and fusion). Otherwise a load yields its buffer's dtype and a
// store's operand has its buffer's dtype; binary operands share one dtype (lowering inserts
// casts), compares and logical ops yield bool, `index` yields i64.
//
// Text form (print.cpp / parse.cpp; docs/loop-ir.md has the grammar):
//   program @frame {
//     buffer %b0 : f32[4, 8]{8, 1} input 0
//     buffer %b1 : f32[8]{1} input 1
//     buffer %b2 : f32[4, 8]{8, 1} output 0
//     buffer %b3 : f32[4]{1} temp
//     buffer %b4 : f32[8, 4]{1, 8} view %b0 + 0
//     extern (%b5) = "torch.matmul"(%b0, %b4)
//     kernel @k0 [i0 < 4] {
//       loop [r0 < 8] {
//         %t0 = load %b5[i0, r0] : f32
//         %t1 = reduce_max %t0 : f32
//       }
//       loop [r0 < 8] {
//         %t2 = load %b5[i0, r0] : f32
//         %t3 = sub %t2, %t1 : f32
//         %t4 = exp %t3 : f32
//         store %b2[i0, r0] = %t4
//       }
//     }
//     return (%b2)
//   }
// Masked load: `%t5 = load %b1[i1 + -4] if %t4 else 0 : f32`; index value: `%t6 = index 8*i0 + i1 : i64`;
// constant: `%t7 = constant 0.5 : f32` (also `inf`, `-inf`, `nan`, `true`); index check:
// `%t8 = check_index %t2 < 10 : i64`; an accumulating store: `store %b3[t2, i1] += %t5` (a
// scatter-add: index_add, scatter_add, an embedding's gradient). Points of a kernel may add into
// one element, in any order (atomically on a GPU); so the buffer holds its starting values before
// the kernel, nothing else in that kernel reads or writes it, and it is not float16/bfloat16 or
// bool (such sums accumulate in f32). An extern that writes its first argument in place prints
// `extern () = "torch.Tensor.copy_"(%b0, %b3) mutates`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ir/graph.h"
#include "sym/expr.h"

namespace ember::loop_ir {

using ir::DType;

enum class ScalarOp : uint8_t {
#define EMBER_LOOP_OP(Enum, name, arity, cls) Enum,
#include "loop_ir/ops.def"
#undef EMBER_LOOP_OP
};

// How many ScalarOps ops.def lists: the row count every per-op table must have.
constexpr size_t kScalarOpCount = 0
#define EMBER_LOOP_OP(Enum, name, arity, cls) +1
#include "loop_ir/ops.def"
#undef EMBER_LOOP_OP
    ;

enum class OpClass : uint8_t { Leaf, Unary, Binary, Compare, Ternary, Reduce, Effect };

struct ScalarOpInfo {
  const char* name;
  int arity;
  OpClass cls;
};
const ScalarOpInfo& op_info(ScalarOp op);
std::optional<ScalarOp> op_from_name(std::string_view name);
// Transcendental functions, square roots and divisions: tens of instructions per vector each, so
// worth computing once rather than once per lane (collapse's hoisting) or per broadcast consumer
// element (the scheduler's inlining bound).
bool is_expensive(ScalarOp op);

using BufferId = int32_t;
using NodeId = int32_t;

struct Buffer {
  enum class Kind : uint8_t {
    Input,   // graph input `index` (the caller's tensor)
    Output,  // allocated by the runtime before the program runs; returned to the caller
    Temp,    // placed in the per-call arena by the memory planner
    Extern,  // defined by an extern call; torch allocates it
    View,    // `base`'s storage seen with this buffer's sizes, strides and offset
  };
  BufferId id = -1;
  Kind kind = Kind::Temp;
  int index = -1;           // Input: the graph input's position
  DType dtype = DType::Float32;
  std::vector<sym::Expr> sizes;
  std::vector<sym::Expr> strides;
  sym::Expr offset = 0;     // elements from the start of the data (View: from base's first element)
  BufferId base = -1;       // View only
  ir::Device device;
  std::string name() const { return "b" + std::to_string(id); }
};

// A scalar literal: the value of a Constant node, or what a masked Load yields where its mask
// is false.
using Scalar = std::variant<bool, int64_t, double>;

struct Node {
  NodeId id = -1;
  ScalarOp op = ScalarOp::Constant;
  DType dtype = DType::Float32;    // the value's dtype (Store: its operand's)
  std::vector<NodeId> operands;    // Load: [mask] when masked; Store: [value]
  int loop = 0;                    // index of the enclosing loop in Kernel::loops
  BufferId buffer = -1;            // Load, Store
  std::vector<sym::Expr> index;    // Load, Store: one per buffer dimension; Index: exactly one
  Scalar constant = 0.0;           // Constant; a masked Load's value where the mask is false
  sym::Expr bound = 0;             // CheckIndex: exclusive upper bound
  // Store: add the operand to the element instead of overwriting it (`store %b[...] += %t`).
  bool accumulate = false;
};

struct Loop {
  std::vector<sym::Expr> ranges;   // variables r0, r1, ...; empty: the body runs once
};

struct Kernel {
  std::string name;                // "k0", "k1", ...: stable, for printing and code generation
  std::vector<sym::Expr> ranges;   // outer iteration space, variables i0, i1, ...
  std::vector<Loop> loops;
  // Every node of every loop, in execution order: loop indices never decrease, and each node's
  // operands precede it. A node may use a node of an earlier loop only if that node is a
  // reduction, or lies in a loop without ranges (a value computed once per outer point).
  std::vector<Node> nodes;

  // One loop without ranges: every node runs once per outer point.
  bool pointwise() const { return loops.size() == 1 && loops[0].ranges.empty(); }
};

struct ExternCall {
  std::string callable;                   // qualified torch name, as in graph IR (ir::Node::callable())
  std::vector<ir::Arg> args;              // graph-IR arguments whose value references are BufferIds
  std::vector<std::pair<std::string, ir::Arg>> kwargs;
  std::vector<BufferId> results;          // Extern buffers (or none)
  ir::Node::ResultForm result_form = ir::Node::ResultForm::Single;
  bool mutates_first_arg = false;         // writes its first buffer argument in place

  // Every buffer the arguments name (inside lists and tuples too), positional then keyword.
  std::vector<BufferId> buffer_args() const;
  // The buffer arguments the call writes in place: its first when mutates_first_arg, and its `out=`
  // argument (a matmul writing its result into the arena: memory_plan.h's arena_extern_results).
  std::vector<BufferId> written_args() const;
  // Whether its result may be (a view of) one of its arguments: it writes one in place, or its callable
  // does not always return new tensors (ir::returns_new_tensors).
  bool may_return_alias() const;
};

struct Step {
  enum class Kind : uint8_t { Kernel, Extern } kind = Kind::Kernel;
  int index = 0;                          // into Program::kernels or Program::externs
};

// Consecutive kernel steps that run as one grouped kernel (loop_ir/group.h has the rules).
struct Group {
  std::string name;                       // "g0", "g1", ...
  std::vector<int> kernels;               // into Program::kernels, in step order
};

struct Program {
  std::string name;
  std::vector<Buffer> buffers;            // ids dense, in order
  std::vector<Kernel> kernels;
  std::vector<ExternCall> externs;
  std::vector<Step> steps;                // execution order
  std::vector<Group> groups;              // none unless the C++ target's grouping ran
  std::vector<BufferId> inputs;           // graph input k -> its Input buffer
  std::vector<BufferId> outputs;          // graph output k -> the buffer returned (may repeat)
  sym::Symbols symbols;                   // the shape symbols sizes mention (the graph's)

  BufferId add_buffer(Buffer buffer);     // assigns the id
  // The buffer whose storage `id` uses: itself, or the end of its chain of View bases. Throws
  // std::invalid_argument on an id out of range or a cycle of views (a malformed program).
  BufferId storage_root(BufferId id) const;
};

// Text form. print() then parse() gives back an equal program; parse() throws ParseError with a
// line:column on malformed text.
std::string print(const Program& program);
std::string print(const Kernel& kernel);
struct ParseError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
Program parse(std::string_view text);

// Structural and type checks (ids dense, operands defined before use and visible from the using
// loop, arities and dtypes per the rules above, index ranks equal buffer ranks, index variables
// in scope, outputs defined). One message per problem; empty: valid.
std::vector<std::string> verify(const Program& program);

// Index algebra (simplify.cpp). `ranges` maps a variable name to its extent, so that
// (8*i0 + i1) // 8 simplifies to i0 when i1 < 8, and (8*i0 + i1) % 8 to i1.
using VarRanges = std::vector<std::pair<std::string, sym::Expr>>;
sym::Expr simplify(const sym::Expr& e, const VarRanges& ranges);
// Simplifies every index expression of the program in place (a pass: golden-tested); of one kernel.
bool simplify_indices(Program& program);
bool simplify_indices(Kernel& kernel);

}  // namespace ember::loop_ir
