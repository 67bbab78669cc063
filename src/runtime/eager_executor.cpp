#include "runtime/eager_executor.h"

#include <stdexcept>

namespace ember::runtime {

EagerExecutor::ArgTemplate EagerExecutor::make_template(const ir::Arg& arg, const LiteralToPython& convert) {
  ArgTemplate t;
  switch (arg.kind) {
    case ir::Arg::Kind::Value:
      t.kind = ArgTemplate::Kind::Slot;
      t.slot = arg.value;
      return t;
    case ir::Arg::Kind::Literal:
      if (const sym::Expr* e = std::get_if<sym::Expr>(&arg.literal)) {
        t.kind = ArgTemplate::Kind::Sym;
        t.expr = *e;
        return t;
      }
      t.kind = ArgTemplate::Kind::Const;
      t.constant = convert(arg.literal);
      return t;
    case ir::Arg::Kind::List:
    case ir::Arg::Kind::Tuple: {
      bool all_const = true;
      for (const auto& item : arg.items) {
        t.items.push_back(make_template(item, convert));
        all_const = all_const && t.items.back().kind == ArgTemplate::Kind::Const;
      }
      t.kind = arg.kind == ir::Arg::Kind::List ? ArgTemplate::Kind::List : ArgTemplate::Kind::Tuple;
      if (all_const && t.kind == ArgTemplate::Kind::Tuple) {
        // A constant tuple is built once.
        bool owned = false;
        t.constant = PyRef::steal(build(t, nullptr, {}, &owned));
        if (!t.constant) throw std::runtime_error("could not build a constant tuple");
        t.kind = ArgTemplate::Kind::Const;
        t.items.clear();
      }
      return t;
    }
  }
  throw std::logic_error("unknown argument kind");
}

// Returns the Python object for `t`: borrowed (owned=false) for constants and slots, a new
// reference (owned=true) for tuples and lists built per call.
PyObject* EagerExecutor::build(const ArgTemplate& t, PyObject* const* env, const std::map<std::string, int64_t>& symbols,
                               bool* owned) {
  switch (t.kind) {
    case ArgTemplate::Kind::Const:
      *owned = false;
      return t.constant.get();
    case ArgTemplate::Kind::Sym:
      *owned = true;
      try {
        return PyLong_FromLongLong(sym::evaluate(t.expr, symbols));
      } catch (const std::exception& e) {
        PyErr_Format(PyExc_RuntimeError, "ember: cannot evaluate the size %s: %s", t.expr.str().c_str(), e.what());
        return nullptr;
      }
    case ArgTemplate::Kind::Slot:
      *owned = false;
      return env[t.slot];
    case ArgTemplate::Kind::Tuple:
    case ArgTemplate::Kind::List: {
      bool tuple = t.kind == ArgTemplate::Kind::Tuple;
      PyObject* seq = tuple ? PyTuple_New(t.items.size()) : PyList_New(t.items.size());
      if (!seq) return nullptr;
      for (size_t i = 0; i < t.items.size(); ++i) {
        bool item_owned = false;
        PyObject* item = build(t.items[i], env, symbols, &item_owned);
        if (!item) {
          Py_DECREF(seq);
          return nullptr;
        }
        if (!item_owned) Py_INCREF(item);
        if (tuple) {
          PyTuple_SET_ITEM(seq, i, item);
        } else {
          PyList_SET_ITEM(seq, i, item);
        }
      }
      *owned = true;
      return seq;
    }
  }
  return nullptr;
}

EagerExecutor::EagerExecutor(const ir::Graph& graph, const std::vector<PyRef>& callables, const LiteralToPython& convert)
    : num_values_(graph.values().size()) {
  std::vector<const std::vector<sym::Expr>*> input_sizes;
  for (const auto& in : graph.inputs()) input_sizes.push_back(&graph.value(in.value).type.sizes);
  binding_ = SymbolBinding(graph.symbols, input_sizes);
  for (const auto& in : graph.inputs()) input_slots_.push_back(in.value);
  for (ir::ValueId out : graph.outputs()) output_slots_.push_back(out);
  std::vector<int> last_use(num_values_, -1);
  const auto& nodes = graph.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const ir::Node& node = nodes[i];
    Step step;
    step.callable = callables.at(i);
    for (const auto& a : node.args) step.args.push_back(make_template(a, convert));
    step.npositional = node.args.size();
    if (!node.kwargs.empty()) {
      step.kwnames = PyRef::steal(PyTuple_New(node.kwargs.size()));
      for (size_t k = 0; k < node.kwargs.size(); ++k) {
        PyTuple_SET_ITEM(step.kwnames.get(), k, PyUnicode_FromString(node.kwargs[k].first.c_str()));
        step.args.push_back(make_template(node.kwargs[k].second, convert));
      }
    }
    step.form = node.result_form;
    for (ir::ValueId r : node.results) step.results.push_back(r);
    std::function<void(const ir::Arg&)> mark = [&](const ir::Arg& a) {
      if (a.kind == ir::Arg::Kind::Value) last_use[a.value] = static_cast<int>(i);
      for (const auto& x : a.items) mark(x);
    };
    for (const auto& a : node.args) mark(a);
    for (const auto& kv : node.kwargs) mark(kv.second);
    steps_.push_back(std::move(step));
  }
  std::vector<bool> is_output(num_values_, false);
  for (int o : output_slots_) is_output[o] = true;
  for (size_t v = 0; v < num_values_; ++v)
    if (last_use[v] >= 0 && !is_output[v]) steps_[last_use[v]].release_after.push_back(static_cast<int>(v));
}

