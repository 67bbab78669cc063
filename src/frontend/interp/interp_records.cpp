// Model outputs in the symbolic interpreter: transformers' ModelOutput and diffusers' BaseOutput.
//
// Model forwards end by building one (a dataclass that is also an OrderedDict) and callers read it
// back by attribute, by key, by position or through to_tuple(). Its __init__/__post_init__ run
// dataclasses machinery and OrderedDict's C methods Ember cannot trace, so the trace models the
// result directly (RecordVar): the fields by name, the keys being the fields that are not None, as
// both classes' __post_init__ set them. The two differ only where a lone first field is not a
// tensor: ModelOutput then reads any non-tensor as key/value pairs, BaseOutput only a dict; those
// forms stay unsupported. Their reads (attribute, `[str]` -> the key's value or KeyError, `[int]`
// and slices -> to_tuple()'s items, keys/values/items/get/in) are the same.
// A compiled frame that returns a record returns a tuple of its field values with a rebuilder
// (ember.records) in place of a namedtuple type: the runtime calls cls(**fields) after the graph.
// A class with its own construction code is built that way only (RecordVar::built_after): the
// runtime calls it with the arguments the code gave, and the trace reads nothing from it.
#include <algorithm>

#include "frontend/interp/interpreter.h"
#include "frontend/interp/object_model.h"
#include "frontend/pyutil.h"

namespace ember::frontend {

namespace {

bool is_none(const VarRef& v) { return v->kind == VarKind::Object && v->as<ObjectVar>().obj.get() == Py_None; }

enum class OutputBase { None, TransformersModelOutput, DiffusersBaseOutput };

OutputBase output_base(PyObject* cls) {
  if (!PyType_Check(cls)) return OutputBase::None;
  PyObject* mro = reinterpret_cast<PyTypeObject*>(cls)->tp_mro;
  for (Py_ssize_t i = 0; mro && i < PyTuple_GET_SIZE(mro); ++i) {
    auto* t = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(mro, i));
    PyRef mod = PyRef::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(t), "__module__"));
    if (!mod) PyErr_Clear();
    if (!mod || !PyUnicode_Check(mod.get())) continue;
    std::string m = str_of(mod.get()), name = t->tp_name;
    if (m == "transformers.utils.generic" && name == "ModelOutput") return OutputBase::TransformersModelOutput;
    if (m == "diffusers.utils.outputs" && name == "BaseOutput") return OutputBase::DiffusersBaseOutput;
  }
  return OutputBase::None;
}

// isinstance(v, dict) for the Vars a record field can hold.
bool is_dict_value(const Var& v) {
  switch (v.kind) {
    case VarKind::Dict:
    case VarKind::Record:  // both bases are OrderedDicts
      return true;
    case VarKind::Object:
      return PyDict_Check(v.as<ObjectVar>().obj.get());
    default:
      return false;
  }
}

