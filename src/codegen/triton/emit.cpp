// emit_triton: per loop-IR kernel, the decisions taken from sizes — kind, index width, configs,
// parameters — then the module text (body: emit_kernel.cpp) and its content-derived name.
//
// Kinds (docs/codegen-triton.md). No loop with ranges: Pointwise. Every ranged loop's trip count at
// most options.persistent_max_rnumel: PersistentReduction (RBLOCK = next_pow2 of the longest).
// Else LoopedReduction. Configs follow Inductor's heuristics (triton_heuristics.py: pointwise,
// _persistent_reduction_configs, _reduction_configs), simplified; the reasons are printed above
// each kernel. Masks: xmask only where xnumel does not divide some candidate XBLOCK, rmask per
// loop likewise (blocks are powers of two, so dividing the largest candidate is enough).
#include <algorithm>
#include <cctype>
#include <limits>
#include <map>
#include <set>

#include "codegen/triton/emit_internal.h"
#include "codegen/triton/spelling.h"
#include "loop_ir/group.h"
#include "scheduler/scheduler.h"
#include "support/sha256.h"
#include "sym/range.h"

namespace ember::codegen {

using loop_ir::Buffer;
using loop_ir::BufferId;
using loop_ir::Kernel;
using loop_ir::Node;
using loop_ir::Program;
using loop_ir::ScalarOp;
using triton::KernelShape;

std::string TritonConfig::str() const {
  std::string s;
  for (const auto& [name, value] : blocks) s += name + "=" + std::to_string(value) + " ";
  return s + "num_warps=" + std::to_string(num_warps) + " num_stages=" + std::to_string(num_stages);
}

std::vector<std::pair<std::string, std::string>> TritonKernel::signature() const {
  std::vector<std::pair<std::string, std::string>> sig;
  if (launched_by >= 0) return sig;  // no function of its own
  for (const TritonParam& p : params) sig.emplace_back(p.name, p.type);
  for (const auto& block : configs.at(0).blocks) sig.emplace_back(block.first, "constexpr");
  return sig;
}

std::vector<sym::Rel> TritonSource::assumptions() const {
  std::vector<sym::Rel> out;
  auto add = [&](const TritonKernel& k) {
    for (const sym::Rel& r : k.assumptions)
      if (std::find(out.begin(), out.end(), r) == out.end()) out.push_back(r);
  };
  for (const TritonKernel& k : kernels) add(k);
  for (const MatmulTemplate& t : matmul_templates) add(t.kernel);
  return out;
}

namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
using triton::next_pow2;

int64_t clamp_pow2(int64_t v, int64_t lo, int64_t hi) { return next_pow2(std::min(std::max(v, lo), hi)); }

const char* kind_name(TritonKernel::Kind kind) {
  switch (kind) {
    case TritonKernel::Kind::Pointwise: return "pointwise";
    case TritonKernel::Kind::PersistentReduction: return "persistent reduction";
    case TritonKernel::Kind::LoopedReduction: return "looped reduction";
    case TritonKernel::Kind::Matmul: return "matmul template";
    case TritonKernel::Kind::Group: return "grouped kernel";
  }
  return "?";
}

// Whether `text` has `name` as a whole identifier (not inside a longer one: s1 in s12 or ks1).
bool names_identifier(const std::string& text, const std::string& name) {
  auto identifier_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t at = text.find(name); at != std::string::npos; at = text.find(name, at + 1)) {
    const size_t end = at + name.size();
    if ((at == 0 || !identifier_char(text[at - 1])) && (end == text.size() || !identifier_char(text[end]))) return true;
  }
  return false;
}

bool is_program_symbol(const std::string& name, const sym::Symbols& symbols) {
  return std::any_of(symbols.begin(), symbols.end(), [&](const sym::SymbolInfo& s) { return s.name == name; });
}

// The largest value `e` takes over the symbols' ranges (kInf when unbounded above).
int64_t largest(const sym::Expr& e, const sym::Symbols& symbols) { return sym::bound(e, symbols).hi; }

// `e` at the symbols' hints: a heuristic input only (configs), never a decision about validity.
int64_t at_hints(const sym::Expr& e, const sym::Symbols& symbols) {
  std::map<std::string, int64_t> hints;
  for (const sym::SymbolInfo& s : symbols) hints[s.name] = s.hint;
  return sym::evaluate(e, hints);
}


// Elements from element 0 to one past the last the strides reach (0 if a size is 0).
sym::Expr span_of(const Buffer& b, const sym::Symbols& symbols) {
  sym::Expr span = 1;
  for (size_t d = 0; d < b.sizes.size(); ++d) {
    if (b.sizes[d].is_constant() && b.sizes[d].constant() == 0) return 0;
    if (sym::bound(b.strides[d], symbols).lo < 0) throw CodegenError("%" + b.name() + " has a negative stride");
    span = span + (b.sizes[d] - 1) * b.strides[d];
  }
  // A dense buffer spans its element count: the same value, in the product form relations compare.
  return b.strides == ir::contiguous_strides(b.sizes) ? sym::product(b.sizes) : span;
}

