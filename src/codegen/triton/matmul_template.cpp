// The matmul template (docs/codegen-triton.md, "Matmul template"): one Triton kernel doing an extern
// matmul (torch.mm, torch.matmul, torch.bmm, F.linear, torch.addmm) and the pointwise kernel the
// scheduler put right after it, for max-autotune to time against the two steps it replaces.
//
// The kernel: a tiled tl.dot over [BLOCK_M, BLOCK_N] output tiles, a K loop of BLOCK_K, programs in
// grouped order (GROUP_M rows of tiles share B's columns in L2), a batch axis for bmm, fp32
// accumulation (fp32 inputs: tl.dot's precision from allow_tf32), bias added in fp32, the
// accumulator rounded to the extern's dtype (what the epilogue would have loaded), then the
// epilogue's loop-IR body printed by the pointwise emitter over the tile (emit_kernel.cpp, tile
// mode), and its stores the kernel's only ones.
//
// Refused (the extern call + epilogue kernel stay the only candidate, with the reason): symbolic
// sizes or strides (sizes and strides are literals, as in Inductor's static-shape templates, so
// Triton knows a unit stride and vectorizes), operands other than f32/f16/bf16 of one dtype,
// leading dims that do not fold into rows, no elementwise kernel right after the call, an
// epilogue whose reads of the result are not the tile's own elements (tile_mismatch: the check
// that the epilogue's indexing matches the tile), a result anything else reads, int64 indexing.
#include <algorithm>
#include <optional>

#include "codegen/triton/emit_internal.h"
#include "loop_ir/collapse.h"
#include "codegen/triton/spelling.h"
#include "support/sha256.h"

