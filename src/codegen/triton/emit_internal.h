// Pieces shared by the Triton emitter's files: the decisions taken per kernel from its sizes
// (emit.cpp: kind, index width, configs, parameters) and the body printer that follows them
// (emit_kernel.cpp). Not a public interface: triton_codegen.h is.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "codegen/triton/triton_codegen.h"

namespace ember::codegen::triton {

// What emit.cpp decided for one kernel, and what the body printer needs to follow it.
struct KernelShape {
  TritonKernel::Kind kind = TritonKernel::Kind::Pointwise;
  bool int64 = false;                  // index math in int64 (a size or span may pass INT32_MAX)
  // Sizes are expressions over the program's shape symbols (constants for static programs); a
  // symbol is a kernel parameter of its own name (s0), so the body prints them as they are.
  sym::Expr xnumel = 1;
  std::vector<sym::Expr> loop_numel;   // per loop: its trip count (1 for a loop without ranges)
  sym::Expr rnumel = 1;                // the longest ranged loop's trip count (max() when symbolic)
  int64_t persistent_rblock = 0;       // PersistentReduction: next_pow2 of rnumel's largest value
  bool xmask = false;                  // xnumel may not divide some candidate XBLOCK
  std::vector<bool> rmask;             // per loop: its trip count may not divide some RBLOCK
  // Root buffer -> parameter name ("in_ptr0"), and the element offset of each accessed buffer
  // (a view's chain of offsets) from its root's element 0.
  std::map<loop_ir::BufferId, std::string> pointer;
  std::map<loop_ir::BufferId, sym::Expr> root_offset;
  const sym::Symbols* symbols = nullptr;  // the program's: their ranges decide signs and divisions
  // A matmul template's epilogue (matmul_template.cpp): values are [BLOCK_M, BLOCK_N] tiles; the
  // template prints the set-up (i<k> as full tiles, xmask as the tile's mask) instead of the
  // header, and a load of `accumulator` (the matmul's result) reads the tile `acc`.
  bool tile = false;
  loop_ir::BufferId accumulator = -1;
  // A grouped kernel's body (emit.cpp, emit_group): the block it computes is this parameter's value,
  // not tl.program_id(0) (the grouped kernel maps its programs onto each member's blocks).
  std::string block_param;
};

// A pointwise kernel printed as a matmul template's epilogue: its parameters (the root buffers it
// touches besides the accumulator, named in_ptr<k>/out_ptr<k>/in_out_ptr<k> as in a kernel of its
// own; no sizes), its body over the tile, its check sites, and why the template cannot take it
// (int64 indexing, shape symbols; empty: it can). Needs: the kernel verified against the tile
// (matmul_template.cpp).
struct TileEpilogue {
  std::vector<TritonParam> params;
  std::string body;
  std::vector<std::string> check_sites;
  std::string refused;
};
TileEpilogue tile_epilogue(const loop_ir::Program& program, const loop_ir::Kernel& kernel,
                           loop_ir::BufferId accumulator, bool xmask);

// Up to three op names of a kernel's nodes ("max_sub_exp_", "copy_" when none): its name's middle.
std::string op_names(const loop_ir::Kernel& kernel);

// matmul_template.cpp: a template for each extern matmul whose result only the kernel step right
// after it reads, elementwise (TritonSource::matmul_templates), else the reason (matmul_refusals).
void add_matmul_templates(const loop_ir::Program& program, const TritonOptions& options, TritonSource* source);

// The smallest power of two >= n, at most 2^62.
int64_t next_pow2(int64_t n);

// The @triton.jit function's body lines (4-space indented, each ending in '\n'), from the index
// set-up to the last store. Appends one check site per check_index to `check_sites`
// ("k2 %t5", as CppSource's). Throws CodegenError naming the node for what it cannot spell.
std::string emit_body(const loop_ir::Program& program, const loop_ir::Kernel& kernel, const KernelShape& shape,
                      std::vector<std::string>* check_sites);

// "%t5 (exp : i32)", for error messages.
std::string node_desc(const loop_ir::Node& n);

}  // namespace ember::codegen::triton