void check_symbols(const sym::Expr& e, const Node& n, const sym::Symbols& symbols) {
  if (e.kind() == sym::ExprKind::Symbol) {
    const std::string& s = e.symbol_name();
    if (is_program_symbol(s, symbols)) return;
    const bool numbered = s.size() > 1 && std::all_of(s.begin() + 1, s.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!numbered || (s[0] != 'i' && s[0] != 'r' && s[0] != 't'))
      throw CodegenError("node " + triton::node_desc(n) + ": index symbol '" + s +
                         "' is neither a loop variable, a node nor a shape symbol of the program");
    return;
  }
  for (const sym::Expr& o : e.operands()) check_symbols(o, n, symbols);
}

// Pointer parameters of `roots` (each with its use: 1 loaded, 2 stored, 3 both), in order: named
// in_ptr<k>, out_ptr<k> or in_out_ptr<k>, counted per use, typed by the buffer's dtype.
std::vector<TritonParam> pointer_params(const Program& program, const std::vector<std::pair<BufferId, int>>& roots) {
  static const char* kPrefix[4] = {"", "in_ptr", "out_ptr", "in_out_ptr"};
  std::vector<TritonParam> list;
  int counts[4] = {};
  for (const auto& [root, use] : roots) {
    TritonParam p;
    p.kind = TritonParam::Kind::Pointer;
    p.use = static_cast<TritonParam::Use>(use);
    p.name = kPrefix[use] + std::to_string(counts[use]++);
    p.type = std::string("*") + triton::dtype_spelling(program.buffers.at(static_cast<size_t>(root)).dtype).signature;
    p.buffer = root;
    list.push_back(p);
  }
  return list;
}

class KernelEmitter {
 public:
  KernelEmitter(const Program& p, const Kernel& k, const TritonOptions& o) : program_(p), kernel_(k), options_(o) {}

  triton::TileEpilogue tile(BufferId accumulator, bool xmask) {
    shape_.tile = true;
    shape_.accumulator = accumulator;
    check_and_collect();
    measure();
    shape_.xmask = xmask;
    triton::TileEpilogue out;
    out.params = params();
    if (shape_.int64) out.refused = "the epilogue needs int64 indexing";
    if (!mentioned_program_symbols().empty()) out.refused = "the epilogue has symbolic sizes";
    out.body = triton::emit_body(program_, kernel_, shape_, &out.check_sites);
    return out;
  }

  TritonKernel emit() {
    TritonKernel out;
    check_and_collect();
    measure();
    out.kind = shape_.kind;
    out.xnumel = shape_.xnumel;
    out.rnumel = shape_.rnumel;
    out.assumptions = assumptions_;
    out.configs = configs();
    decide_masks(out.configs);
    out.params = params();
    const std::string body = triton::emit_body(program_, kernel_, shape_, &out.check_sites);
    drop_unread_sizes(body, out.params);

    std::string fn = "@triton.jit\ndef KERNEL_NAME(";
    for (const TritonParam& p : out.params) fn += p.name + ", ";
    fn += "XBLOCK: tl.constexpr";
    if (shape_.kind != TritonKernel::Kind::Pointwise) fn += ", RBLOCK: tl.constexpr";
    fn += "):\n" + body;
    std::string text = "import triton\nimport triton.language as tl\n";
    if (fn.find("eh.") != std::string::npos) text += "from ember._triton import helpers as eh\n";
    text += "\n\n" + reasons_ + fn;
    out.name = name(text);
    const size_t at = text.find("KERNEL_NAME");
    out.source = text.replace(at, std::string("KERNEL_NAME").size(), out.name);
    return out;
  }

  // Each buffer a group member accesses, with the element offset of its element 0 from its root's
  // (check_and_collect's map, with its checks of dtypes and offsets).
  const std::map<BufferId, sym::Expr>& member_roots() {
    check_and_collect();
    return shape_.root_offset;
  }

  // A grouped kernel's body (this emitter's kernel is loop_ir::group_body's): the @triton.jit helper
  // `body(<pointers>, xnumel, xblock, XBLOCK)` computing block `xblock` of one member, its parameters
  // (pointers by body buffer, then the sizes), its one config and the reasons for both.
  struct GroupBody {
    std::vector<TritonParam> params;
    TritonConfig config;
    std::string function, reasons;
  };
  GroupBody group_body() {
    shape_.block_param = "xblock";
    check_and_collect();
    measure();
    std::vector<TritonConfig> list = configs();
    list.resize(1);  // the grouped kernel's program ranges are laid out for one XBLOCK
    decide_masks(list);
    GroupBody out;
    out.config = list.front();
    out.params = params();
    std::vector<std::string> sites;
    const std::string body = triton::emit_body(program_, kernel_, shape_, &sites);
    drop_unread_sizes(body, out.params);
    if (!assumptions_.empty() || !sites.empty())
      throw CodegenError("a grouped kernel's body needs a guard or an index check: not a group member");
    out.function = "@triton.jit\ndef body(";
    for (const TritonParam& p : out.params) out.function += p.name + ", ";
    out.function += "xblock, XBLOCK: tl.constexpr):\n" + body;
    out.reasons = reasons_;
    return out;
  }

