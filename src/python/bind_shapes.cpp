// Bindings of the shape rules (src/shapes/shape_rules.h), for tests and measurements:
// ember._C.shapes.infer_result_types(op_name, args, kwargs, grad_enabled, default_dtype[, symbolic]),
// ember._C.shapes.infer_result_sizes(name, args, kwargs[, symbolic]), time_rule(..., repeat), torch_call_rule_names() and check_node_types(graph); op_name is a core op's name or
// the qualified name of a torch callable with a rule. Tensors (real or meta) are read into TensorTypes;
// tuples and lists become sequence operands; constants become the literals a graph node would
// hold (complex numbers, which no literal spells, complex operands; anything else opaque). A result is None or a list of (dtype, sizes, strides, requires_grad, device).
// Tensors are read through attributes: the DLPack path refuses meta tensors, slowly (~1 ms).
#include <nanobind/nanobind.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <deque>
#include <stdexcept>

#include "frontend/guards.h"
#include "pybridge/torch_bridge.h"
#include "frontend/interp/trace.h"
#include "shapes/check_types.h"
#include "shapes/shape_rules.h"

namespace nb = nanobind;

namespace ember::python {

namespace {

// A constant as a literal, as the trace's conversion gives it (torch.dtype through the bridge).
std::optional<ir::Literal> literal_of(PyObject* o) {
  if (auto lit = frontend::builtin_literal(o)) return lit;
  const pybridge::TorchBridge* bridge = pybridge::torch_bridge();
  ir::DType dt;
  if (bridge && pybridge::dtype_from_object(*bridge, o, &dt)) return dt;
  PyErr_Clear();
  return std::nullopt;
}

// Operands of one call and the tensor types they point into.
struct Operands {
  std::deque<ir::TensorType> tensors;
  std::vector<shapes::Operand> args;
  std::vector<std::pair<std::string, shapes::Operand>> kwargs;
  // The symbols the call names, with the facts the trace gives a size symbol: [2, inf].
  sym::Symbols facts;

  void note_symbols(const sym::Expr& e) {
    std::set<std::string> names;
    sym::free_symbols(e, names);
    for (const std::string& n : names)
      if (std::none_of(facts.begin(), facts.end(), [&](const sym::SymbolInfo& f) { return f.name == n; }))
        facts.push_back(sym::SymbolInfo{n});
  }

  shapes::Operand convert(PyObject* o) {
    frontend::TensorMeta meta;
    if (frontend::read_tensor_meta_via_attributes(o, &meta)) {
      ir::TensorType t;
      t.dtype = meta.dtype;
      for (int64_t s : meta.sizes) t.sizes.emplace_back(s);
      for (int64_t s : meta.strides) t.strides.emplace_back(s);
      t.device = meta.device;
      t.requires_grad = meta.requires_grad;
      tensors.push_back(std::move(t));
      return shapes::Operand::of_tensor(&tensors.back());
    }
    if (PyTuple_Check(o) || PyList_Check(o)) {
      std::vector<shapes::Operand> items;
      for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(o); ++i) items.push_back(convert(PySequence_Fast_GET_ITEM(o, i)));
      return shapes::Operand::sequence(std::move(items), !PyList_Check(o));
    }
    // Tests spell a symbolic int as a string "$s0*12" (no Python value is one).
    if (PyUnicode_Check(o)) {
      const char* text = PyUnicode_AsUTF8(o);
      if (text && text[0] == '$') {
        const sym::Expr e = sym::parse_expr(text + 1);
        note_symbols(e);
        return shapes::Operand::of_literal(ir::Arg::of_size(e).literal);
      }
    }
    if (PyComplex_CheckExact(o)) return shapes::Operand::of_complex({PyComplex_RealAsDouble(o), PyComplex_ImagAsDouble(o)});
    if (auto lit = literal_of(o)) return shapes::Operand::of_literal(std::move(*lit));
    return shapes::Operand::opaque();
  }

  Operands(const nb::tuple& a, const nb::dict& kw) {
    for (nb::handle h : a) args.push_back(convert(h.ptr()));
    for (auto [k, v] : kw) kwargs.emplace_back(nb::cast<std::string>(k), convert(v.ptr()));
  }
};

// `op` names a core op ("add") or a torch callable with a rule ("torch.conv2d").
std::optional<std::vector<ir::TensorType>> infer(const std::string& op, const Operands& operands, bool grad_enabled,
                                                 ir::DType default_dtype) {
  if (auto core = ir::op_from_name(op))
    return shapes::infer_result_types(*core, operands.args, operands.kwargs, grad_enabled, default_dtype, &operands.facts);
  if (!shapes::has_torch_call_rule(op))
    throw std::invalid_argument("no core op or torch callable with a shape rule named '" + op + "'");
  return shapes::infer_torch_call_types(op, operands.args, operands.kwargs, grad_enabled, default_dtype, &operands.facts);
}

ir::DType dtype_named(const std::string& name) {
  auto dt = ir::dtype_from_torch_name(name);
  if (!dt) throw std::invalid_argument("no dtype named '" + name + "'");
  return *dt;
}

nb::object to_python(const std::optional<std::vector<ir::TensorType>>& result) {
  if (!result) return nb::none();
  nb::list out;
  for (const ir::TensorType& t : *result) {
    nb::list sizes, strides;
    for (auto& e : t.sizes) sizes.append(e.is_constant() ? nb::cast(e.constant()) : nb::cast(e.str()));
    for (auto& e : t.strides) strides.append(e.is_constant() ? nb::cast(e.constant()) : nb::cast(e.str()));
    out.append(nb::make_tuple(ir::dtype_torch_name(t.dtype), nb::tuple(sizes), nb::tuple(strides), t.requires_grad,
                              t.device.str()));
  }
  return out;
}

// A dense tensor's strides over its (now symbolic) sizes, in the same memory order as its
// constant strides: a contiguous tensor gets {64*s1, 64, 1}, a transposed one the transpose of that.
void restride(ir::TensorType& t) {
  std::vector<size_t> order(t.sizes.size());  // innermost first
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return t.strides[a].constant() < t.strides[b].constant() || (t.strides[a] == t.strides[b] && a > b);
  });
  sym::Expr running = 1;
  for (size_t d : order) {
    t.strides[d] = running;
    running = running * t.sizes[d];
  }
}