namespace ember::codegen {

using loop_ir::Buffer;
using loop_ir::BufferId;
using loop_ir::ExternCall;
using loop_ir::Kernel;
using loop_ir::Node;
using loop_ir::Program;
using loop_ir::ScalarOp;

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

std::pair<int64_t, int64_t> MatmulTemplate::grid(const TritonConfig& config) const {
  int64_t bm = 1, bn = 1;
  for (const auto& [name, value] : config.blocks) {
    if (name == "BLOCK_M") bm = value;
    if (name == "BLOCK_N") bn = value;
  }
  return {ceil_div(m, bm) * ceil_div(n, bn), batch};
}

namespace {

constexpr int64_t kInt32Max = 2147483647;

struct Refusal {
  std::string why;
};

int64_t constant(const sym::Expr& e, const std::string& what) {
  if (!e.is_constant()) throw Refusal{what + " is symbolic (" + e.str() + "): the template needs constant sizes"};
  return e.constant();
}

// A matmul operand addressed from its root buffer: element (b, r, c) at offset + b*sb + r*sr + c*sc.
struct Operand {
  BufferId root = -1;
  ir::DType dtype = ir::DType::Float32;
  int64_t offset = 0, sb = 0, sr = 0, sc = 0;
  int64_t rows = 1, cols = 1, batch = 1;
  int64_t span = 0;  // one past the last element it reaches, from the root's element 0
};

// Buffer `id` as an operand: its last dim the columns, the one before the rows, and either its
// first dim the batch (`batched`, rank 3) or every leading dim folded into the rows (they must
// be laid out as one dim). Rank 1 (a bias): one row.
Operand operand(const Program& p, BufferId id, bool batched) {
  const Buffer& buf = p.buffers.at(static_cast<size_t>(id));
  Operand o;
  o.root = p.storage_root(id);
  o.dtype = buf.dtype;
  for (BufferId cur = id;; cur = p.buffers.at(static_cast<size_t>(cur)).base) {
    const Buffer& b = p.buffers.at(static_cast<size_t>(cur));
    o.offset += constant(b.offset, "%" + b.name() + "'s offset");
    if (b.kind != Buffer::Kind::View) break;
  }
  const size_t r = buf.sizes.size();
  std::vector<int64_t> size, stride;
  for (size_t d = 0; d < r; ++d) {
    size.push_back(constant(buf.sizes[d], "%" + buf.name() + "'s size"));
    stride.push_back(constant(buf.strides[d], "%" + buf.name() + "'s stride"));
  }
  if (r == 0 || (batched && r != 3)) throw Refusal{"%" + buf.name() + " has rank " + std::to_string(r)};
  o.cols = size[r - 1];
  o.sc = stride[r - 1];
  if (batched) {
    o.batch = size[0];
    o.sb = stride[0];
  }
  // Rows: dims [first, r - 1), each non-trivial one a whole number of the next one's.
  const size_t first = batched ? 1 : 0;
  o.sr = r >= 2 ? stride[r - 2] : 0;
  int64_t inner = 0, inner_stride = 0;  // the last non-trivial row dim seen, walking outwards
  for (size_t d = r - 1; d-- > first;) {
    o.rows *= size[d];
    if (size[d] == 1) continue;
    if (inner != 0 && stride[d] != inner * inner_stride)
      throw Refusal{"%" + buf.name() + "'s leading dims do not fold into rows"};
    if (inner == 0) o.sr = stride[d];
    inner = size[d];
    inner_stride = stride[d];
  }
  o.span = o.offset + 1;
  for (size_t d = 0; d < r; ++d) o.span += (size[d] - 1) * stride[d];
  if (std::any_of(size.begin(), size.end(), [](int64_t s) { return s == 0; })) throw Refusal{"an empty operand"};
  return o;
}

Operand transposed(Operand o) {
  std::swap(o.rows, o.cols);
  std::swap(o.sr, o.sc);
  return o;
}

// C[batch, m, n] = A[batch, m, k] @ B[batch, k, n] (+ bias[n]).
struct Matmul {
  Operand a, b;
  std::optional<Operand> bias;
  bool batched = false;
  int64_t batch = 1, m = 0, n = 0, k = 0;
  BufferId result = -1;
};

bool is_matmul(const std::string& f) {
  return f == "torch.mm" || f == "torch.matmul" || f == "torch.bmm" || f == "torch.nn.functional.linear" ||
         f == "torch.addmm";
}

Matmul recognize(const Program& p, const ExternCall& call) {
  const std::string& f = call.callable;
  auto value = [&](size_t i) {
    if (i >= call.args.size() || call.args[i].kind != ir::Arg::Kind::Value)
      throw Refusal{"argument " + std::to_string(i) + " is not a tensor"};
    return static_cast<BufferId>(call.args[i].value);
  };
  auto rank = [&](BufferId id) { return p.buffers.at(static_cast<size_t>(id)).sizes.size(); };
  if (call.results.size() != 1) throw Refusal{"not one result"};
  Matmul mm;
  mm.result = call.results[0];
  std::optional<BufferId> bias;
  const bool linear = f == "torch.nn.functional.linear";
  for (const auto& [key, arg] : call.kwargs) {
    if (!linear || key != "bias") throw Refusal{"keyword argument " + key};
    if (arg.kind == ir::Arg::Kind::Value) bias = static_cast<BufferId>(arg.value);
  }
  if (linear) {
    if (call.args.size() < 2 || call.args.size() > 3) throw Refusal{"linear with " + std::to_string(call.args.size()) + " arguments"};
    if (rank(value(1)) != 2) throw Refusal{"a weight of rank " + std::to_string(rank(value(1)))};
    if (rank(value(0)) < 2) throw Refusal{"an input of rank 1"};
    mm.a = operand(p, value(0), false);
    mm.b = transposed(operand(p, value(1), false));  // w[n, k]
    if (call.args.size() == 3 && call.args[2].kind == ir::Arg::Kind::Value) bias = value(2);
  } else if (f == "torch.addmm") {
    if (call.args.size() != 3) throw Refusal{"addmm with " + std::to_string(call.args.size()) + " arguments"};
    if (rank(value(1)) != 2 || rank(value(2)) != 2) throw Refusal{"addmm of operands that are not matrices"};
    mm.a = operand(p, value(1), false);
    mm.b = operand(p, value(2), false);
    bias = value(0);
  } else {
    if (call.args.size() != 2) throw Refusal{std::to_string(call.args.size()) + " arguments"};
    const size_t ra = rank(value(0)), rb = rank(value(1));
    mm.batched = ra == 3 && rb == 3;
    if (!mm.batched && !(rb == 2 && ra >= 2 && f != "torch.bmm"))
      throw Refusal{"operands of ranks " + std::to_string(ra) + " and " + std::to_string(rb)};
    mm.a = operand(p, value(0), mm.batched);
    mm.b = operand(p, value(1), mm.batched);
    if (mm.batched && mm.a.batch != mm.b.batch) throw Refusal{"batches differ (a broadcast)"};
  }
  mm.batch = mm.a.batch;
  mm.m = mm.a.rows;
  mm.k = mm.a.cols;
  mm.n = mm.b.cols;
  if (mm.b.rows != mm.k) throw Refusal{"inner sizes differ"};
  if (bias) {
    mm.bias = operand(p, *bias, false);
    if (mm.bias->rows != 1 || mm.bias->cols != mm.n) throw Refusal{"a bias that is not one row of n"};
  }
  const Buffer& result = p.buffers.at(static_cast<size_t>(mm.result));
  const ir::DType dt = result.dtype;
  if (dt != ir::DType::Float32 && dt != ir::DType::Float16 && dt != ir::DType::BFloat16)
    throw Refusal{std::string("dtype ") + ir::dtype_name(dt)};
  if (mm.a.dtype != dt || mm.b.dtype != dt || (mm.bias && mm.bias->dtype != dt)) throw Refusal{"mixed dtypes"};
  for (const Operand* o : {&mm.a, &mm.b}) {
    if (o->span > kInt32Max) throw Refusal{"an operand spans past INT32_MAX elements"};
  }
  if (mm.batch * mm.m * mm.n > kInt32Max) throw Refusal{"the result has more than INT32_MAX elements"};
  return mm;
}

bool same_root(const Program& p, BufferId a, BufferId b) { return p.storage_root(a) == p.storage_root(b); }

std::string dims_text(const std::vector<sym::Expr>& v) {
  std::string s;
  for (const sym::Expr& e : v) s += (s.empty() ? "" : ", ") + e.str();
  return "[" + s + "]";
}

// How an epilogue kernel's points map onto the template's accumulator tile (fit_tile):
// - Split: its points are the result's dims (bmm: the batch first), the leading ones split out of the
//   tile's row, the last its column, and it reads the result at each point's own element;
// - Flat: a row-major result whose elements its points enumerate in row-major order, read through the
//   result or a view of it at offset 0 at each point's own flat element: a collapsed kernel's one flat
//   variable, or the [..., M, N] view of a matmul whose batch dims lowering folded
//   (fold_matmul_batch_dims). Each variable is decoded from the element's flat index
//   (pid_b * M * N +) rm * N + rn.
enum class TileMap { Split, Flat };

struct TileFit {
  BufferId tile = -1;  // the buffer the epilogue reads the result through (the template's registers)
  TileMap map = TileMap::Split;
  std::string why;     // not empty: the epilogue cannot run on the tile (the verifier check of its
                       // indexing against the tile), and why
};

TileFit fit_tile(const Program& p, const Matmul& mm, const Kernel& k) {
  TileFit fit;
  auto refuse = [&fit](std::string why) {
    fit.why = std::move(why);
    return fit;
  };
  for (const loop_ir::Loop& loop : k.loops)
    if (!loop.ranges.empty()) return refuse("it is a reduction, not elementwise");
  std::vector<const Node*> reads;
  for (const Node& n : k.nodes) {
    if (n.op == ScalarOp::Store) {
      if (n.accumulate) return refuse("it adds into %b" + std::to_string(n.buffer) + " (an accumulating store)");
      if (same_root(p, n.buffer, mm.result)) return refuse("it writes the matmul's result");
      for (BufferId read : {mm.a.root, mm.b.root, mm.bias ? mm.bias->root : mm.a.root})
        if (same_root(p, n.buffer, read)) return refuse("it writes %b" + std::to_string(read) + ", which the matmul reads");
      continue;
    }
    if (n.op != ScalarOp::Load || !same_root(p, n.buffer, mm.result)) continue;
    if (!n.operands.empty()) return refuse("a masked load of the result");
    if (fit.tile >= 0 && n.buffer != fit.tile)
      return refuse("it reads the result through both %b" + std::to_string(fit.tile) + " and %b" + std::to_string(n.buffer));
    fit.tile = n.buffer;
    reads.push_back(&n);
  }
  if (reads.empty()) return refuse("it does not read the matmul's result");
  const Buffer& result = p.buffers.at(static_cast<size_t>(mm.result));
  const Buffer& tile = p.buffers.at(static_cast<size_t>(fit.tile));
  if (fit.tile != mm.result && !(tile.kind == Buffer::Kind::View && tile.base == mm.result && tile.offset == sym::Expr(int64_t{0})))
    return refuse("it reads the result through view %b" + std::to_string(fit.tile));
  auto own_element = [](const Node& n) {
    for (size_t d = 0; d < n.index.size(); ++d)
      if (n.index[d] != sym::Expr::symbol("i" + std::to_string(d))) return false;
    return true;
  };
  if (fit.tile == mm.result && k.ranges == result.sizes &&
      std::all_of(reads.begin(), reads.end(), [&](const Node* n) { return own_element(*n); }))
    return fit;
  sym::Expr points = int64_t{1}, elements = int64_t{1}, flat = int64_t{0};
  for (const sym::Expr& e : result.sizes) elements = elements * e;
  for (size_t d = 0; d < k.ranges.size(); ++d) {
    points = points * k.ranges[d];
    flat = flat * k.ranges[d] + sym::Expr::symbol("i" + std::to_string(d));
  }
  if (result.strides != ir::contiguous_strides(result.sizes) || points != elements)
    return refuse("its points " + dims_text(k.ranges) + " are not the result's " + dims_text(result.sizes));
  for (const Node* n : reads)
    if (loop_ir::flat_offset(tile, n->index) != loop_ir::simplify(flat, {}))
      return refuse("it reads the result at " + dims_text(n->index) + ", not at the tile's own element");
  fit.map = TileMap::Flat;
  return fit;
}

// Empty when nothing but kernel `epilogue` uses the result; else who does.
std::string other_use(const Program& p, BufferId result, int epilogue) {
  for (BufferId out : p.outputs)
    if (same_root(p, out, result)) return "the result is a graph output";
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    if (static_cast<int>(k) == epilogue) continue;
    for (const Node& n : p.kernels[k].nodes)
      if ((n.op == ScalarOp::Load || n.op == ScalarOp::Store) && same_root(p, n.buffer, result))
        return "kernel " + p.kernels[k].name + " reads the result too";
  }
  for (size_t e = 0; e < p.externs.size(); ++e)
    for (BufferId b : p.externs[e].buffer_args())
      if (same_root(p, b, result)) return "extern " + std::to_string(e) + " reads the result too";
  return "";
}

// (BLOCK_M, BLOCK_N, BLOCK_K for 2-byte inputs, num_stages, num_warps), the first the guess for
// large sizes. From Inductor's mm configs for CUDA (kernel/mm_common.py); fp32 inputs halve
// BLOCK_K (the same 128 bytes of a row per stage, so the same shared memory). The guess has 8
// warps: with 4, a 64x128 tile and a gelu epilogue spill (ptxas: 204 bytes, sm_90) -- the
// epilogue's tiles live beside the accumulator.
struct ConfigRow {
  int64_t bm, bn, bk, stages, warps;
};
constexpr ConfigRow kConfigs[] = {
    {128, 128, 64, 3, 8}, {128, 128, 64, 4, 4}, {64, 128, 64, 3, 4}, {128, 64, 32, 4, 8},
    {64, 64, 64, 3, 8},   {128, 128, 32, 3, 4}, {64, 64, 32, 2, 4},  {32, 32, 128, 2, 4},
};
constexpr int64_t kGroupM = 8;

std::vector<TritonConfig> configs(const Matmul& mm, int max_configs, std::string* reasons) {
  const int64_t item = ir::dtype_itemsize(mm.a.dtype);
  // tl.dot needs every block dimension >= 16.
  auto cap = [](int64_t block, int64_t size) { return std::min(block, std::max<int64_t>(16, triton::next_pow2(size))); };
  std::vector<TritonConfig> list;
  for (const ConfigRow& row : kConfigs) {
    TritonConfig c;
    c.blocks = {{"BLOCK_M", cap(row.bm, mm.m)},
                {"BLOCK_N", cap(row.bn, mm.n)},
                {"BLOCK_K", cap(std::max<int64_t>(16, row.bk * 2 / item), mm.k)},
                {"GROUP_M", kGroupM}};
    c.num_stages = static_cast<int>(row.stages);
    c.num_warps = static_cast<int>(row.warps);
    const bool seen = std::any_of(list.begin(), list.end(), [&](const TritonConfig& o) {
      return o.blocks == c.blocks && o.num_stages == c.num_stages && o.num_warps == c.num_warps;
    });
    if (!seen) list.push_back(c);
  }
  if (list.size() > static_cast<size_t>(std::max(1, max_configs))) list.resize(static_cast<size_t>(std::max(1, max_configs)));
  *reasons += "# configs: Inductor's mm configs for sm_90, BLOCK_K of 128 bytes, blocks <= next_pow2(size) and >= 16\n";
  for (const TritonConfig& c : list) *reasons += "#   " + c.str() + "\n";
  return list;
}

int64_t largest_block(const std::vector<TritonConfig>& list, const std::string& name) {
  int64_t v = 1;
  for (const TritonConfig& c : list)
    for (const auto& [block, value] : c.blocks)
      if (block == name) v = std::max(v, value);
  return v;
}

// " + 3*x" pieces of an address: nothing for a zero stride.
std::string term(int64_t stride, const std::string& var) {
  if (stride == 0) return "";
  return " + " + var + (stride == 1 ? "" : "*" + std::to_string(stride));
}

TritonParam pointer(const std::string& name, const Operand& o) {
  TritonParam p;
  p.kind = TritonParam::Kind::Pointer;
  p.use = TritonParam::Use::Load;
  p.name = name;
  p.type = std::string("*") + triton::dtype_spelling(o.dtype).signature;
  p.buffer = o.root;
  return p;
}

MatmulTemplate build(const Program& p, const Matmul& mm, const TileFit& fit, int extern_index, int epilogue,
                     const TritonOptions& options) {
  MatmulTemplate t;
  t.extern_index = extern_index;
  t.epilogue = epilogue;
  t.batch = mm.batch;
  t.m = mm.m;
  t.n = mm.n;
  t.k = mm.k;
  const ExternCall& call = p.externs.at(static_cast<size_t>(extern_index));
  const Buffer& result = p.buffers.at(static_cast<size_t>(mm.result));
  const triton::TDTypeSpelling& dt = triton::dtype_spelling(result.dtype);
  const bool fp32 = result.dtype == ir::DType::Float32;
  std::string reasons = "# matmul template: " + call.callable + " as C" + std::string(mm.batched ? "[B, M, N]" : "[M, N]") +
                        " = A @ B" + (mm.bias ? " + bias[N]" : "") + ", " + ir::dtype_name(result.dtype) +
                        " operands, fp32 accumulation" +
                        (fp32 ? std::string(", tf32 ") + (options.allow_tf32 ? "allowed" : "not allowed") : "") + "\n";
  reasons += "# sizes: B " + std::to_string(mm.batch) + ", M " + std::to_string(mm.m) + ", N " + std::to_string(mm.n) +
             ", K " + std::to_string(mm.k) + "\n";
  t.kernel.kind = TritonKernel::Kind::Matmul;
  t.kernel.configs = configs(mm, options.max_configs, &reasons);
  const bool m_tail = mm.m % largest_block(t.kernel.configs, "BLOCK_M") != 0;
  const bool n_tail = mm.n % largest_block(t.kernel.configs, "BLOCK_N") != 0;
  const bool k_tail = mm.k % largest_block(t.kernel.configs, "BLOCK_K") != 0;
  reasons += std::string("# tails: M ") + (m_tail ? "wraps (rm % M) and is masked at the store" : "none") + ", N " +
             (n_tail ? "wraps and is masked" : "none") + ", K " + (k_tail ? "masked" : "none") + "\n";
  reasons += "# epilogue: kernel " + p.kernels[static_cast<size_t>(epilogue)].name +
             " on the accumulator tile" + (fp32 ? "" : std::string(", rounded to ") + ir::dtype_name(result.dtype) + " first (the extern's result)") + "\n";
  triton::TileEpilogue ep = triton::tile_epilogue(p, p.kernels[static_cast<size_t>(epilogue)], fit.tile, m_tail || n_tail);
  if (!ep.refused.empty()) throw Refusal{ep.refused};

  t.kernel.params.push_back(pointer("a_ptr", mm.a));
  t.kernel.params.push_back(pointer("b_ptr", mm.b));
  if (mm.bias) t.kernel.params.push_back(pointer("bias_ptr", *mm.bias));
  t.kernel.params.insert(t.kernel.params.end(), ep.params.begin(), ep.params.end());
  t.kernel.check_sites = ep.check_sites;
  t.kernel.xnumel = mm.batch * mm.m * mm.n;

  std::string fn = "@triton.jit\ndef KERNEL_NAME(";
  for (const TritonParam& param : t.kernel.params) fn += param.name + ", ";
  fn += "BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):\n";
  std::string b;
  auto line = [&b](const std::string& text) { b += "    " + text + "\n"; };
  line("M = " + std::to_string(mm.m));
  line("N = " + std::to_string(mm.n));
  line("K = " + std::to_string(mm.k));
  line("pid = tl.program_id(0)");
  line("grid_m = (M + BLOCK_M - 1) // BLOCK_M");
  line("grid_n = (N + BLOCK_N - 1) // BLOCK_N");
  line("width = GROUP_M * grid_n");
  line("group_id = pid // width");
  line("group_size = tl.minimum(grid_m - group_id * GROUP_M, GROUP_M)");
  line("pid_m = group_id * GROUP_M + pid % group_size");
  line("pid_n = (pid % width) // group_size");
  line("rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)");
  line("rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)");
  line("rk = tl.arange(0, BLOCK_K)");
  // A tail's rows and columns wrap onto valid ones (loads stay in bounds without masks, as
  // Inductor's template does); the store's mask drops them.
  line(std::string("ram = ") + (m_tail ? "rm % M" : "rm"));
  line(std::string("rbn = ") + (n_tail ? "rn % N" : "rn"));
  if (mm.batched) line("pid_b = tl.program_id(1)");
  line("a_ptrs = a_ptr + (" + std::to_string(mm.a.offset) + term(mm.a.sb, "pid_b") + term(mm.a.sr, "ram[:, None]") +
       term(mm.a.sc, "rk[None, :]") + ")");
  line("b_ptrs = b_ptr + (" + std::to_string(mm.b.offset) + term(mm.b.sb, "pid_b") + term(mm.b.sr, "rk[:, None]") +
       term(mm.b.sc, "rbn[None, :]") + ")");
  line("acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)");
  line("for k in range(0, K, BLOCK_K):");
  line(std::string("    a = tl.load(a_ptrs") + (k_tail ? ", mask=rk[None, :] < K - k, other=0.0" : "") + ")");
  line(std::string("    b = tl.load(b_ptrs") + (k_tail ? ", mask=rk[:, None] < K - k, other=0.0" : "") + ")");
  // f16/bf16 operands go through eh.dot_operand: the identity on the GPU, an upcast in Triton's
  // interpreter (whose tl.dot multiplies bf16 bit patterns).
  const std::string dot = fp32 ? "tl.dot(a, b" : "tl.dot(eh.dot_operand(a), eh.dot_operand(b)";
  line("    acc += " + dot + (fp32 ? (options.allow_tf32 ? ", input_precision=\"tf32\"" : ", input_precision=\"ieee\"") : "") + ")");
  line("    a_ptrs += BLOCK_K" + (mm.a.sc == 1 ? std::string() : " * " + std::to_string(mm.a.sc)));
  line("    b_ptrs += BLOCK_K" + (mm.b.sr == 1 ? std::string() : " * " + std::to_string(mm.b.sr)));
  if (mm.bias)
    line("acc += tl.load(bias_ptr + (" + std::to_string(mm.bias->offset) + term(mm.bias->sc, "rbn[None, :]") + "))" +
         (fp32 ? "" : ".to(tl.float32)"));
  if (!fp32) line(std::string("acc = acc.to(") + dt.tl + ", fp_downcast_rounding=\"rtne\").to(tl.float32)");
  // The epilogue's loop variables over the tile (fit_tile). Split: the result's dims, the batch first
  // (bmm), the leading dims split out of the row, the last the column. Flat: each decoded from the
  // element's flat index, the last varying fastest.
  const std::string tile_shape = ", [BLOCK_M, BLOCK_N])";
  const std::vector<sym::Expr>& dims = fit.map == TileMap::Flat ? p.kernels[static_cast<size_t>(epilogue)].ranges
                                                                : result.sizes;
  const size_t rank = dims.size();
  size_t d0 = 0;
  if (fit.map == TileMap::Flat)
    line(std::string("f = ") + (mm.batched ? "pid_b * " + std::to_string(mm.m * mm.n) + " + " : "") +
         "rm[:, None] * N + rn[None, :]");
  else if (mm.batched)
    line("i" + std::to_string(d0++) + " = tl.broadcast_to(pid_b" + tile_shape);
  int64_t inner = 1;
  std::vector<std::string> vars;
  for (size_t d = rank; d-- > d0;) {
    const bool last = d + 1 == rank;
    const int64_t extent = dims[d].constant();
    std::string v;
    if (fit.map == TileMap::Split && last) {
      v = "tl.broadcast_to(rn[None, :]" + tile_shape;
    } else if (extent == 1) {
      v = "tl.zeros([BLOCK_M, BLOCK_N], tl.int32)";
    } else if (fit.map == TileMap::Flat) {
      v = inner == 1 ? "f" : "(f // " + std::to_string(inner) + ")";
      if (d != d0) v = "(" + v + " % " + std::to_string(extent) + ")";
    } else {
      const int64_t row_inner = inner / dims[rank - 1].constant();  // the column's extent is not in the row
      v = row_inner == 1 ? "rm" : "(rm // " + std::to_string(row_inner) + ")";
      if (d != d0) v = "(" + v + " % " + std::to_string(extent) + ")";
      v = "tl.broadcast_to(" + v + "[:, None]" + tile_shape;
    }
    vars.push_back("i" + std::to_string(d) + " = " + v);
    inner *= extent;
  }
  for (auto it = vars.rbegin(); it != vars.rend(); ++it) line(*it);
  if (m_tail || n_tail) line("xmask = (rm[:, None] < M) & (rn[None, :] < N)");

  std::string text = "import triton\nimport triton.language as tl\n";
  if ((fn + b + ep.body).find("eh.") != std::string::npos) text += "from ember._triton import helpers as eh\n";
  text += "\n\n" + reasons + fn + b + ep.body;
  t.kernel.name = std::string("ember_") + (mm.batched ? "bmm_" : "mm_") +
                  triton::op_names(p.kernels[static_cast<size_t>(epilogue)]) + sha256_hex(text).substr(0, 8);
  const size_t at = text.find("KERNEL_NAME");
  t.kernel.source = text.replace(at, std::string("KERNEL_NAME").size(), t.kernel.name);
  return t;
}

}  // namespace