 private:
  // A symbol the body never reads (its extents collapsed into xnumel, a stride only the collapsed
  // access had) is no parameter: one fewer argument, and one fewer divisibility class to build.
  static void drop_unread_sizes(const std::string& body, std::vector<TritonParam>& params) {
    params.erase(std::remove_if(params.begin(), params.end(),
                                [&](const TritonParam& p) {
                                  return p.kind == TritonParam::Kind::Size && p.name != "xnumel" &&
                                         p.name != "rnumel" && !names_identifier(body, p.name);
                                }),
                 params.end());
  }

  // Every buffer the kernel touches is supported, with non-negative strides; views keep their
  // root's dtype. Records each root's parameter role in order of first use, and the shape symbols
  // the kernel's sizes and addresses mention (each becomes a parameter).
  void check_and_collect() {
    if (shape_.symbols != nullptr) return;  // done
    const sym::Symbols& symbols = program_.symbols;
    shape_.symbols = &symbols;
    auto mention = [&](const sym::Expr& e) { sym::free_symbols(e, mentioned_); };
    for (const sym::Expr& r : kernel_.ranges) mention(r);
    for (const loop_ir::Loop& loop : kernel_.loops)
      for (const sym::Expr& r : loop.ranges) mention(r);
    sym::Expr needed = 0;
    for (const Node& n : kernel_.nodes) {
      for (const sym::Expr& e : n.index) {
        check_symbols(e, n, symbols);
        mention(e);
      }
      if (n.op == ScalarOp::CheckIndex) mention(n.bound);
      if (n.op != ScalarOp::Load && n.op != ScalarOp::Store) continue;
      if (n.buffer == shape_.accumulator) continue;  // the template's registers
      const Buffer& b = program_.buffers.at(static_cast<size_t>(n.buffer));
      sym::Expr offset = 0;
      BufferId id = b.id;
      for (size_t depth = 0;; ++depth) {
        const Buffer& cur = program_.buffers.at(static_cast<size_t>(id));
        if (triton::dtype_spelling(cur.dtype).kind == triton::TKind::None)
          throw CodegenError("%" + cur.name() + ": Triton code generation does not support dtype " +
                             ir::dtype_name(cur.dtype));
        if (cur.dtype != b.dtype)
          throw CodegenError("view %" + b.name() + " (" + ir::dtype_name(b.dtype) + ") of %" + cur.name() + " (" +
                             ir::dtype_name(cur.dtype) + ") changes dtype: Triton code generation refuses it");
        if (sym::bound(cur.offset, symbols).lo < 0) throw CodegenError("%" + cur.name() + " may have a negative offset");
        offset = offset + cur.offset;
        span_of(cur, symbols);
        if (cur.kind != Buffer::Kind::View) break;
        if (depth > program_.buffers.size()) throw CodegenError("views form a cycle at %" + b.name());
        id = cur.base;
      }
      shape_.root_offset[b.id] = offset;
      mention(offset);
      for (const sym::Expr& stride : b.strides) mention(stride);
      needed = max(needed, offset + span_of(b, symbols));
      auto found = std::find_if(roots_.begin(), roots_.end(), [&](const auto& r) { return r.first == id; });
      if (found == roots_.end()) {
        roots_.push_back({id, 0});
        found = roots_.end() - 1;
      }
      found->second |= n.op == ScalarOp::Load ? 1 : 2;
    }
    for (const auto& [root, use] : roots_) needed = max(needed, span_of(program_.buffers.at(static_cast<size_t>(root)), symbols));
    span_needed_ = needed;
  }

