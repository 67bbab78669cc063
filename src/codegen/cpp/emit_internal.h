// Pieces shared by the C++ emitter's files: C++ spellings of dtypes, literals and index
// expressions (emit_expr.cpp), per-node statements (emit_ops.cpp) and kernel functions
// (emit_kernel.cpp), proven signs and integer ranges (emit_range.cpp); the spelling tables are
// spelling.h's. Not a public interface: cpp_codegen.h is.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "codegen/cpp/cpp_codegen.h"
#include "codegen/cpp/spelling.h"
#include "loop_ir/collapse.h"

namespace ember::codegen::detail {

using ir::DType;
using loop_ir::Buffer;
using loop_ir::BufferId;
using loop_ir::Kernel;
using loop_ir::Node;
using loop_ir::NodeId;
using loop_ir::Program;
using loop_ir::ScalarOp;

// ---- dtypes (emit_expr.cpp, from the dtype table of spelling.h)
// The C++ type a buffer of `dt` stores (float16 and bfloat16: their bits as uint16_t).
const char* storage_type(DType dt);
// The C++ type of a node value of `dt` (float16 and bfloat16 values are carried as float).
const char* value_type(DType dt);
ValueKind value_kind(DType dt);
bool is_integer(DType dt);    // u8, i8, i16, i32, i64
// Throws CodegenError naming `what` for dtypes generated code does not handle (complex, float8).
void require_supported(DType dt, const std::string& what);
// A float value `x` rounded to what a `dt` element holds (f16, bf16; other dtypes: `x`).
std::string round_to_storage(DType dt, const std::string& x);

// ---- literals and index expressions (emit_expr.cpp)
std::string literal(const loop_ir::Scalar& value, DType dt);
int64_t constant_of(const sym::Expr& e, const std::string& what);  // CodegenError if symbolic

// Shape symbols (the program's `symbols`) are int64 locals of the same name in the entry and in
// every kernel that mentions one (its parameters), so an expression over them prints as itself.
bool is_shape_symbol(const Program& program, const std::string& name);
// `e` with every shape symbol at its hint: the value heuristics (unrolling, the parallel layout)
// decide on; never what correctness depends on. CodegenError when `e` mentions another symbol.
int64_t hint_of(const Program& program, const sym::Expr& e, const std::string& what);
// The shape symbols `e` mentions, added to `names`.
void collect_shape_symbols(const Program& program, const sym::Expr& e, std::set<std::string>& names);

// How index expressions read the kernel's integer nodes (`t<n>` symbols) and shape symbols.
struct IndexSymbols {
  std::function<const Node*(const std::string& name)> node_of;  // nullptr: not a node symbol
  const Program* program = nullptr;                              // its shape symbols print as names
};
// `e` as a C++ int64 expression. Loop variables i<k>/r<k> and shape symbols print as themselves,
// t<n> as the node's variable (widened to int64 when narrower); any other symbol is a CodegenError.
std::string c_index(const sym::Expr& e, const IndexSymbols& symbols);
// The coefficient of a variable in an affine index and an access's element offset: the loop
// IR's (loop_ir/collapse.h), which the collapse pass decides by too.
using loop_ir::linear_coefficient;
inline sym::Expr element_offset(const Buffer& buffer, const std::vector<sym::Expr>& index) {
  return loop_ir::flat_offset(buffer, index);
}
// The widest vector (AVX-512's 16 lanes): a vector loop's chunks start at multiples of kSize, which
// divides it on every layer.
constexpr int64_t kMaxVectorLanes = 16;
// `offset` is not affine in `var` but steps by 1 across the lanes of every aligned chunk: `var` occurs
// only bare in affine terms or as `var // D` / `var % D` with D a multiple of kMaxVectorLanes, so
// within a chunk `var // D` is fixed and `var % D` moves with `var`. A ViT's
// `transpose(1, 2).reshape(B, N, H*d)` reads [B, H, N, d] at `H_stride*(i2 // d) + i2 % d`.
bool chunk_contiguous(const sym::Expr& offset, const std::string& var);
// `offset` is not affine in `var` but is fixed within every aligned chunk: `var` occurs only as
// `var // D`, D a multiple of kMaxVectorLanes (a GroupNorm's per-group statistics read along the
// channels of a channels-last tensor: `mean[c // 32]`). Vector code broadcasts the chunk's element.
bool chunk_uniform(const sym::Expr& offset, const std::string& var);
// Whether an index expression reads a node's value (a `t<n>` symbol: a gather's index).
bool reads_node_values(const sym::Expr& e);

// ---- nodes (emit_ops.cpp)
enum class Mode : uint8_t { Scalar, Vector, VectorTail };

struct NodeEnv {
  const Program* program = nullptr;
  const Kernel* kernel = nullptr;
  // Buffer id -> its parameter's position (kernel_params order): the kernel's code and comments
  // name a buffer `p<position>`, never by id, so kernels that differ only in their buffers print
  // the same text (emit_cpp gives such kernels one function).
  std::map<BufferId, size_t> param_position;
  std::unordered_map<NodeId, size_t> position;  // node id -> index in kernel->nodes
  IndexSymbols symbols;
  std::string next_label;                       // where a failed check jumps: "k0_next"
  std::vector<std::string>* check_sites = nullptr;
  // Appended to vector accumulator names: a reduction loop unrolled with several independent
  // accumulators (acc_t5, acc_t5_1, ...) emits its body once per accumulator.
  std::string acc_suffix;
  // When not empty: a VecF in scope holding 1.0f / (the weight after this step) in every lane, for
  // every Welford accumulator a Mode::Vector node updates (each has taken the same number of full
  // vectors): the update multiplies by it instead of dividing (ev::WelfordF::add(x, inv_weight)).
  std::string welford_reciprocal;
  // Outer reductions only (emit_outer.cpp): a load or store of a float buffer with a constant
  // stride other than 0 or 1 along the vector variable moves its lanes one element at a time
  // through a small array, and the code around it stays vector (ConvNeXt's LayerNorm reads NCHW
  // contiguously along the points and writes its NHWC result with stride C).
  bool strided_lanes = false;
  // Vector sums over long loops that move their float lanes into a double carry every block of
  // vectors (`carry_t5`, ev::SumCarry; emit_kernel.cpp decides which).
  std::set<NodeId> carried;
  const Node& node(NodeId id) const { return kernel->nodes[position.at(id)]; }
  std::string buffer_name(BufferId id) const { return "p" + std::to_string(param_position.at(id)); }
};

// What emit_kernel names the function; emit_cpp replaces it by the name hashed from the text.
constexpr const char* kFunctionPlaceholder = "ember_kernel_function";

// The vector spelling of a node's operand: its own name inside the vector region, else the
// broadcast of the scalar computed earlier (`t3_v`).
std::string vector_operand_name(NodeId id, bool inside_region);
// `t5_d`: the ev::DivisorF of a value from outside a vector region that divides inside it.
std::string divisor_name(NodeId id);

// An integer or bool value of a vector region over `var` that is the same in every lane: a load
// whose offset does not read `var` (a row's label), or an op on such values and constants alone.
// Vector code computes it as a scalar once per vector (any integer width: no int32 lanes needed)
// and broadcasts it where a vector op reads it: a bool into a mask, an integer only into a
// comparison with int32 lanes, clamped to one past their proven range (which keeps every
// comparison's result).
bool lane_uniform(const NodeEnv& env, const Node& node, const std::string& var,
                  const std::function<bool(NodeId)>& inside);

// An f32 load whose offset is computed from loop variables alone (no node value: not a gather
// through loaded indices) and is neither fixed, contiguous, nor contiguous within a chunk along the
// vector variable `var`. Vector code reads the chunk's one element and broadcasts it where the offset
// is fixed within each chunk (chunk_uniform: a channels-last GroupNorm's `mean[c // 32]`), else each
// lane's element in turn (a constant stride: Swin's relative position bias `bias[49*i + r0, head]`;
// `mean[c // 4]`; a nearest upsample's `x[w // 2]`), so the rest of the region stays vector instead
// of the whole kernel running scalar.
bool gathered_load(const NodeEnv& env, const Node& node, const std::string& var);

// Why `node` cannot be part of a vector region over `var` ("" when it can). `inside(id)` says
// which nodes belong to the region.
std::string vector_refusal(const NodeEnv& env, const Node& node, const std::string& var,
                           const std::function<bool(NodeId)>& inside);

// Statements computing `node` (reductions: their update step), appended to `out` at `indent`.
void emit_scalar_node(const NodeEnv& env, const Node& node, const std::string& indent, std::string& out);
// `var`: the vectorized variable (its value is the first lane's).
void emit_vector_node(const NodeEnv& env, const Node& node, const std::string& var, Mode mode,
                      const std::function<bool(NodeId)>& inside, const std::string& indent, std::string& out);

// Reductions: accumulator declarations before the loop and the node's value after it. Welford
// mean/m2 pairs of one operand share the accumulator of the first of them (`welford_leader`).
NodeId welford_leader(const NodeEnv& env, const Node& node);
void emit_reduction_init(const NodeEnv& env, const Node& node, bool vector, const std::string& indent,
                         std::string& out);
// acc<into> = combine(acc<into>, acc<from>) for a vector accumulator (suffixes as acc_suffix).
void emit_reduction_merge(const NodeEnv& env, const Node& n, const std::string& into, const std::string& from,
                          const std::string& indent, std::string& out);
// carry_<n>.add(acc_<n><suffix>) and the accumulator restarted: one block of a carried sum ends.
void emit_reduction_carry(const NodeEnv& env, const Node& n, const std::string& suffix, const std::string& indent,
                          std::string& out);
void emit_reduction_final(const NodeEnv& env, const Node& node, bool vector, const std::string& indent,
                          std::string& out);

// ---- proven signs and integer ranges (emit_range.cpp)
// `exp_node` (an Exp) takes `a - reduce_max(a)` over the same points, so its argument is <= 0 or
// NaN everywhere: ev::exp_nonpositive gives its bits.
bool exp_argument_nonpositive(const NodeEnv& env, const Node& exp_node);

// Integer `n` (in a vector region over `var`) takes values that provably fit in int32 and in its
// dtype at every point, masked-tail lanes past the loop's end included: vector code computes it in
// ev::VecI lanes (32-bit) and gets the bits of the scalar int64 arithmetic.
bool fits_int32_lanes(const NodeEnv& env, const Node& n, const std::string& var);
// The [lo, hi] that proof gives (nullopt where fits_int32_lanes is false).
std::optional<std::pair<int64_t, int64_t>> int32_lane_interval(const NodeEnv& env, const Node& n, const std::string& var);

// ---- reuse across loops (emit_reuse.cpp)
// Values a later vector loop recomputes from an earlier one: the earlier loop stores them into a
// scratch array per outer point, the later loads them (emit_reuse.cpp says when this is done).
struct LoopReuse {
  std::map<NodeId, std::string> store_after;   // node of the earlier loop -> its scratch array
  std::map<NodeId, std::string> load_instead;  // node of a later loop -> the scratch it loads
  std::set<NodeId> dead;                       // later-loop nodes only the replaced ones used
  std::vector<std::pair<std::string, int64_t>> scratch;  // arrays to declare: name, floats (at the hints)
  // Scratch over a symbolic extent: name -> its run-time length (a per-thread array, not the stack).
  std::map<std::string, sym::Expr> run_time_sized;
  // Scratch kept in the output row instead of an array: name -> the store's pointer at the current
  // loop point ("b1 + 1024*i0 + r0"). See output_row_scratch in emit_reuse.cpp.
  std::map<std::string, std::string> in_output;
};
// `vector_loop[l]`: loop l is emitted as vector code.
LoopReuse plan_loop_reuse(const NodeEnv& env, const std::vector<std::vector<int64_t>>& loops,
                          const std::vector<bool>& vector_loop);
// The row-major element offset of a loop point in its scratch array: "r0*8 + r1".
std::string scratch_offset(const std::vector<int64_t>& extents);

// ---- outer reductions (emit_outer.cpp)
// A kernel whose every node passes vector_refusal along its last outer variable (asked with
// NodeEnv::strided_lanes set) may run as an outer reduction (lanes are outer points, loops are
// scalar for-loops, reductions per lane) unless this says why not ("" when it may): no reduction,
// no load of a loop with ranges contiguous along it, symbolic loop extents, or float sums,
// products or Welford states that would take more elements per lane than the inner vector loops
// allow.
std::string outer_reduction_refusal(const Program& program, const Kernel& kernel);
// The outer reduction's code for one point of the other outer variables: a loop over whole vectors
// of `var` (extent `extent`, its C++ spelling; `pragma` before it when not empty: an OpenMP split
// of the chunks) and a masked tail.
void emit_outer_reduction(NodeEnv& env, const std::string& var, const std::string& extent, const std::string& pragma,
                          int depth, std::string& out);

// ---- tiled transposes (emit_tile.cpp)
// A pointwise kernel whose every node passes vector_refusal along its last outer variable C when
// asked with NodeEnv::strided_lanes set may run in kSize x kSize tiles of its last two variables
// unless this says why not ("" when it may): its strided loads (constant stride along C) must be
// f32, contiguous along the variable before C, and at most four buffers; its stores contiguous
// along C; both extents constant; and some load transposed.
std::string tile_refusal(const NodeEnv& env);
// The tiled kernel's code for one point of the outer variables before the last two; `pragma` (when
// not empty) splits the rows of tiles across threads.
void emit_tiled_points(NodeEnv& env, const std::string& pragma, int depth, std::string& out);

// ---- kernels (emit_kernel.cpp)
struct KernelParam {
  BufferId buffer = -1;
  bool written = false;
};
struct KernelCode {
  std::string text;                  // the extern "C" function named kernel.name, with its comment block
  std::vector<KernelParam> params;   // in signature order (then `symbols`, then `ctx` when uses_ctx)
  std::vector<std::string> symbols;  // shape symbols it reads, in the program's order (int64 parameters)
  bool uses_ctx = false;             // has check_index: takes ember_ctx* and may set an error
  std::string pointer_type;          // the function's pointer type: "void (*)(const float*, float*)"
};
// `restrict_ok`: every pointer parameter may be __restrict (no two may alias). The kernel's
// check_index sites are appended to `check_sites` and numbered from 0 in its code (error_site).
KernelCode emit_kernel(const Program& program, const Kernel& kernel, const CppOptions& options, bool restrict_ok,
                       std::vector<std::string>* check_sites);
// The buffers a kernel loads and stores (stores marked written), in order of first access.
std::vector<KernelParam> kernel_params(const Kernel& kernel);

// ---- grouped kernels (emit_group.cpp; loop_ir/group.h)
struct GroupCode {
  std::string text;          // the body function and the driver named kFunctionPlaceholder
  size_t width = 0;          // pointers per member in the table (the body's parameters, in order)
  std::string pointer_type;  // the driver's: void (*)(void* const* ptrs, const int64_t* sizes, int64_t count)
};
// `restrict_ok`: every member's pointers may be __restrict.
GroupCode emit_group(const Program& program, const loop_ir::Group& group, const CppOptions& options, bool restrict_ok);

}  // namespace ember::codegen::detail