// `symbolic`: (argument position, dim[, name]) entries whose size becomes a symbol (s0 unless
// named; a name may be an expression over symbols, "(s0 + -10) // 5 + 1"), or (argument position, item, name, dim) for a tensor inside a sequence (cat); the
// strides of a tensor so changed are re-derived over the symbols in its memory order (dense
// tensors only).
void make_symbolic(Operands& operands, const nb::list& symbolic) {
  std::set<ir::TensorType*> changed;
  for (nb::handle h : symbolic) {
    nb::tuple entry = nb::cast<nb::tuple>(h);
    size_t arg = nb::cast<size_t>(entry[0]), dim = nb::cast<size_t>(entry[1]);
    std::string name = entry.size() > 2 ? nb::cast<std::string>(entry[2]) : "s0";
    const shapes::Operand* o = arg < operands.args.size() ? &operands.args[arg] : nullptr;
    if (o && o->kind == shapes::Operand::Kind::Sequence && entry.size() > 3) {  // (arg, item, name, dim)
      size_t item = dim;
      dim = nb::cast<size_t>(entry[3]);
      o = item < o->items.size() ? &o->items[item] : nullptr;
    }
    if (!o || !o->tensor || dim >= o->tensor->sizes.size())
      throw std::invalid_argument("symbolic: no tensor dim " + std::to_string(dim) + " at argument " +
                                  std::to_string(arg));
    auto* t = const_cast<ir::TensorType*>(o->tensor);
    t->sizes[dim] = sym::parse_expr(name);
    operands.note_symbols(t->sizes[dim]);
    changed.insert(t);
  }
  for (ir::TensorType* t : changed) restride(*t);
}

}  // namespace

void bind_shapes(nb::module_& m) {
  // `symbolic`: see make_symbolic. A string "$expr" is a symbolic int argument.
  m.def(
      "infer_result_types",
      [](const std::string& op, nb::tuple args, nb::dict kwargs, bool grad_enabled, const std::string& default_dtype,
         nb::list symbolic) {
        Operands operands(args, kwargs);
        make_symbolic(operands, symbolic);
        return to_python(infer(op, operands, grad_enabled, dtype_named(default_dtype)));
      },
      nb::arg("op"), nb::arg("args"), nb::arg("kwargs"), nb::arg("grad_enabled"), nb::arg("default_dtype"),
      nb::arg("symbolic") = nb::list());
  // shapes::infer_result_sizes: None, or (one size list per result, the assumptions as "relation" or
  // "relation: why"); `symbolic` as above.
  m.def(
      "infer_result_sizes",
      [](const std::string& name, nb::tuple args, nb::dict kwargs, nb::list symbolic) -> nb::object {
        Operands operands(args, kwargs);
        make_symbolic(operands, symbolic);
        shapes::Assumptions assumed;
        auto sizes = shapes::infer_result_sizes(name, operands.args, operands.kwargs, assumed);
        if (!sizes) return nb::none();
        nb::list lists, relations;
        for (const auto& xs : *sizes) {
          nb::list l;
          for (const sym::Expr& e : xs) l.append(e.is_constant() ? nb::cast(e.constant()) : nb::cast(e.str()));
          lists.append(nb::tuple(l));
        }
        for (const shapes::Assumption& a : assumed) relations.append(a.why.empty() ? a.rel.str() : a.rel.str() + ": " + a.why);
        return nb::make_tuple(lists, relations);
      },
      nb::arg("name"), nb::arg("args"), nb::arg("kwargs"), nb::arg("symbolic") = nb::list());
  // Seconds per call of the rule alone (operands converted once, outside the timing).
  m.def("time_rule", [](const std::string& op, nb::tuple args, nb::dict kwargs, bool grad_enabled,
                        const std::string& default_dtype, int repeat) {
    Operands operands(args, kwargs);
    ir::DType dt = dtype_named(default_dtype);
    size_t answered = 0;
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < repeat; ++i) answered += infer(op, operands, grad_enabled, dt).has_value();
    std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    if (answered != static_cast<size_t>(repeat)) throw std::invalid_argument("the rule has no answer for this call");
    return took.count() / repeat;
  });
  m.def("torch_call_rule_names", &shapes::torch_call_rule_names);
  m.def("check_node_types", &shapes::check_node_types, nb::arg("graph"),
        "Messages for nodes whose recorded types differ from their shape rule's answer.");
}

}  // namespace ember::python