namespace triton {

void add_matmul_templates(const Program& p, const TritonOptions& options, TritonSource* source) {
  for (size_t s = 0; s < p.steps.size(); ++s) {
    if (p.steps[s].kind != loop_ir::Step::Kind::Extern) continue;
    const int e = p.steps[s].index;
    const ExternCall& call = p.externs.at(static_cast<size_t>(e));
    if (!is_matmul(call.callable)) continue;
    try {
      const Matmul mm = recognize(p, call);
      if (s + 1 >= p.steps.size() || p.steps[s + 1].kind != loop_ir::Step::Kind::Kernel)
        throw Refusal{"no kernel step follows it"};
      const int k = p.steps[s + 1].index;
      const Kernel& kernel = p.kernels.at(static_cast<size_t>(k));
      for (const loop_ir::Group& g : p.groups)
        if (std::find(g.kernels.begin(), g.kernels.end(), k) != g.kernels.end())
          throw Refusal{"kernel " + kernel.name + " runs in grouped kernel @" + g.name};
      const TileFit fit = fit_tile(p, mm, kernel);
      if (!fit.why.empty()) throw Refusal{"kernel " + kernel.name + ": " + fit.why};
      if (std::string why = other_use(p, mm.result, k); !why.empty()) throw Refusal{why};
      source->matmul_templates.push_back(build(p, mm, fit, e, k, options));
    } catch (const Refusal& r) {
      source->matmul_refusals.push_back("extern " + std::to_string(e) + " (" + call.callable + "): " + r.why);
    } catch (const CodegenError& err) {  // the epilogue has what Triton code generation refuses
      source->matmul_refusals.push_back("extern " + std::to_string(e) + " (" + call.callable + "): " + err.what());
    }
  }
}

}  // namespace triton

}  // namespace ember::codegen