  // Kind, trip counts and index width, each valid for every value the symbols' ranges allow.
  void measure() {
    const sym::Symbols& symbols = program_.symbols;
    shape_.xnumel = sym::product(kernel_.ranges);
    bool ranged = false;
    for (const loop_ir::Loop& loop : kernel_.loops) {
      shape_.loop_numel.push_back(sym::product(loop.ranges));
      if (loop.ranges.empty()) continue;
      shape_.rnumel = ranged ? max(shape_.rnumel, shape_.loop_numel.back()) : shape_.loop_numel.back();
      ranged = true;
    }
    if (shape_.rnumel.is_constant() && shape_.rnumel.constant() < 1) shape_.rnumel = 1;
    const int64_t longest = largest(shape_.rnumel, symbols);
    const std::string rnumel_text =
        shape_.rnumel.is_constant() ? shape_.rnumel.str() : shape_.rnumel.str() + " <= " + bound_text(longest);
    // An outer reduction (the loop reads across rows) keeps its coalesced looped config (64 columns
    // a program) past 64 rows: a persistent tile holds at most 4096 / RBLOCK columns, fewer than that.
    const bool outer_rows = ranged && longest > 64 && scheduler::outer_reduction(program_, kernel_);
    if (!ranged) {
      shape_.kind = TritonKernel::Kind::Pointwise;
      reasons_ = "# pointwise: no loop with ranges\n";
    } else if (outer_rows) {
      shape_.kind = TritonKernel::Kind::LoopedReduction;
      reasons_ = "# looped reduction: an outer reduction over " + rnumel_text + " rows (> 64): 64 columns a program\n";
    } else if (longest <= options_.persistent_max_rnumel) {
      shape_.kind = TritonKernel::Kind::PersistentReduction;
      shape_.persistent_rblock = next_pow2(longest);
      reasons_ = "# persistent reduction: every loop runs <= " + std::to_string(options_.persistent_max_rnumel) +
                 " times (rnumel " + rnumel_text + "): the row stays in registers\n";
    } else {
      shape_.kind = TritonKernel::Kind::LoopedReduction;
      reasons_ = "# looped reduction: rnumel " + rnumel_text + " > " + std::to_string(options_.persistent_max_rnumel) + "\n";
    }
    // Inductor's can_use_32bit_indexing: every index value and every buffer span fits int32 for every
    // value of the symbols; where a symbol is unbounded, int32 still when both fit at the hints, under a
    // guard on each (a call past one recompiles, and that graph's hints choose int64), as Inductor does.
    const sym::Expr points = shape_.xnumel * (ranged ? shape_.rnumel : sym::Expr(1));
    const int64_t most = largest(points, symbols), span = largest(span_needed_, symbols);
    shape_.int64 = most > kInt32Max || span > kInt32Max;
    std::string guarded;
    if (shape_.int64 && at_hints(points, symbols) <= kInt32Max && at_hints(span_needed_, symbols) <= kInt32Max) {
      shape_.int64 = false;
      for (const sym::Expr& e : {points, span_needed_}) assume_at_most(e, kInt32Max);
      for (const sym::Rel& rel : assumptions_) guarded += (guarded.empty() ? "; guarded: " : ", ") + rel.str();
    }
    reasons_ += std::string("# index: ") + (shape_.int64 ? "int64" : "int32") + " (xnumel*rnumel " +
                bound_text(most) + ", largest buffer span " + bound_text(span) + guarded +
                (shape_.int64 ? ": past INT32_MAX)\n" : ")\n");
    if (!mentioned_program_symbols().empty())
      reasons_ += "# sizes: symbolic, every extent masked; configs from the hints (" + hint_text() + ")\n";
  }

  // Assumes `e <= limit`: one relation per operand of a max (a span is the max over its accesses), each
  // simplified over the ranges, none the ranges already decide or another repeats.
  void assume_at_most(const sym::Expr& e, int64_t limit) {
    if (e.kind() == sym::ExprKind::Max) {
      for (const sym::Expr& operand : e.operands()) assume_at_most(operand, limit);
      return;
    }
    const sym::Expr simple = sym::simplify(e, program_.symbols);
    if (largest(simple, program_.symbols) <= limit) return;
    // One relation implies another when its side is known to be at least the other's (`s0 <= s0*s1`).
    auto implies = [&](const sym::Expr& big, const sym::Expr& small) {
      return sym::provable(sym::Rel{small, sym::RelOp::Le, big}, program_.symbols);
    };
    for (const sym::Rel& a : assumptions_)
      if (implies(a.lhs, simple)) return;
    assumptions_.erase(std::remove_if(assumptions_.begin(), assumptions_.end(),
                                      [&](const sym::Rel& a) { return implies(simple, a.lhs); }),
                       assumptions_.end());
    assumptions_.push_back(sym::Rel{simple, sym::RelOp::Le, limit});
  }

  static std::string bound_text(int64_t v) { return v == sym::Interval::kInf ? "unbounded" : std::to_string(v); }

  // The program's symbols the kernel mentions, in the program's order: its symbol parameters.
  std::vector<const sym::SymbolInfo*> mentioned_program_symbols() const {
    std::vector<const sym::SymbolInfo*> list;
    for (const sym::SymbolInfo& s : program_.symbols)
      if (mentioned_.count(s.name)) list.push_back(&s);
    return list;
  }

  std::string hint_text() const {
    std::string text;
    for (const sym::SymbolInfo* s : mentioned_program_symbols())
      text += (text.empty() ? "" : ", ") + s->name + "=" + std::to_string(s->hint);
    return text;
  }

  static TritonConfig config(int64_t xblock, int64_t rblock, int64_t warps) {
    TritonConfig c;
    c.blocks.emplace_back("XBLOCK", xblock);
    if (rblock > 0) c.blocks.emplace_back("RBLOCK", rblock);
    c.num_warps = static_cast<int>(warps);
    return c;
  }

