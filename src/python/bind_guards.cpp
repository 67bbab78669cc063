// ember._C.guards: the guard area seen from Python, for tests and explain output.
//
// Sources are written as tuples of steps, e.g. (("local", 0, "x"), ("attr", "w")) or
// (("global", "FLAG"),); steps: ("local", slot, name), ("global", name), ("builtin", name),
// ("closure", index, name), ("attr", name), ("module_member", name), ("item", index),
// ("dict_item", key). A frame is given as (args, globals, builtins, closure): `args` plays the
// argument slots of localsplus, `closure` is a function's __closure__ tuple, None, or a function.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <stdexcept>
#include <string>

#include "frontend/frame.h"
#include "frontend/guards.h"
#include "pybridge/torch_bridge.h"
#include "frontend/source.h"

namespace nb = nanobind;
using ember::frontend::FrameView;
using ember::frontend::GlobalState;
using ember::frontend::GuardSet;
using ember::frontend::Source;
using ember::frontend::SourceRef;
using ember::frontend::TensorMeta;

namespace ember::python {

namespace {

SourceRef source_from_spec(nb::handle spec) {
  if (!nb::isinstance<nb::tuple>(spec) || nb::len(spec) == 0) {
    throw std::invalid_argument("a source is a non-empty tuple of steps");
  }
  SourceRef source;
  for (nb::handle step_obj : spec) {
    if (!nb::isinstance<nb::tuple>(step_obj) || nb::len(step_obj) == 0) {
      throw std::invalid_argument("a source step is a tuple such as ('attr', 'w')");
    }
    nb::tuple step = nb::borrow<nb::tuple>(step_obj);
    std::string kind = nb::cast<std::string>(step[0]);
    bool root = kind == "local" || kind == "global" || kind == "builtin" || kind == "closure";
    if (root != !source) throw std::invalid_argument("step '" + kind + "' is misplaced: a source starts with one root step");
    size_t arity = (kind == "local" || kind == "closure") ? 3 : 2;
    if (nb::len(step) != arity) throw std::invalid_argument("step '" + kind + "' takes " + std::to_string(arity - 1) + " values");
    if (kind == "local") source = Source::local(nb::cast<int>(step[1]), nb::cast<std::string>(step[2]));
    else if (kind == "closure") source = Source::closure(nb::cast<int>(step[1]), nb::cast<std::string>(step[2]));
    else if (kind == "global") source = Source::global(nb::cast<std::string>(step[1]));
    else if (kind == "builtin") source = Source::builtin(nb::cast<std::string>(step[1]));
    else if (kind == "attr") source = Source::attr(source, nb::cast<std::string>(step[1]));
    else if (kind == "module_member") source = Source::module_member(source, nb::cast<std::string>(step[1]));
    else if (kind == "item") source = Source::item(source, nb::cast<int64_t>(step[1]));
    else if (kind == "dict_item") source = Source::dict_item(source, nb::cast<std::string>(step[1]));
    else throw std::invalid_argument("unknown source step '" + kind + "'");
  }
  return source;
}

// A FrameView over Python values; owns the function it may have to make for a closure tuple.
struct TestFrame {
  FrameView view;
  nb::object args, globals, builtins, func;