// Why constructing `cls` runs code other than what a record models, or "": its __init__ must be the one
// @dataclass generated (compiled from a string; transformers' metaclass wraps it in the keyword renaming
// the record does) and its __post_init__ the base's. (diffusers keeps deprecated aliases whose own
// __init__ warns first.)
std::string own_construction_code(PyObject* cls, OutputBase base) {
  PyRef init = PyRef::steal(PyObject_GetAttrString(cls, "__init__"));
  PyRef wrapper = init ? PyRef::steal(PyObject_GetAttrString(init.get(), "__code__")) : PyRef();
  PyRef wrapper_name = wrapper ? PyRef::steal(PyObject_GetAttrString(wrapper.get(), "co_qualname")) : PyRef();
  if (!wrapper_name) PyErr_Clear();  // an __init__ that is not Python code: refused below
  if (base == OutputBase::TransformersModelOutput && wrapper_name && PyUnicode_Check(wrapper_name.get()) &&
      str_of(wrapper_name.get()) == "_BCCacheNameMeta.__setattr__.<locals>.__init__")
    init = PyRef::steal(PyObject_GetAttrString(init.get(), "__wrapped__"));
  // @dataclass compiles its __init__ from text, inside a __create_fn__ (3.11-3.13); a file name of
  // "<string>" alone would also take code a user ran through exec() or `python -c`.
  PyRef code = init ? PyRef::steal(PyObject_GetAttrString(init.get(), "__code__")) : PyRef();
  PyRef file = code ? PyRef::steal(PyObject_GetAttrString(code.get(), "co_filename")) : PyRef();
  PyRef qualname = code ? PyRef::steal(PyObject_GetAttrString(code.get(), "co_qualname")) : PyRef();
  if (!file || !PyUnicode_Check(file.get()) || str_of(file.get()) != "<string>" || !qualname ||
      !PyUnicode_Check(qualname.get()) || str_of(qualname.get()) != "__create_fn__.<locals>.__init__") {
    PyErr_Clear();
    return "its own __init__";
  }
  PyRef post = PyRef::steal(PyObject_GetAttrString(cls, "__post_init__"));
  PyRef post_name = post ? PyRef::steal(PyObject_GetAttrString(post.get(), "__qualname__")) : PyRef();
  const char* expected = base == OutputBase::TransformersModelOutput ? "ModelOutput.__post_init__" : "BaseOutput.__post_init__";
  if (!post_name || !PyUnicode_Check(post_name.get()) || str_of(post_name.get()) != expected) {
    PyErr_Clear();
    return "its own __post_init__";
  }
  return "";
}

}  // namespace

bool Interpreter::is_model_output_class(PyObject* cls) { return output_base(cls) != OutputBase::None; }

VarRef Interpreter::make_record(PyObject* cls, std::vector<VarRef>& args, Kwargs& kwargs) {
  const OutputBase base = output_base(cls);
  auto rec = std::make_shared<RecordVar>();
  rec->cls = PyRef::borrow(cls);
  rec->built_after = own_construction_code(cls, base);
  if (!rec->built_after.empty()) {
    rec->positional = args.size();
    rec->values = args;
    for (auto& [name, value] : kwargs) {
      rec->fields.push_back(name);
      rec->values.push_back(value);
    }
    for (auto& v : rec->values)
      if (v->kind == VarKind::SymInt) v = trace_.specialize(v);
    return rec;
  }
  PyRef fields = PyRef::steal(PyObject_GetAttrString(cls, "__dataclass_fields__"));
  if (!fields || !PyDict_Check(fields.get())) {
    PyErr_Clear();
    unsupported(std::string("constructing ") + reinterpret_cast<PyTypeObject*>(cls)->tp_name + ", a ModelOutput that is not a dataclass");
  }
  PyObject *k, *f;
  Py_ssize_t pos = 0;
  while (PyDict_Next(fields.get(), &pos, &k, &f)) {
    // ClassVar and InitVar pseudo-fields are not dataclass fields of the instance.
    PyRef ftype = PyRef::steal(PyObject_GetAttrString(f, "_field_type"));
    PyRef fname = ftype ? PyRef::steal(PyObject_GetAttrString(ftype.get(), "name")) : PyRef();
    if (!fname) throw PythonError();
    if (str_of(fname.get()) != "_FIELD") continue;
    rec->fields.push_back(str_of(k));
    rec->values.push_back(trace_.none());
  }
  if (rec->fields.empty()) unsupported("constructing a ModelOutput without fields");
  if (args.size() > rec->fields.size()) unsupported("too many positional arguments for a ModelOutput");
  for (size_t i = 0; i < args.size(); ++i) rec->values[i] = args[i];
  for (auto& [name, value] : kwargs) {
    std::string field = name;
    // ModelOutput's metaclass renames the keywords of the former cache name (_rename_kwargs_for_bc).
    if (base == OutputBase::TransformersModelOutput && (field == "past_key_values" || field == "cache_params") &&
        std::find(rec->fields.begin(), rec->fields.end(), field) == rec->fields.end())
      field = "cache";
    auto it = std::find(rec->fields.begin(), rec->fields.end(), field);
    if (it == rec->fields.end()) unsupported("ModelOutput got an unexpected keyword argument '" + name + "'");
    rec->values[it - rec->fields.begin()] = value;
  }
  bool others_none = true;
  for (size_t i = 1; i < rec->values.size(); ++i) others_none = others_none && is_none(rec->values[i]);
  const VarRef& first = rec->values[0];
  if (base == OutputBase::TransformersModelOutput && others_none && !is_none(first) && first->kind != VarKind::Tensor)
    unsupported("a ModelOutput whose only value is not a tensor (__post_init__ would read it as key/value pairs)");
  if (base == OutputBase::DiffusersBaseOutput && others_none && is_dict_value(*first))
    unsupported("a BaseOutput whose only value is a dict (__post_init__ would read it as key/value pairs)");
  for (auto& v : rec->values)
    if (v->kind == VarKind::SymInt) v = trace_.specialize(v);
  return rec;
}