  std::vector<TritonConfig> configs() {
    std::vector<TritonConfig> list;
    const int64_t xcap = next_pow2(at_hints(shape_.xnumel, program_.symbols));
    auto add = [&](int64_t xb, int64_t rb, int64_t warps) {
      xb = std::max<int64_t>(1, std::min(xb, xcap));
      for (const TritonConfig& c : list)
        if (c.blocks[0].second == xb && (rb <= 0 || c.blocks[1].second == rb) && c.num_warps == warps) return;
      list.push_back(config(xb, rb, warps));
    };
    switch (shape_.kind) {
      case TritonKernel::Kind::Pointwise: {
        // triton_config: num_warps = next_pow2(clamp(XBLOCK / 256, 1, 8)), at least 4 from 128.
        auto warps = [](int64_t xb, int64_t per_warp) {
          int64_t w = clamp_pow2(xb / per_warp, 1, 8);
          return xb >= 128 ? std::max<int64_t>(w, 4) : w;
        };
        const int64_t xb = std::min<int64_t>(1024, xcap);
        add(xb, 0, warps(xb, 256));
        add(xb / 2, 0, warps(xb / 2, 64));
        add(256, 0, warps(256, 256));
        add(128, 0, warps(128, 64));
        reasons_ += "# configs: XBLOCK = min(1024, next_pow2(xnumel)), num_warps from 256 elements per warp\n";
        break;
      }
      case TritonKernel::Kind::PersistentReduction: {
        const int64_t rb = shape_.persistent_rblock;
        auto fitting = [&](int64_t cap) { return std::max<int64_t>(1, std::min<int64_t>(cap, 4096 / rb)); };
        auto warps = [&](int64_t xb) { return clamp_pow2(std::min(xb, xcap) * rb / 256, 2, 8); };
        // A row of >= 256 elements per program on rb/256 warps (Inductor's choice for inner persistent
        // reductions; what max-autotune picked for softmax 8192x1024 f32 on the H200: 19.2 us, against 20.9 for
        // 4 rows on 8 warps); shorter rows, as many as fit 4096 elements.
        const int64_t xb = rb >= 256 ? 1 : fitting(128);
        add(xb, rb, rb >= 256 ? clamp_pow2(rb / 256, 2, 8) : warps(xb));
        for (int64_t alt : {1, 8, 32, 128}) add(fitting(alt), rb, warps(fitting(alt)));
        // For autotuning: rows of >= 256 reduced within one warp (Inductor's CUDA choice: no
        // shared-memory round or barrier per reduction), and 2 rows on 4 warps (what coordinate
        // descent found for softmax 8192x1024 f32 on the H200).
        if (rb >= 256) {
          add(fitting(std::min<int64_t>(1024 / rb, 8)), rb, 1);
          add(fitting(2), rb, 4);
        }
        reasons_ += "# configs: RBLOCK = next_pow2(rnumel), XBLOCK*RBLOCK <= 4096, num_warps from 256 elements per warp\n";
        break;
      }
      case TritonKernel::Kind::Matmul: break;  // not a loop-IR kernel's kind (matmul_template.cpp)
      case TritonKernel::Kind::LoopedReduction: {
        const int64_t row = next_pow2(at_hints(shape_.rnumel, program_.symbols));
        const int64_t rb = std::min<int64_t>(2048, row);
        if (scheduler::outer_reduction(program_, kernel_)) {
          add(64, 8, 4);
          reasons_ += "# configs: the loop reads across rows (outer reduction): XBLOCK=64 RBLOCK=8 keep loads coalesced\n";
        } else {
          // One row per program, 2048 elements an iteration on 8 warps: what max-autotune picked on the H200 for
          // rms_norm 8192x4096 bf16 (35.6 us) and, but for 2 rows a program, layer_norm(x + r) (52.8 us), against
          // 40.8 and 63.0 us for the whole row in one iteration on 16 warps (Inductor's add_persistent_rblock, kept
          // as a candidate).
          add(1, rb, clamp_pow2(rb / 256, 2, 16));
          reasons_ += "# configs: one row per program, RBLOCK = min(2048, next_pow2(rnumel)), num_warps = RBLOCK/256\n";
        }
        if (row <= 4096) add(1, row, clamp_pow2(row / 128, 2, 16));
        add(2, rb, clamp_pow2(rb / 256, 2, 16));  // coordinate descent's layer_norm choice
        add(1, rb, clamp_pow2(rb / 128, 2, 16));
        add(2, 1024, 8);
        add(8, 512, 8);
        add(64, 64, 8);
        add(64, 8, 4);
        break;
      }
    }
    const size_t keep = static_cast<size_t>(std::max(1, options_.max_configs));
    if (list.size() > keep) list.resize(keep);
    for (const TritonConfig& c : list) reasons_ += "#   " + c.str() + "\n";
    return list;
  }

