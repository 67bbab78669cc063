// The collapse pass and the affine access helpers it shares with code generation (collapse.cpp;
// docs/loop-ir.md, "Collapse"). A header of its own so that the helpers' users do not all depend
// on each other through loop_ir.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "loop_ir/loop_ir.h"

namespace ember::loop_ir {

// Affine access helpers (collapse.cpp), shared with code generation. The coefficient of `var` if
// `e` is affine in it with a constant coefficient (0 if absent); nullopt when `var` appears under
// floordiv, mod, max, min or multiplied by a symbol.
std::optional<int64_t> linear_coefficient(const sym::Expr& e, const std::string& var);
// Σ index[k] * strides[k] over dimensions of size other than 1, simplified: the element offset of
// an access from its buffer's element 0.
sym::Expr flat_offset(const Buffer& buffer, const std::vector<sym::Expr>& index);

// The collapse pass (collapse.cpp, docs/loop-ir.md): two adjacent variables of a loop's ranges
// (or of the outer ranges of a kernel whose loops have none) become one when the inner extent E
// (a positive constant or a symbolic size) is such that, after the substitution u = j // E,
// v = j % E and simplify(), every access's
// flat offset and every `index` value of their scope is still affine in the new variable (each
// walks the pair as one contiguous run). Needs a verified program; keeps it verified, same
// values, same order of points. Returns whether any kernel changed.
//
// Then, in a pointwise kernel of rank >= 2 (one loop, no ranges), values that do not change along
// the last outer variable v (loads and index values not reading it, and what is computed from them
// alone) move into a first loop without ranges when one of them is expensive (exp, sigmoid, sqrt,
// div, ...; hoist_invariants): v becomes the ranged loop [r0 < E] of the rest, so vector code
// computes them once per outer point instead of once per lane (`x * sigmoid(gate[c])`). Values
// the loop reads from there are f32 (vector code broadcasts only those); loads of storage the
// kernel writes stay in the loop.
bool collapse_loops(Program& program);
// First, in a pointwise kernel (one loop, no ranges) whose stores all walk memory in one order
// other than its outer variables' (a channels-last tensor iterated as [N, C, HW]: stride 1 along
// C, the middle variable), the outer variables are permuted into that order, largest stride
// outermost, when more accesses then walk contiguously along the innermost: the kernel then
// vectorizes. Each point stores its own elements (affine offsets, distinct positive strides), so
// the points' order is free.
bool order_outer_by_stores(const Program& program, Kernel& kernel);
// Both steps for a pointwise kernel (one loop, no ranges; false for another): its outer variables in
// memory order, then collapsed. The Triton target runs this alone: a flat index that decodes into
// [8, 512, 3072] and re-encodes the same offset hides contiguity from Triton's axis analysis, whose
// loads then stop vectorizing (GPT-2's GELU kernels ran at a third of Inductor's speed on the H200).
bool collapse_pointwise(const Program& program, Kernel& kernel);
bool hoist_invariants(const Program& program, Kernel& kernel);

}  // namespace ember::loop_ir