bool EagerExecutor::run(PyObject* const* inputs, std::vector<PyRef>* outputs) const {
  std::map<std::string, int64_t> symbols;
  if (!binding_.empty()) {
    std::vector<int64_t> values(binding_.size());
    pybridge::TensorReads reads(input_slots_.size());
    if (!binding_.read(inputs, reads, values.data())) return false;
    for (size_t k = 0; k < values.size(); ++k) symbols[binding_.names()[k]] = values[k];
  }
  std::vector<PyObject*> env(num_values_, nullptr);
  auto release_all = [&] {
    for (PyObject*& v : env) Py_CLEAR(v);
  };
  for (size_t i = 0; i < input_slots_.size(); ++i) {
    Py_INCREF(inputs[i]);
    env[input_slots_[i]] = inputs[i];
  }
  PyObject* small[16];
  for (const Step& step : steps_) {
    size_t n = step.args.size();
    std::vector<PyObject*> big;
    PyObject** argv = small + 1;  // slot 0 free for PY_VECTORCALL_ARGUMENTS_OFFSET
    if (n + 1 > 16) {
      big.resize(n + 1);
      argv = big.data() + 1;
    }
    bool owned[64] = {};
    std::vector<char> owned_big;
    bool* own = owned;
    if (n > 64) {
      owned_big.resize(n);
      own = reinterpret_cast<bool*>(owned_big.data());
    }
    bool ok = true;
    for (size_t a = 0; a < n; ++a) {
      argv[a] = build(step.args[a], env.data(), symbols, &own[a]);
      if (!argv[a]) {
        for (size_t b = 0; b < a; ++b)
          if (own[b]) Py_DECREF(argv[b]);
        ok = false;
        break;
      }
    }
    if (!ok) {
      release_all();
      return false;
    }
    PyObject* r = PyObject_Vectorcall(step.callable.get(), argv, step.npositional | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                      step.kwnames.get());
    for (size_t a = 0; a < n; ++a)
      if (own[a]) Py_DECREF(argv[a]);
    if (!r) {
      release_all();
      return false;
    }
    switch (step.form) {
      case ir::Node::ResultForm::Single:
        Py_XSETREF(env[step.results[0]], r);
        break;
      case ir::Node::ResultForm::None:
        Py_DECREF(r);
        break;
      case ir::Node::ResultForm::Tuple:
      case ir::Node::ResultForm::List: {
        PyObject* seq = PySequence_Fast(r, "graph node expected a sequence result");
        Py_DECREF(r);
        if (!seq || static_cast<size_t>(PySequence_Fast_GET_SIZE(seq)) != step.results.size()) {
          if (seq) {
            Py_DECREF(seq);
            PyErr_SetString(PyExc_RuntimeError, "ember: a graph node returned a different number of results than traced");
          }
          release_all();
          return false;
        }
        for (size_t k = 0; k < step.results.size(); ++k) {
          PyObject* item = PySequence_Fast_GET_ITEM(seq, k);
          Py_INCREF(item);
          Py_XSETREF(env[step.results[k]], item);
        }
        Py_DECREF(seq);
        break;
      }
    }
    for (int v : step.release_after) Py_CLEAR(env[v]);
  }
  outputs->clear();
  for (int o : output_slots_) outputs->push_back(PyRef::borrow(env[o]));
  release_all();
  return true;
}

}  // namespace ember::runtime
