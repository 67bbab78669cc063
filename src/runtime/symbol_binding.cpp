#include "runtime/symbol_binding.h"

#include <stdexcept>

#include "pybridge/torch_bridge.h"

namespace ember::runtime {

SymbolBinding::SymbolBinding(const sym::Symbols& symbols, const std::vector<const std::vector<sym::Expr>*>& input_sizes) {
  int next_int = static_cast<int>(input_sizes.size());
  for (const sym::SymbolInfo& s : symbols) {
    names_.push_back(s.name);
    if (s.from_int) {
      reads_.push_back(Read{next_int++, -1});
      continue;
    }
    sym::Expr symbol = sym::Expr::symbol(s.name);
    Read found{-1, -1};
    for (size_t k = 0; k < input_sizes.size() && found.input < 0; ++k)
      for (size_t d = 0; d < input_sizes[k]->size() && found.input < 0; ++d)
        if ((*input_sizes[k])[d] == symbol) found = Read{static_cast<int>(k), static_cast<int>(d)};
    if (found.input < 0)
      throw std::invalid_argument("shape symbol " + s.name + " is not the size of any dimension of a graph input");
    reads_.push_back(found);
  }
}

bool SymbolBinding::read(PyObject* const* inputs, pybridge::TensorReads& reads, int64_t* values) const {
  for (size_t k = 0; k < reads_.size(); ++k) {
    const Read& r = reads_[k];
    if (r.dim < 0) {
      int overflow = 0;
      values[k] = PyLong_CheckExact(inputs[r.input]) ? PyLong_AsLongLongAndOverflow(inputs[r.input], &overflow) : 0;
      if (!PyLong_CheckExact(inputs[r.input]) || overflow) {
        PyErr_Format(PyExc_RuntimeError, "ember: graph input %d is not the int64 that binds %s", r.input, names_[k].c_str());
        return false;
      }
      continue;
    }
    const pybridge::RawTensorMeta* meta = reads.get(static_cast<size_t>(r.input), inputs[r.input]);
    if (meta == nullptr || meta->ndim <= r.dim) {
      if (!PyErr_Occurred())
        PyErr_Format(PyExc_RuntimeError, "ember: graph input %d does not have the dimension %d that binds %s", r.input,
                     r.dim, names_[k].c_str());
      return false;
    }
    values[k] = meta->sizes[r.dim];
  }
  return true;
}

}  // namespace ember::runtime