  TestFrame(nb::handle args_obj, nb::handle globals_obj, nb::handle builtins_obj, nb::handle closure) {
    if (!nb::isinstance<nb::tuple>(args_obj)) throw std::invalid_argument("args must be a tuple");
    if (!nb::isinstance<nb::dict>(globals_obj)) throw std::invalid_argument("globals must be a dict");
    args = nb::borrow(args_obj);
    globals = nb::borrow(globals_obj);
    builtins = nb::borrow(builtins_obj);
    if (PyFunction_Check(closure.ptr())) {
      func = nb::borrow(closure);
    } else {
      if (!closure.is_none() && !nb::isinstance<nb::tuple>(closure)) {
        throw std::invalid_argument("closure must be a tuple of cells, None or a function");
      }
      PyObject* code = Py_CompileString("None", "<ember guard test frame>", Py_eval_input);
      if (code == nullptr) throw nb::python_error();
      func = nb::steal(PyFunction_New(code, globals.ptr()));
      Py_DECREF(code);
      if (!func.is_valid() || PyFunction_SetClosure(func.ptr(), closure.ptr()) != 0) throw nb::python_error();
    }
    view.func = func.ptr();
    view.code = reinterpret_cast<PyCodeObject*>(PyFunction_GetCode(func.ptr()));
    view.globals = globals.ptr();
    view.builtins = builtins.ptr();
    view.localsplus = PySequence_Fast_ITEMS(args.ptr());
    view.nlocalsplus = static_cast<int>(PyTuple_GET_SIZE(args.ptr()));
  }
};

nb::object meta_dict(const TensorMeta& meta) {
  nb::dict d;
  d["type"] = nb::borrow(reinterpret_cast<PyObject*>(meta.type));
  d["dtype"] = std::string(ir::dtype_torch_name(meta.dtype));
  d["device"] = meta.device.type + (meta.device.index >= 0 ? ":" + std::to_string(meta.device.index) : "");
  d["sizes"] = nb::cast(meta.sizes);
  d["strides"] = nb::cast(meta.strides);
  d["requires_grad"] = meta.requires_grad;
  d["str"] = meta.str();
  return d;
}

nb::tuple check_args(const GuardSet& g, nb::handle args, nb::handle globals, nb::handle builtins, nb::handle closure) {
  TestFrame frame(args, globals, builtins, closure);
  std::vector<PyObject*> captured(static_cast<size_t>(g.capture_count()), nullptr);
  bool ok = g.check(frame.view, captured.data());
  if (PyErr_Occurred()) throw std::logic_error("GuardSet::check left a Python error set");
  nb::list out;
  for (PyObject* obj : captured) {
    if (ok) out.append(nb::steal(obj));
    else if (obj != nullptr) throw std::logic_error("GuardSet::check failed but left a capture");
  }
  return nb::make_tuple(ok, out);
}

}  // namespace

void bind_guards(nb::module_& m) {
  m.def("source_str", [](nb::handle spec) { return source_from_spec(spec)->str(); });
  m.def("resolve", [](nb::handle spec, nb::handle args, nb::handle globals, nb::handle builtins, nb::handle closure) {
    SourceRef source = source_from_spec(spec);
    TestFrame frame(args, globals, builtins, closure);
    PyObject* value = ember::frontend::resolve(*source, frame.view);
    if (value == nullptr) throw nb::python_error();
    return nb::steal(value);
  }, nb::arg("source"), nb::arg("args"), nb::arg("globals"), nb::arg("builtins"), nb::arg("closure").none());
  m.def("read_tensor_meta", [](nb::handle obj, bool via_attributes) -> nb::object {
    TensorMeta meta;
    bool ok = via_attributes ? ember::frontend::read_tensor_meta_via_attributes(obj.ptr(), &meta)
                             : ember::frontend::read_tensor_meta(obj.ptr(), &meta);
    if (PyErr_Occurred()) throw std::logic_error("read_tensor_meta left a Python error set");
    return ok ? meta_dict(meta) : nb::none();
  }, nb::arg("obj").none(), nb::arg("via_attributes") = false);
  m.def("frame_argument_count", [](nb::handle fn) {
    if (!PyFunction_Check(fn.ptr())) throw std::invalid_argument("frame_argument_count needs a function");
    FrameView view;
    view.func = fn.ptr();
    view.code = reinterpret_cast<PyCodeObject*>(PyFunction_GetCode(fn.ptr()));
    return view.argument_count();
  });
  m.def("dlpack_exchange_available", [] {
    const ember::pybridge::TorchBridge* bridge = ember::pybridge::torch_bridge();
    return bridge != nullptr && bridge->dlpack != nullptr;
  });
  m.def("current_global_state", [] {
    GlobalState s = GlobalState::current();
    return nb::make_tuple(s.grad_enabled, std::string(ir::dtype_torch_name(s.default_dtype)));
  });

  nb::class_<GuardSet>(m, "GuardSet")
      .def(nb::init<>())
      .def("tensor_match", [](GuardSet& g, nb::handle spec, nb::handle tensor) {
        TensorMeta meta;
        if (!ember::frontend::read_tensor_meta(tensor.ptr(), &meta)) {
          throw std::invalid_argument("tensor_match: not a tensor Ember can describe");
        }
        g.tensor_match(source_from_spec(spec), meta);
      }, nb::arg("source"), nb::arg("tensor").none())
      .def("id_match", [](GuardSet& g, nb::handle spec, nb::handle obj) { g.id_match(source_from_spec(spec), obj.ptr()); },
           nb::arg("source"), nb::arg("obj").none())
      .def("type_match", [](GuardSet& g, nb::handle spec, nb::handle type) {
        if (!PyType_Check(type.ptr())) throw std::invalid_argument("type_match needs a type");
        g.type_match(source_from_spec(spec), reinterpret_cast<PyTypeObject*>(type.ptr()));
      })
      .def("equals", [](GuardSet& g, nb::handle spec, nb::handle value) { g.equals(source_from_spec(spec), value.ptr()); },
           nb::arg("source"), nb::arg("value").none())
      .def("length", [](GuardSet& g, nb::handle spec, Py_ssize_t n) { g.length(source_from_spec(spec), n); })
      .def("dict_keys", [](GuardSet& g, nb::handle spec, nb::handle keys) { g.dict_keys(source_from_spec(spec), keys.ptr()); })
      .def("no_hooks", [](GuardSet& g, nb::handle spec) { g.no_hooks(source_from_spec(spec)); })
      .def("global_state", [](GuardSet& g) { g.global_state(GlobalState::current()); })
      .def("global_state", [](GuardSet& g, bool grad_enabled, const std::string& default_dtype) {
        std::optional<ir::DType> dt = ir::dtype_from_torch_name(default_dtype);
        if (!dt) throw std::invalid_argument("unknown dtype '" + default_dtype + "'");
        GlobalState state{grad_enabled, *dt};
        g.global_state(state);
      })
      .def("deterministic_algorithms", &GuardSet::deterministic_algorithms, nb::arg("enabled"))
      .def("capture", [](GuardSet& g, nb::handle spec) { return g.capture(source_from_spec(spec)); })
      .def("capture_count", &GuardSet::capture_count)
      .def("check_args", &check_args, nb::arg("args"), nb::arg("globals"), nb::arg("builtins"), nb::arg("closure").none())
      .def("first_failure", [](const GuardSet& g, nb::handle args, nb::handle globals, nb::handle builtins, nb::handle closure) {
        TestFrame frame(args, globals, builtins, closure);
        std::string why = g.first_failure(frame.view);
        if (PyErr_Occurred()) throw std::logic_error("GuardSet::first_failure left a Python error set");
        return why;
      }, nb::arg("args"), nb::arg("globals"), nb::arg("builtins"), nb::arg("closure").none())
      .def("describe", &GuardSet::describe)
      .def("__len__", &GuardSet::size);
}

}  // namespace ember::python