  void decide_masks(const std::vector<TritonConfig>& list) {
    int64_t xb = 1, rb = 1;
    for (const TritonConfig& c : list) {
      xb = std::max(xb, c.blocks[0].second);
      if (c.blocks.size() > 1) rb = std::max(rb, c.blocks[1].second);
    }
    // A symbolic extent needs its mask unless the symbols' divisors make it a multiple of the block.
    auto divides = [&](const sym::Expr& n, int64_t block) { return sym::known_multiple(n, program_.symbols) % block == 0; };
    shape_.xmask = !divides(shape_.xnumel, xb);
    for (size_t l = 0; l < kernel_.loops.size(); ++l) {
      const sym::Expr& n = shape_.loop_numel[l];
      const bool ranged = !kernel_.loops[l].ranges.empty();
      const bool persistent = shape_.kind == TritonKernel::Kind::PersistentReduction;
      const bool fills = persistent ? n.is_constant() && n.constant() == shape_.persistent_rblock : divides(n, rb);
      shape_.rmask.push_back(ranged && !fills);
    }
  }

  std::vector<TritonParam> params() {
    std::vector<TritonParam> list = pointer_params(program_, roots_);
    for (const TritonParam& p : list) shape_.pointer[p.buffer] = p.name;
    const std::string size_type = shape_.int64 ? "i64" : "i32";
    auto size = [&](const std::string& name, const sym::Expr& value) {
      TritonParam p;
      p.kind = TritonParam::Kind::Size;
      p.name = name;
      p.type = size_type;
      p.value = value;
      p.hint = at_hints(value, program_.symbols);
      list.push_back(p);
    };
    if (shape_.tile) return list;  // the template's sizes are its own
    size("xnumel", shape_.xnumel);
    if (shape_.kind != TritonKernel::Kind::Pointwise) size("rnumel", shape_.rnumel);
    for (const sym::SymbolInfo* s : mentioned_program_symbols()) size(s->name, sym::Expr::symbol(s->name));
    return list;
  }

  // ember_<poi|per|red>_<up to three op names>_<8 hex of the text's hash>.
  std::string name(const std::string& text) const {
    const char* prefix = shape_.kind == TritonKernel::Kind::Pointwise           ? "poi"
                         : shape_.kind == TritonKernel::Kind::PersistentReduction ? "per"
                                                                                  : "red";
    return std::string("ember_") + prefix + "_" + triton::op_names(kernel_) + sha256_hex(text).substr(0, 8);
  }

  const Program& program_;
  const Kernel& kernel_;
  const TritonOptions& options_;
  KernelShape shape_;
  std::vector<std::pair<BufferId, int>> roots_;  // root -> 1 loaded, 2 stored, 3 both
  std::set<std::string> mentioned_;               // symbols in the kernel's sizes and addresses
  sym::Expr span_needed_ = 0;                     // the largest span any access reaches
  std::vector<sym::Rel> assumptions_;             // TritonKernel::assumptions
  std::string reasons_;
};

}  // namespace

