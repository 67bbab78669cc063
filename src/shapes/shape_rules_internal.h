// What the shape-rule files share: the call being inferred, argument binding by parameter name,
// readers of constant operands, torch's dtype promotion, and layout arithmetic. Internal to
// shape_rules*.cpp; the interface is shape_rules.h.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <set>
#include <string_view>
#include <vector>

#include "shapes/shape_rules.h"

namespace ember::shapes::rules {

using Sizes = std::vector<int64_t>;
using Result = std::optional<std::vector<ir::TensorType>>;

// A tensor operand whose sizes and strides are all constants.
struct Dense {
  ir::DType dtype = ir::DType::Float32;
  Sizes sizes;
  Sizes strides;
  bool requires_grad = false;
  const ir::Device* device = nullptr;
  int64_t dim() const { return static_cast<int64_t>(sizes.size()); }
};

struct Call {
  ir::Op op;
  const std::vector<Operand>& args;
  const std::vector<std::pair<std::string, Operand>>& kwargs;
  bool grad_enabled;
  ir::DType default_dtype;
  const sym::Symbols* facts = nullptr;  // the symbols' ranges, where known (shape_rules.h)
  // The facts, or none (every symbol unbounded: only constant relations are proven).
  const sym::Symbols& symbols() const {
    static const sym::Symbols kNone;
    return facts ? *facts : kNone;
  }
};

// ---- Binding operands to parameters ----------------------------------------------------------

constexpr int kMaxParams = 8;

// Operands by parameter position; nullptr where the call does not pass the parameter.
struct Bound {
  std::array<const Operand*, kMaxParams> slot{};
  const Operand* operator[](int i) const { return slot[static_cast<size_t>(i)]; }
};

// Binds positional operands in order, then keywords by name. `names` lists the parameters in
// positional order; an entry may give aliases separated by '|' ("split_size|split_size_or_sections"),
// and a leading '*' marks a keyword-only parameter ("*alpha"; those come last). nullopt for an
// unknown keyword, a parameter given twice, or too many positional operands.
std::optional<Bound> bind(const Call& call, std::initializer_list<const char*> names);

// Sizes passed either as one sequence or as several ints after the tensor (x.view(2, 3),
// x.view((2, 3)), torch.reshape(x, (2, 3)), x.view(size=(2, 3))). `extra_kw` names one more
// keyword the call may carry (expand's "implicit"), returned through `extra`.
std::optional<Sizes> sizes_operand(const Call& call, const char* keyword, const char* extra_kw = nullptr,
                                   const Operand** extra = nullptr);

// ---- Constants (absent operands read as "not given") -----------------------------------------

bool is_none(const Operand* p);                       // absent, or the constant None
std::optional<int64_t> as_int(const Operand* p);      // an int (not a bool) that fits int64
std::optional<bool> as_bool(const Operand* p);        // True / False
std::optional<double> as_real(const Operand* p);      // an int or a float, not a bool
std::optional<Sizes> as_int_list(const Operand* p);   // a sequence of ints (tuple, list, torch.Size)
std::optional<Sizes> as_int_or_list(const Operand* p);  // an int is a list of one
std::optional<ir::DType> as_dtype(const Operand* p);  // a torch.dtype Ember models
bool is_string(const Operand* p, std::string_view text);
std::optional<Dense> as_dense(const Operand* p);      // a tensor with constant sizes

// The kind of a Python scalar as torch's type promotion sees it.
enum class ScalarKind : uint8_t { Bool, Int, Float, Complex };
std::optional<ScalarKind> scalar_kind(const Operand* p);  // bool/int/float literals, complex operands

// ---- dtypes -----------------------------------------------------------------------------------

// ir/types.h's table answers these; the rules' "floating" is torch's dispatch sense (float8
// apart).
using Category = ir::DTypeCategory;
using ir::complex_of;
using ir::is_complex;
using ir::is_differentiable;
using ir::is_float8;
using ir::is_floating;
using ir::is_integral;
using ir::promote_types;
using ir::real_of;
constexpr Category category(ir::DType dt) { return ir::dtype_category(dt); }

// torch.result_type over tensors and Python scalars: dimensioned tensors outrank 0-d tensors,
// which outrank Python scalars, each only within a category (bool < integral < floating <
// complex). A Python float stands for the default dtype, a Python complex for its complex
// counterpart.
class Promotion {
 public:
  explicit Promotion(ir::DType default_dtype) : default_dtype_(default_dtype) {}
  void add(const Dense& t);
  void add(ir::DType tensor_dtype, bool zero_dim);
  void add(ScalarKind s);
  std::optional<ir::DType> result() const;

