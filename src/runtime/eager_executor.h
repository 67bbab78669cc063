// The eager executor: runs a graph node by node through torch, driven from C++.
//
// It is the "eager" backend, the reference for testing capture, and (until code generation
// lands) what backend="ember" runs. Each node calls its torch callable with the node's arguments;
// literal arguments are converted to Python objects once, at construction, except `sym(...)` ones:
// those are evaluated on each call from the shape symbols' values, read from the inputs. Values are released
// after their last use, as eager PyTorch would release them.
#pragma once

#include <Python.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "pybridge/pyref.h"
#include "ir/graph.h"
#include "runtime/graph_runner.h"
#include "runtime/symbol_binding.h"

namespace ember::runtime {

class EagerExecutor : public GraphRunner {
 public:
  using LiteralToPython = std::function<PyRef(const ir::Literal&)>;
  // `callables[i]` is the callable of graph node i.
  EagerExecutor(const ir::Graph& graph, const std::vector<PyRef>& callables, const LiteralToPython& convert);

  bool run(PyObject* const* inputs, std::vector<PyRef>* outputs) const override;

 private:
  struct ArgTemplate {
    enum class Kind : uint8_t { Const, Slot, Tuple, List, Sym } kind = Kind::Const;
    PyRef constant;
    int slot = -1;
    std::vector<ArgTemplate> items;
    sym::Expr expr;  // Sym: a sym(...) argument, evaluated per call
  };
  struct Step {
    PyRef callable;
    std::vector<ArgTemplate> args;  // positional, then keyword values
    PyRef kwnames;                  // tuple of keyword names, or null
    size_t npositional = 0;
    ir::Node::ResultForm form = ir::Node::ResultForm::Single;
    std::vector<int> results;
    std::vector<int> release_after;  // values whose last use is this step
  };

  static ArgTemplate make_template(const ir::Arg& arg, const LiteralToPython& convert);
  // `symbols`: the values of the graph's shape symbols on this call (for Sym templates).
  static PyObject* build(const ArgTemplate& t, PyObject* const* env, const std::map<std::string, int64_t>& symbols,
                         bool* owned);
  SymbolBinding binding_;  // the graph's shape symbols (docs/dynamic-shapes.md)

  std::vector<Step> steps_;
  std::vector<int> input_slots_;
  std::vector<int> output_slots_;
  size_t num_values_ = 0;
};

}  // namespace ember::runtime