namespace triton {

int64_t next_pow2(int64_t n) {
  // Saturates at 2^62 (an unbounded symbol's largest value is INT64_MAX: doubling past it never ends).
  constexpr int64_t kLargest = int64_t{1} << 62;
  if (n >= kLargest) return kLargest;
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

std::string op_names(const Kernel& kernel) {
  std::string ops;
  std::set<std::string> seen;
  for (const Node& n : kernel.nodes) {
    if (loop_ir::op_info(n.op).cls == loop_ir::OpClass::Leaf || loop_ir::op_info(n.op).cls == loop_ir::OpClass::Effect ||
        n.op == ScalarOp::Cast || n.op == ScalarOp::CheckIndex)
      continue;
    std::string op = loop_ir::op_info(n.op).name;
    if (op.rfind("reduce_", 0) == 0) op = op.substr(7);
    if (op.rfind("welford_", 0) == 0) op = "welford";
    if (seen.size() == 3 || !seen.insert(op).second) continue;
    ops += op + "_";
  }
  return ops.empty() ? "copy_" : ops;
}

TileEpilogue tile_epilogue(const Program& program, const Kernel& kernel, BufferId accumulator, bool xmask) {
  static const TritonOptions kOptions;  // a tile epilogue has no configs of its own
  return KernelEmitter(program, kernel, kOptions).tile(accumulator, xmask);
}

}  // namespace triton

namespace {

// One member of a grouped kernel: its view through the body, and per body parameter the root
// buffer it passes and the element of that root the parameter's pointer points at.
struct GroupedMember {
  int kernel = -1;
  loop_ir::GroupMember view;
  std::vector<BufferId> roots;
  std::vector<int64_t> offsets;
};

// One grouped kernel over `members` (a run of a group's members): each member's blocks of XBLOCK
// elements are a range of the grid's programs, in member order, and each program calls the body on
// its member's pointers, element count and block.
TritonKernel grouped_kernel(const Program& program, const std::vector<GroupedMember>& members,
                            const KernelEmitter::GroupBody& body) {
  TritonKernel out;
  out.kind = TritonKernel::Kind::Group;
  out.configs = {body.config};
  const int64_t xblock = body.config.blocks.at(0).second;
  // Parameters: the members' roots in order of first use, each loaded and/or stored as the body
  // parameters it stands for are.
  std::vector<std::pair<BufferId, int>> roots;  // (root, use), in order of first use
  std::map<BufferId, size_t> index;             // root -> its entry in roots
  // A body pointer parameter names its buffer %b<k>, the member's k-th buffer (loop_ir::group_body).
  auto root_of = [](const GroupedMember& m, const TritonParam& bp) { return m.roots.at(static_cast<size_t>(bp.buffer)); };
  auto offset_of = [](const GroupedMember& m, const TritonParam& bp) { return m.offsets.at(static_cast<size_t>(bp.buffer)); };
  for (const GroupedMember& m : members) {
    out.members.push_back(m.kernel);
    for (const TritonParam& bp : body.params) {
      if (bp.kind != TritonParam::Kind::Pointer) continue;
      const BufferId root = root_of(m, bp);
      if (!index.count(root)) {
        index[root] = roots.size();
        roots.emplace_back(root, 0);
      }
      roots[index[root]].second |= static_cast<int>(bp.use);
    }
  }
  out.params = pointer_params(program, roots);
  std::map<BufferId, std::string> name;
  for (const TritonParam& p : out.params) name[p.buffer] = p.name;
  std::string fn = "@triton.jit\ndef KERNEL_NAME(";
  for (const TritonParam& p : out.params) fn += p.name + ", ";
  fn += "XBLOCK: tl.constexpr):\n    xpid = tl.program_id(0)\n";
  std::string layout = "# grouped kernel: " + std::to_string(members.size()) +
                       " members of one pointwise body (loop_ir/group.h); programs by member:\n";
  int64_t start = 0;
  for (size_t i = 0; i < members.size(); ++i) {
    const GroupedMember& m = members[i];
    const int64_t blocks = (m.view.extent + xblock - 1) / xblock, end = start + blocks;
    layout += "#   " + std::to_string(m.view.extent) + " elements: [" + std::to_string(start) + ", " +
              std::to_string(end) + ")\n";
    std::string call = "body(";
    for (const TritonParam& bp : body.params) {
      if (bp.kind == TritonParam::Kind::Size) {
        call += std::to_string(m.view.extent) + ", ";  // xnumel (or the extent's symbol itself)
        continue;
      }
      const int64_t offset = offset_of(m, bp);
      call += name.at(root_of(m, bp)) + (offset == 0 ? "" : " + " + std::to_string(offset)) + ", ";
    }
    call += std::string(start == 0 ? "xpid" : "xpid - " + std::to_string(start)) + ", XBLOCK)";
    const bool last = i + 1 == members.size();
    if (members.size() == 1) {
      fn += "    " + call + "\n";
    } else {
      fn += std::string("    ") + (i == 0 ? "if" : last ? "else" : "elif") +
            (last ? "" : " xpid < " + std::to_string(end)) + ":\n        " + call + "\n";
    }
    start = end;
  }
  out.xnumel = start * xblock;  // the grid: one program per block of every member
  out.rnumel = 1;
  std::string text = "import triton\nimport triton.language as tl\n";
  if (body.function.find("eh.") != std::string::npos) text += "from ember._triton import helpers as eh\n";
  text += "\n\n" + layout + body.reasons + body.function + "\n\n" + fn;
  out.name = "ember_grp_" + triton::op_names(program.kernels.at(static_cast<size_t>(members.front().kernel))) +
             sha256_hex(text).substr(0, 8);
  const size_t at = text.find("KERNEL_NAME");
  out.source = text.replace(at, std::string("KERNEL_NAME").size(), out.name);
  return out;
}

// The grouped kernels of program group `group`: runs of its members whose roots number at most
// options.max_group_params, each a TritonKernel at its first member's index in `kernels`, the other
// members `launched_by` it (a run of one member is that member's own kernel).
void emit_group(const Program& program, const loop_ir::Group& group, const TritonOptions& options,
                std::vector<TritonKernel>& kernels) {
  const std::optional<std::vector<bool>> streams = loop_ir::group_streams(program, group.kernels);
  const std::vector<bool>* view = streams ? &*streams : nullptr;
  std::vector<GroupedMember> members;
  int64_t largest = 1;
  for (int k : group.kernels) {
    const Kernel& kernel = program.kernels.at(static_cast<size_t>(k));
    GroupedMember m;
    m.kernel = k;
    std::string why;
    std::optional<loop_ir::GroupMember> seen = loop_ir::group_member(program, kernel, &why, view);
    if (!seen) throw CodegenError("group @" + group.name + ": kernel " + kernel.name + " is no member: " + why);
    m.view = *seen;
    KernelEmitter own(program, kernel, options);
    const std::map<BufferId, sym::Expr>& offsets = own.member_roots();
    for (size_t p = 0; p < m.view.buffers.size(); ++p) {
      const BufferId b = m.view.buffers[p];
      const sym::Expr offset = offsets.at(b) + sym::Expr(m.view.bases[p]);
      if (!offset.is_constant())
        throw CodegenError("group @" + group.name + ": %b" + std::to_string(b) + " has a symbolic offset");
      m.roots.push_back(program.storage_root(b));
      m.offsets.push_back(offset.constant());
    }
    largest = std::max(largest, m.view.extent);
    members.push_back(std::move(m));
  }
  Program body_program;
  body_program.name = "group";
  const Kernel body_kernel =
      loop_ir::group_body(program, program.kernels.at(static_cast<size_t>(group.kernels.front())), view, "group_n",
                          body_program, largest);
  const KernelEmitter::GroupBody body = KernelEmitter(body_program, body_kernel, options).group_body();
  // Runs of members within the parameter budget.
  std::vector<GroupedMember> run;
  std::set<BufferId> run_roots;
  auto flush = [&] {
    if (run.empty()) return;
    const int first = run.front().kernel;
    kernels.at(static_cast<size_t>(first)) =
        run.size() == 1 ? KernelEmitter(program, program.kernels.at(static_cast<size_t>(first)), options).emit()
                        : grouped_kernel(program, run, body);
    for (size_t i = 1; i < run.size(); ++i) kernels.at(static_cast<size_t>(run[i].kernel)).launched_by = first;
    run.clear();
    run_roots.clear();
  };
  for (GroupedMember& m : members) {
    std::set<BufferId> more = run_roots;
    more.insert(m.roots.begin(), m.roots.end());
    if (static_cast<int64_t>(more.size()) > options.max_group_params) {
      flush();
      more = std::set<BufferId>(m.roots.begin(), m.roots.end());
    }
    run_roots = std::move(more);
    run.push_back(std::move(m));
  }
  flush();
}

}  // namespace

TritonSource emit_triton(const Program& program, const memory::MemoryPlan& plan, const TritonOptions& options) {
  if (plan.offsets.size() != program.buffers.size())
    throw CodegenError("the memory plan has " + std::to_string(plan.offsets.size()) + " offsets for " +
                       std::to_string(program.buffers.size()) + " buffers");
  TritonSource source;
  source.kernels.resize(program.kernels.size());
  std::vector<bool> grouped(program.kernels.size(), false);
  for (const loop_ir::Group& g : program.groups) {
    for (int k : g.kernels) grouped.at(static_cast<size_t>(k)) = true;
    emit_group(program, g, options, source.kernels);
  }
  for (size_t k = 0; k < program.kernels.size(); ++k)
    if (!grouped[k]) source.kernels[k] = KernelEmitter(program, program.kernels[k], options).emit();
  if (options.matmul_templates) triton::add_matmul_templates(program, options, &source);
  return source;
}

namespace {

void print_kernel(const std::string& title, const TritonKernel& kernel, std::string* out) {
  *out += "# " + title + ": " + kernel.name + " (" + kind_name(kernel.kind) + ")\n";
  for (const TritonParam& p : kernel.params) {
    *out += "#   " + p.name + ": " + p.type + " = ";
    *out += p.kind == TritonParam::Kind::Pointer ? "%b" + std::to_string(p.buffer) : p.value.str();
    *out += "\n";
  }
  if (!kernel.members.empty()) {
    *out += "#   members: kernels";
    for (int k : kernel.members) *out += " " + std::to_string(k);
    *out += "\n";
  }
  for (const TritonConfig& c : kernel.configs) *out += "#   config: " + c.str() + "\n";
  for (const std::string& site : kernel.check_sites) *out += "#   check: " + site + "\n";
  *out += kernel.source + "\n";
}

}  // namespace

std::string print(const TritonSource& source) {
  std::string out;
  for (size_t k = 0; k < source.kernels.size(); ++k) {
    const TritonKernel& kernel = source.kernels[k];
    if (kernel.launched_by >= 0) {
      out += "# kernel " + std::to_string(k) + ": runs in kernel " + std::to_string(kernel.launched_by) + "'s launch\n\n";
      continue;
    }
    print_kernel("kernel " + std::to_string(k), kernel, &out);
  }
  for (const MatmulTemplate& t : source.matmul_templates)
    print_kernel("matmul template for extern " + std::to_string(t.extern_index) + " + kernel " + std::to_string(t.epilogue),
                 t.kernel, &out);
  for (const std::string& why : source.matmul_refusals) out += "# no matmul template: " + why + "\n";
  return out;
}

}  // namespace ember::codegen