 private:
  void merge(std::optional<ir::DType>& group, ir::DType dt);
  ir::DType default_dtype_;
  std::optional<ir::DType> dims_, zero_dims_, scalars_;
  bool failed_ = false;
};

// Whether the Python scalar `p` converts to `dt` without overflow (torch refuses or wraps such
// values depending on the op, so the rules decline them): ints within an integer dtype's range
// or a floating dtype's finite range, floats (inf and nan included) only into floating or
// complex dtypes and within range, complex numbers only into complex dtypes. True for bools and
// for operands that are not scalars.
bool scalar_fits(const Operand* p, ir::DType dt);

// ---- Layout -----------------------------------------------------------------------------------

Sizes contiguous_strides(const Sizes& sizes);        // torch's default strides (size 0 counts as 1)
bool has_default_strides(const Dense& t);            // strides == contiguous_strides(sizes)
bool is_contiguous(const Dense& t);                  // torch's is_contiguous(): size-1 dims ignored
// Whether torch's "contiguous result like x" (empty_like and friends) has default strides:
// when x has them, or has no dim of size 0 or 1 (whose strides torch may carry over from x).
bool like_has_default_strides(const Dense& x);
// torch's suggest_memory_format() is channels-last (4-d or 5-d; shape_rules_data.cpp).
bool suggests_channels_last(const Dense& t);
std::optional<int64_t> numel(const Sizes& sizes);    // nullopt on overflow
std::optional<int64_t> wrap_dim(int64_t dim, int64_t ndim);  // a 0-d tensor has dims {0, -1}
// The extent of x[start:stop:step] along a dim of `size` (Python's clamping of the bounds; step >= 1).
int64_t slice_extent(std::optional<int64_t> start, std::optional<int64_t> stop, int64_t step, int64_t size);
std::optional<Sizes> broadcast(const Sizes& a, const Sizes& b);

// ---- Results ----------------------------------------------------------------------------------

// The device a result lives on: the first non-0-d tensor operand's, else the first tensor's.
// nullopt when tensor operands disagree, except 0-d CPU tensors where `cpu_scalars_mix`
// (TensorIterator ops accept them next to tensors of any device).
std::optional<ir::Device> result_device(const Call& call, bool cpu_scalars_mix);

ir::TensorType make_type(ir::DType dt, Sizes sizes, Sizes strides, bool requires_grad, const ir::Device& device);
// A freshly computed result: requires grad when grad mode is on, an operand requires grad and
// the result dtype is differentiable.
bool computed_requires_grad(const Call& call, ir::DType out, std::initializer_list<const Dense*> operands);
// The same for a contiguous result of a computation, as a one-element Result.
Result computed(const Call& call, ir::DType dt, const Sizes& sizes, std::initializer_list<const Dense*> operands,
                bool cpu_scalars_mix = false);
// A view of `base` (same dtype and device; requires grad exactly when `base` does).
ir::TensorType view_of(const Dense& base, Sizes sizes, Sizes strides);

// ---- Rules, by file; shape_rules.cpp dispatches every op of ops.def to one of them ------------

// shape_rules_pointwise.cpp
Result infer_unary(const Call& call);
Result infer_convert(const Call& call);  // prims.convert_element_type
Result infer_binary(const Call& call);
Result infer_where(const Call& call);
Result infer_masked_fill(const Call& call);
Result infer_clamp(const Call& call);
// The strides TensorIterator gives a pointwise result of shape `out` over `tensors`, in the
// cases the rules model (see the file comment), else nullopt. `result_dtype`: the result's
// dtype where the caller knows it (the general ordering case needs operands of that dtype, but
// for `unconverted`: where's condition, which torch reads as it is). `general_path`: what
// general_layout_path says of the op and all its tensor operands (0-d ones included); it admits
// size-1 output dims to the general ordering case.
std::optional<Sizes> pointwise_strides(const Sizes& out, const std::vector<const Dense*>& tensors,
                                       std::optional<ir::DType> result_dtype = std::nullopt,
                                       const Dense* unconverted = nullptr, bool general_path = false);
// Whether TensorIterator surely lays `op`'s result `out` over `tensors` out by its general path (no
// fast setup copies an operand's layout: a 0-d operand, a size-1 dim broadcast to a larger one, or an
// operand that is not non-overlapping and dense), with every other operand of the output's rank, and
// op's meta kernel lays size-1 dims out as TensorIterator does (not gelu's and clamp's, nor any op's in
// float16 and bfloat16: Python).
bool general_layout_path(ir::Op op, const Sizes& out, const std::vector<const Dense*>& tensors);

// shape_rules_reduce.cpp: reductions, normalizations, matmuls
Result infer_sum_mean(const Call& call);
Result infer_amax_amin(const Call& call);
Result infer_var(const Call& call);      // var and std (one result), var_mean and std_mean (two)
Result infer_softmax(const Call& call);  // softmax and log_softmax
Result infer_layer_norm(const Call& call);
Result infer_mm(const Call& call);
Result infer_bmm(const Call& call);
Result infer_addmm(const Call& call);
Result add_matmul(const Call& call, bool batched);  // addmm, baddbmm
Result infer_linear(const Call& call);
Result infer_matmul(const Call& call);

// shape_rules_views.cpp
Result infer_view_reshape(const Call& call);  // view and reshape
Result infer_permute(const Call& call);
Result infer_transpose(const Call& call);
Result infer_expand(const Call& call);
Result infer_unsqueeze(const Call& call);
Result infer_squeeze(const Call& call);
Result infer_flatten(const Call& call);
Result infer_getitem(const Call& call);
Result infer_slice_select(const Call& call);
Result infer_split_chunk(const Call& call);  // split and chunk
Result infer_contiguous(const Call& call);

// shape_rules_data.cpp
Result infer_cat_stack(const Call& call);  // cat and stack
Result infer_gather(const Call& call);
Result infer_index_select(const Call& call);
Result infer_accumulate(const Call& call);  // index_add and scatter_add: x's type
Result infer_slice_scatter(const Call& call);  // x's type; src shaped as the slice
Result infer_embedding(const Call& call);
Result infer_tril_triu(const Call& call);  // tril and triu
Result infer_dropout(const Call& call);
Result infer_philox_rand(const Call& call);
Result infer_arange(const Call& call);  // int bounds (constant or symbolic): int64 or the dtype asked for  // f32 of the given sizes, on the seed's device

// shape_rules_symbolic.cpp: calls with symbolic sizes (pointwise and reduction families), by
// running the rule on constant stand-ins (see the file comment).
bool has_symbolic_tensor(const std::vector<Operand>& args, const std::vector<std::pair<std::string, Operand>>& kwargs);
Result infer_symbolic(ir::Op op, const std::vector<Operand>& args,
                      const std::vector<std::pair<std::string, Operand>>& kwargs, bool grad_enabled,
                      ir::DType default_dtype, const sym::Symbols* facts);
// The torch-call rules (shape_rules_torch.cpp) by the same stand-ins; conv and other rules whose
// sizes are arithmetic on sizes decline.
Result infer_symbolic_torch_call(std::string_view qualified_name, const std::vector<Operand>& args,
                                 const std::vector<std::pair<std::string, Operand>>& kwargs, bool grad_enabled,
                                 ir::DType default_dtype, const sym::Symbols* facts);
// shape_rules_symbolic_views.cpp: view ops, contiguous and cat over symbolic sizes, directly.
Result infer_symbolic_view(const Call& call);
// Tensor.repeat, over sizes constant or symbolic (a torch-call rule that reads sizes as expressions).
Result infer_repeat(const Call& call);
Result infer_repeat_interleave(const Call& call);  // an int count, over sizes constant or symbolic
Result infer_narrow(const Call& call);  // bounds inside the dim for every value of the symbols

// ---- Size formulas (infer_result_sizes) -------------------------------------------------------

using SizeLists = std::vector<std::vector<sym::Expr>>;
// Whether `rel` holds for every value of its symbols (each >= 1; constants are evaluated). Where it may
// fail for some: appended to `assumed` (true) when given, else false; false too where it never holds.
// The facts of the symbols `names`: their ranges from `facts` where given, else [least, inf].
sym::Symbols facts_of(const std::set<std::string>& names, const sym::Symbols* facts, int64_t least);
// `facts`: the symbols' ranges where known (a symbol not among them is taken as >= 1).
bool holds_or_assumed(const sym::Rel& rel, Assumptions* assumed, const sym::Symbols* facts, const std::string& why = "");

// shape_rules_nn.cpp: torch calls of neural-network layers (not core ops), by qualified name
Result infer_conv(const Call& call, int spatial_dims);  // conv1d, conv2d
// conv's result sizes over constant or symbolic input sizes (the weight's constant).
std::optional<SizeLists> conv_sizes(const Call& call, int spatial_dims, Assumptions* assumed);
// shape_rules_reduce.cpp: torch.max / torch.min's reduction forms (values and indices, or one 0-d value).
std::optional<SizeLists> extreme_reduction_sizes(const Call& call);
// shape_rules_symbolic_views.cpp: a subscript with advanced indices (int tensors, lists of ints).
std::optional<SizeLists> advanced_index_sizes(const Call& call, Assumptions* assumed);
Result infer_batch_norm(const Call& call);
Result infer_group_norm(const Call& call);
Result infer_rms_norm(const Call& call);
Result infer_sdpa(const Call& call);
Result infer_nll_loss(const Call& call, bool cross_entropy);  // nll_loss, cross_entropy

// Whether torch's is_non_overlapping_and_dense() holds: the elements tile one block of memory.
bool non_overlapping_and_dense(const Dense& t);

}  // namespace ember::shapes::rules