const RecordVar& Interpreter::known_record(const Var& rec) {
  const auto& r = rec.as<RecordVar>();
  if (!r.built_after.empty())
    unsupported("reading " + describe(rec) + ", which has " + r.built_after +
                " (Ember builds it after the graph, from the arguments it was given, and knows nothing of its fields)");
  return r;
}

std::vector<VarRef> Interpreter::record_present(const RecordVar& record) {
  const RecordVar& r = known_record(record);
  std::vector<VarRef> out;
  for (auto& v : r.values)
    if (!is_none(v)) out.push_back(v);
  return out;
}

VarRef Interpreter::record_attr(const VarRef& rec, const std::string& name) {
  const RecordVar& r = known_record(*rec);
  for (size_t i = 0; i < r.fields.size(); ++i)
    if (r.fields[i] == name) return r.values[i];
  if (name == "to_tuple" || name == "keys" || name == "values" || name == "items" || name == "get" ||
      name == "__getitem__" || name == "__contains__")
    return std::make_shared<BoundMethodVar>(rec, trace_.constant(PyRef::steal(PyUnicode_FromString(name.c_str()))));
  if (name == "__class__") return trace_.constant(r.cls);
  unsupported("attribute '" + name + "' of " + describe(*rec));
}

VarRef Interpreter::record_method(const VarRef& rec, const std::string& name, std::vector<VarRef>& args,
                                  Kwargs& kwargs) {
  const RecordVar& r = known_record(*rec);
  if (!kwargs.empty()) unsupported("ModelOutput." + name + "() with keyword arguments");
  if (name == "to_tuple" && args.empty()) return make_tuple(record_present(r));
  if ((name == "keys" || name == "values" || name == "items") && args.empty()) {
    std::vector<VarRef> out;
    for (size_t i = 0; i < r.fields.size(); ++i) {
      if (is_none(r.values[i])) continue;
      VarRef key = trace_.constant(PyRef::steal(PyUnicode_FromString(r.fields[i].c_str())));
      out.push_back(name == "keys" ? key : name == "values" ? r.values[i] : make_tuple({key, r.values[i]}));
    }
    return make_tuple(std::move(out));
  }
  if (name == "__getitem__" && args.size() == 1) return record_subscript(rec, args[0]);
  if ((name == "get" || name == "__contains__") && !args.empty() && args.size() <= (name == "get" ? 2u : 1u)) {
    PyObject* k = Trace::as_constant(*args[0]);
    if (!k || !PyUnicode_Check(k)) unsupported("ModelOutput." + name + "() with a key that is not a constant string");
    for (size_t i = 0; i < r.fields.size(); ++i) {
      if (r.fields[i] != str_of(k) || is_none(r.values[i])) continue;
      return name == "get" ? r.values[i] : trace_.constant(PyRef::borrow(Py_True));
    }
    if (name == "__contains__") return trace_.constant(PyRef::borrow(Py_False));
    return args.size() == 2 ? args[1] : trace_.none();
  }
  unsupported("method " + name + "() of " + describe(*rec));
}

