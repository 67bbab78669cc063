// Where a compiled graph reads the values of its shape symbols on each call (docs/dynamic-shapes.md).
//
// Needs: every size symbol of `symbols` appears bare (the expression is exactly the symbol) as a
// dimension of some graph input; the frontend's guards make that so. An int symbol
// (SymbolInfo::from_int) is the Python int passed after the graph's inputs, one per int symbol in
// the order of `symbols` (the frontend captures them so: Trace::apply_specializations).
// Guarantees: read() gives each size symbol's value from the first such input dimension, and each
// int symbol's from its int. Why here: both runners (the eager executor and the compiled graph)
// bind symbols the same way.
#pragma once

#include <Python.h>

#include <cstdint>
#include <string>
#include <vector>

#include "pybridge/torch_bridge.h"
#include "sym/expr.h"
#include "sym/symbols.h"

namespace ember::runtime {

class SymbolBinding {
 public:
  SymbolBinding() = default;
  // `input_sizes[k]`: the sizes of graph input k. Throws std::invalid_argument naming a symbol no
  // input dimension is exactly.
  SymbolBinding(const sym::Symbols& symbols, const std::vector<const std::vector<sym::Expr>*>& input_sizes);
  bool empty() const { return reads_.empty(); }
  size_t size() const { return reads_.size(); }
  const std::vector<std::string>& names() const { return names_; }
  // values[k] := symbol k's value, read from `inputs` (torch tensors, then the ints). False with a
  // Python error set when an input is not a tensor of the expected rank, or not an int.
  // `reads` holds the inputs' metadata this call has read (one entry per graph input).
  bool read(PyObject* const* inputs, pybridge::TensorReads& reads, int64_t* values) const;

 private:
  struct Read {
    int input = 0;
    int dim = 0;  // -1: the input is a Python int
  };
  std::vector<Read> reads_;
  std::vector<std::string> names_;
};

}  // namespace ember::runtime
