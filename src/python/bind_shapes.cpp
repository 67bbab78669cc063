// Bindings of the shape rules (src/shapes/shape_rules.h), for tests and measurements:
// ember._C.shapes.infer_result_types(op_name, args, kwargs, grad_enabled, default_dtype[, symbolic]),
// ember._C.shapes.time_rule(..., repeat), torch_call_rule_names() and check_node_types(graph); op_name is a core op's name or
// the qualified name of a torch callable with a rule. Tensors (real or meta) are read into TensorTypes;
// tuples and lists become sequence operands; constants become the literals a graph node would
// hold (complex numbers, which no literal spells, complex operands; anything else opaque). A result is None or a list of (dtype, sizes, strides, requires_grad, device).
// Tensors are read through attributes: the DLPack path refuses meta tensors, slowly (~1 ms).
#include <nanobind/nanobind.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>
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
    return shapes::infer_result_types(*core, operands.args, operands.kwargs, grad_enabled, default_dtype);
  if (!shapes::has_torch_call_rule(op))
    throw std::invalid_argument("no core op or torch callable with a shape rule named '" + op + "'");
  return shapes::infer_torch_call_types(op, operands.args, operands.kwargs, grad_enabled, default_dtype);
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

}  // namespace

void bind_shapes(nb::module_& m) {
  // `symbolic`: (argument position, dim) pairs whose size becomes the symbol s0, to check that
  // rules decline symbolic shapes.
  m.def(
      "infer_result_types",
      [](const std::string& op, nb::tuple args, nb::dict kwargs, bool grad_enabled, const std::string& default_dtype,
         nb::list symbolic) {
        Operands operands(args, kwargs);
        for (nb::handle h : symbolic) {
          auto [arg, dim] = nb::cast<std::pair<size_t, size_t>>(h);
          if (arg >= operands.args.size() || !operands.args[arg].tensor ||
              dim >= operands.args[arg].tensor->sizes.size())
            throw std::invalid_argument("symbolic: no tensor dim " + std::to_string(dim) + " at argument " +
                                        std::to_string(arg));
          const_cast<ir::TensorType*>(operands.args[arg].tensor)->sizes[dim] = sym::Expr::symbol("s0");
        }
        return to_python(infer(op, operands, grad_enabled, dtype_named(default_dtype)));
      },
      nb::arg("op"), nb::arg("args"), nb::arg("kwargs"), nb::arg("grad_enabled"), nb::arg("default_dtype"),
      nb::arg("symbolic") = nb::list());
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