VarRef Interpreter::record_subscript(const VarRef& rec, const VarRef& index) {
  const RecordVar& r = known_record(*rec);
  PyObject* k = Trace::as_constant(*index);
  if (k && PyUnicode_Check(k)) {
    std::string key = str_of(k);
    if (output_base(r.cls.get()) == OutputBase::TransformersModelOutput && (key == "past_key_values" || key == "cache_params"))
      key = "cache";
    for (size_t i = 0; i < r.fields.size(); ++i)
      if (r.fields[i] == key && !is_none(r.values[i])) return r.values[i];
    unsupported("KeyError: '" + key + "' is not a key of " + describe(*rec));
  }
  return subscript(make_tuple(record_present(r)), index);
}

void Interpreter::record_store(const VarRef& rec, const std::string& name, const VarRef& value) {
  known_record(*rec);
  auto& r = rec->as<RecordVar>();
  std::string key = name;
  if (output_base(r.cls.get()) == OutputBase::TransformersModelOutput && (key == "past_key_values" || key == "cache_params"))
    key = "cache";
  auto it = std::find(r.fields.begin(), r.fields.end(), key);
  if (it == r.fields.end()) unsupported("setting '" + name + "', not a field of " + describe(*rec));
  VarRef& slot = r.values[it - r.fields.begin()];
  // Eager's OrderedDict appends a new key at the end (out of field order, which to_tuple() and the
  // rebuilt record follow); None as a value leaves the old key (attribute) or keeps a None key (item).
  if (is_none(slot)) unsupported("setting field '" + key + "' of " + describe(*rec) + ", which is None (its key would come last)");
  if (is_none(value)) unsupported("setting field '" + key + "' of " + describe(*rec) + " to None");
  slot = value->kind == VarKind::SymInt ? trace_.specialize(value) : value;
}

VarRef Interpreter::dataclass_fields(PyObject* fields_fn, std::vector<VarRef>& args, Kwargs& kwargs) {
  if (args.size() != 1 || !kwargs.empty()) unsupported("dataclasses.fields() with unexpected arguments");
  const Var& x = *args[0];
  PyObject* cls = nullptr;
  if (x.kind == VarKind::Record) cls = x.as<RecordVar>().cls.get();
  if (x.kind == VarKind::Object && !x.as<ObjectVar>().opaque) {
    PyObject* o = x.as<ObjectVar>().obj.get();
    // A class read from the frame is guarded by identity; any other object by its type (or it is a
    // trace constant, or a constructed instance whose placeholder has the class).
    cls = PyType_Check(o) ? o : reinterpret_cast<PyObject*>(Py_TYPE(o));
  }
  if (!cls) unsupported("dataclasses.fields() of " + describe(x));
  // The fields are the class's: a dataclass's __dataclass_fields__ is fixed once the class is made.
  PyRef fields = PyRef::steal(PyObject_CallOneArg(fields_fn, cls));
  if (!fields) raise_taken(take_exception(), "dataclasses.fields()");
  return trace_.constant(std::move(fields));
}

VarRef Interpreter::record_for_return(const VarRef& rec) {
  auto& r = rec->as<RecordVar>();
  // Imported per call (a sys.modules lookup once loaded) rather than cached in a static: a failed
  // import then raises here each time instead of leaving a null module for the process's lifetime.
  PyRef records = PyRef::steal(PyImport_ImportModule("ember.records"));
  if (!records) throw PythonError();
  PyRef names = PyRef::steal(PyTuple_New(r.fields.size()));
  for (size_t i = 0; i < r.fields.size(); ++i) PyTuple_SET_ITEM(names.get(), i, PyUnicode_FromString(r.fields[i].c_str()));
  PyRef rebuilder = PyRef::steal(PyObject_CallMethod(records.get(), "rebuilder", "OOn", r.cls.get(), names.get(),
                                                     static_cast<Py_ssize_t>(r.positional)));
  if (!rebuilder) throw PythonError();
  auto seq = std::make_shared<SequenceVar>(VarKind::Tuple, r.values);
  seq->named_type = std::move(rebuilder);
  return seq;
}

}  // namespace ember::frontend
