// Python builtins, functions of the operator module, and methods of the containers the trace
// builds, implemented over Vars. Constants go through the real builtin (constant folding).
#include <algorithm>
#include <cstring>

#include "frontend/interp/interpreter.h"
#include "frontend/interp/object_model.h"
#include "frontend/pyutil.h"

namespace ember::frontend {

using namespace object_model;

bool Interpreter::keeps_sizes(const CallableKind& kind) {
  const std::string& name = kind.detail;
  if (kind.kind == CallableKind::Builtin)
    return name == "len" || name == "isinstance" || name == "type" || name == "getattr" || name == "hasattr";
  if (kind.kind != CallableKind::Operator) return false;
  auto named = [&](const char* const* names, size_t n) {
    return std::any_of(names, names + n, [&](const char* op) { return name == op; });
  };
  return named(kBinary, 13) || named(kInplace, 13) || named(kCompare, 6) || name == "getitem";
}

VarRef Interpreter::call_builtin(PyObject* fn, std::vector<VarRef>& args, Kwargs& kwargs) {
  const CallableKind& kind = trace_.table.classify(fn);
  const std::string& name = kind.detail;
  auto need = [&](size_t lo, size_t hi) {
    if (args.size() < lo || args.size() > hi) unsupported(name + "() with " + std::to_string(args.size()) + " arguments");
  };
  auto folded = [&]() -> VarRef {
    if (VarRef v = constant_call(fn, args, kwargs)) return v;
    unsupported(name + "() on values that are not constants: " + (args.empty() ? std::string("()") : describe(*args[0])));
  };

  if (kind.kind == CallableKind::Operator) {
    for (int i = 0; i < 13; ++i) {
      if (name == kBinary[i]) {
        need(2, 2);
        return binary_op(i, args[0], args[1]);
      }
      if (name == kInplace[i]) {
        need(2, 2);
        return binary_op(i + 13, args[0], args[1]);
      }
    }
    for (int i = 0; i < 6; ++i) {
      if (name == kCompare[i]) {
        need(2, 2);
        return compare(i, args[0], args[1]);
      }
    }
    if (name == "getitem") {
      need(2, 2);
      return subscript(args[0], args[1]);
    }
    if (name == "setitem") {
      need(3, 3);
      store_subscript(args[0], args[1], args[2]);
      return trace_.none();
    }
    if (name == "neg") return unary("neg", 0, args.at(0));
    if (name == "pos") return unary("positive", 1, args.at(0));
    if (name == "invert" || name == "inv") return unary("bitwise_not", 2, args.at(0));
    if (name == "not_") return trace_.constant(PyRef::borrow(truthy(args.at(0)) ? Py_False : Py_True));
    if (name == "truth") return trace_.constant(PyRef::borrow(truthy(args.at(0)) ? Py_True : Py_False));
    if (name == "is_" || name == "is_not") {
      need(2, 2);
      bool same = identical(args[0], args[1]);
      return trace_.constant(PyRef::borrow((same == (name == "is_")) ? Py_True : Py_False));
    }
    if (name == "contains") {
      need(2, 2);
      return trace_.constant(PyRef::borrow(contains(args[0], args[1]) ? Py_True : Py_False));
    }
    return folded();
  }

  if (name == "len") {
    need(1, 1);
    return length(args[0]);
  }
  if (name == "bool" && args.size() == 1 && kwargs.empty() && args[0]->kind != VarKind::Tensor) {
    // Python's truth protocol, as a branch asks it (a tensor's bool() stays a torch call).
    return trace_.constant(PyRef::borrow(truthy(args[0]) ? Py_True : Py_False));
  }
  if (name == "isinstance") {
    need(2, 2);
    return isinstance(args[0], args[1]);
  }
  if (name == "is_tensor") {  // torch.is_tensor(obj) is isinstance(obj, torch.Tensor)
    need(1, 1);
    return isinstance(args[0], trace_.constant(trace_.table.tensor_type));
  }
  if (name == "getattr" || name == "hasattr") {
    need(2, name == "getattr" ? 3 : 2);
    PyObject* n = Trace::as_constant(*args[1]);
    if (!n || !PyUnicode_Check(n)) unsupported(name + "() with a non-constant attribute name");
    VarRef v;
    try {
      v = get_attr(args[0], str_of(n));
    } catch (TracedException& e) {
      // The lookup raised in the trace (a missing attribute, a Python __getattr__ that raised):
      // hasattr and getattr with a default answer an AttributeError, as Python's do.
      if (!is_exception(*e.value, PyExc_AttributeError) || (name == "getattr" && args.size() == 2)) throw;
      return name == "hasattr" ? trace_.constant(PyRef::borrow(Py_False)) : args[2];
    }
    return name == "hasattr" ? trace_.constant(PyRef::borrow(Py_True)) : v;
  }
  if (name == "setattr") {
    need(3, 3);
    PyObject* n = Trace::as_constant(*args[1]);
    if (!n || !PyUnicode_Check(n)) unsupported("setattr() with a non-constant attribute name");
    store_attr(args[0], str_of(n), args[2]);
    return trace_.none();
  }
  if (name == "type") {
    need(1, 1);
    PyObject* type = python_type(args[0]);
    if (!type) unsupported("type() of " + describe(*args[0]));
    return trace_.constant(PyRef::borrow(type));
  }
  if (name == "enumerate") {
    need(1, 2);
    int64_t start = 0;
    if (args.size() == 2) {
      PyObject* s = Trace::as_constant(*args[1]);
      if (!s || !PyLong_Check(s)) unsupported("enumerate() with a non-constant start");
      start = PyLong_AsLongLong(s);
    }
    for (auto& [k, v] : kwargs) {
      PyObject* s = Trace::as_constant(*v);
      if (k != "start" || !s || !PyLong_Check(s)) unsupported("enumerate() with unexpected keyword arguments");
      start = PyLong_AsLongLong(s);
    }
    std::vector<VarRef> items;
    int64_t i = start;
    for (auto& x : iterate(args[0]))
      items.push_back(make_tuple({trace_.constant(PyRef::steal(PyLong_FromLongLong(i++))), x}));
    return std::make_shared<IteratorVar>(std::move(items));
  }
  if (name == "zip") {
    if (!kwargs.empty()) unsupported("zip() with keyword arguments");
    std::vector<std::vector<VarRef>> seqs;
    size_t n = SIZE_MAX;
    for (auto& a : args) {
      seqs.push_back(iterate(a));
      n = std::min(n, seqs.back().size());
    }
    if (seqs.empty()) n = 0;
    std::vector<VarRef> items;
    for (size_t i = 0; i < n; ++i) {
      std::vector<VarRef> row;
      for (auto& s : seqs) row.push_back(s[i]);
      items.push_back(make_tuple(std::move(row)));
    }
    return std::make_shared<IteratorVar>(std::move(items));
  }
  if (name == "reversed") {
    need(1, 1);
    std::vector<VarRef> items = iterate(args[0]);
    std::reverse(items.begin(), items.end());
    return std::make_shared<IteratorVar>(std::move(items));
  }
  if (name == "iter") {
    need(1, 1);
    return std::make_shared<IteratorVar>(iterate(args[0]));
  }
  if (name == "next") {
    need(1, 2);
    if (has_python_method(*args[0], "__next__")) {
      if (VarRef v = next_python(args[0])) return v;
      if (args.size() == 2) return args[1];
      raise_var(make_exception(PyExc_StopIteration, {}, {}));
    }
    if (args[0]->kind != VarKind::Iterator) unsupported("next() on " + describe(*args[0]));
    auto& it = args[0]->as<IteratorVar>();
    if (it.position < it.items.size()) return it.items[it.position++];
    if (args.size() == 2) return args[1];
    raise_var(make_exception(PyExc_StopIteration, {}, {}));
  }
  if (name == "list" || name == "tuple") {
    need(0, 1);
    std::vector<VarRef> items = args.empty() ? std::vector<VarRef>{} : iterate(args[0]);
    return name == "list" ? make_list(std::move(items)) : make_tuple(std::move(items));
  }
  if (name == "dict") {
    need(0, 1);
    auto d = std::make_shared<DictVar>();
    if (args.size() == 1) {
      if (args[0]->kind == VarKind::Dict) {
        d->keys = args[0]->as<DictVar>().keys;
        d->values = args[0]->as<DictVar>().values;
      } else {
        for (auto& pair : iterate(args[0])) {
          std::vector<VarRef> kv = iterate(pair);
          PyObject* k = kv.size() == 2 ? Trace::as_constant(*kv[0]) : nullptr;
          if (!k) unsupported("dict() from pairs with non-constant keys");
          d->keys.push_back(PyRef::borrow(k));
          d->values.push_back(kv[1]);
        }
      }
    }
    for (auto& [k, v] : kwargs) {
      d->keys.push_back(PyRef::steal(PyUnicode_FromString(k.c_str())));
      d->values.push_back(v);
    }
    return d;
  }
  if (name == "map") {
    if (args.size() < 2 || !kwargs.empty()) unsupported("map() with unexpected arguments");
    std::vector<std::vector<VarRef>> seqs;
    size_t n = SIZE_MAX;
    for (size_t i = 1; i < args.size(); ++i) {
      seqs.push_back(iterate(args[i]));
      n = std::min(n, seqs.back().size());
    }
    std::vector<VarRef> items;
    for (size_t i = 0; i < n; ++i) {
      std::vector<VarRef> row;
      for (auto& s : seqs) row.push_back(s[i]);
      items.push_back(call(args[0], std::move(row), {}));
    }
    return std::make_shared<IteratorVar>(std::move(items));
  }
  if (name == "super") {
    if (args.size() == 2) {
      PyObject* c = Trace::as_constant(*args[0]);
      if (!c || !PyType_Check(c)) unsupported("super() with a class that is not known at trace time");
      return std::make_shared<SuperVar>(PyRef::borrow(c), args[1]);
    }
    need(0, 0);
    // Zero-argument super(): the __class__ cell and the first argument of the calling code.
    auto& names = info_.localsplus_names;
    auto it = std::find(names.begin(), names.end(), "__class__");
    if (it == names.end() || info_.argcount == 0) unsupported("super() without a __class__ cell");
    VarRef cls = load_deref(static_cast<int>(it - names.begin()));
    VarRef self = locals_[0];
    // A first argument captured by a closure is a cell (after a graph break, a real one whose
    // contents are read lazily).
    if (self && self->kind == VarKind::Cell) self = load_deref(0);
    PyObject* c = Trace::as_constant(*cls);
    if (!self || !c || !PyType_Check(c)) unsupported("super() outside a method");
    return std::make_shared<SuperVar>(PyRef::borrow(c), self);
  }
  if (name == "sorted" && args.size() == 1) {
    VarRef key, reverse;
    for (auto& [k, v] : kwargs) {
      if (k != "key" && k != "reverse") unsupported("sorted() with keyword argument '" + k + "'");
      (k == "key" ? key : reverse) = v;
    }
    return make_list(sorted_items(iterate(args[0]), key, reverse));
  }
  if (name == "filter") {
    need(2, 2);
    PyObject* f = Trace::as_constant(*args[0]);
    std::vector<VarRef> kept;
    for (auto& x : iterate(args[1]))
      if (truthy(f == Py_None ? x : call(args[0], {x}, {}))) kept.push_back(x);
    return std::make_shared<IteratorVar>(std::move(kept));
  }
  if (name == "abs" && args.size() == 1 && args[0]->kind == VarKind::Tensor) return unary("abs", 3, args[0]);
  // A user object iterated through its class's Python code is a sequence of Vars too.
  auto vars_iterable = [&](const Var& v) {
    return v.kind != VarKind::Object || has_python_method(v, "__iter__") || has_python_method(v, "__getitem__");
  };
  if (name == "sum" && !args.empty() && vars_iterable(*args[0])) {
    VarRef acc = args.size() > 1 ? args[1] : trace_.constant(PyRef::steal(PyLong_FromLong(0)));
    for (auto& x : iterate(args[0])) acc = binary_op(0, acc, x);
    return acc;
  }
  if ((name == "min" || name == "max" || name == "any" || name == "all" || name == "sorted") && args.size() == 1 &&
      vars_iterable(*args[0])) {
    // Over a container of constants: fold on a real tuple of them.
    std::vector<VarRef> items = iterate(args[0]);
    PyRef t = PyRef::steal(PyTuple_New(items.size()));
    for (size_t i = 0; i < items.size(); ++i) {
      PyObject* c = Trace::as_constant(*items[i]);
      if (!c) unsupported(name + "() over values that are not constants (" + describe(*items[i]) + ")");
      Py_INCREF(c);
      PyTuple_SET_ITEM(t.get(), i, c);
    }
    std::vector<VarRef> one{trace_.constant(std::move(t))};
    if (VarRef v = constant_call(fn, one, kwargs)) return v;
  }
  if (name == "callable" && args.size() == 1 && kwargs.empty() && args[0]->kind != VarKind::Object) {
    VarKind k = args[0]->kind;
    bool yes = k == VarKind::Function || k == VarKind::BoundMethod || k == VarKind::GradModeExit;
    bool no = k == VarKind::Tensor || k == VarKind::Tuple || k == VarKind::List || k == VarKind::Dict ||
              k == VarKind::Iterator;
    if (yes || no) return trace_.constant(PyRef::borrow(yes ? Py_True : Py_False));
  }
  if (name == "print") unsupported("print() inside compiled code");
  if (name == "id") unsupported("id() depends on object identity");
  if (name == "hash" || name == "repr" || name == "str" || name == "format") {
    // These read an object's state (or identity): fold them only on values whose state the guards
    // pin down, not on objects guarded by their type alone.
    for (const VarRef& a : args) {
      if (a->kind == VarKind::Object && a->source && !trace_.guarded_by_value(a->as<ObjectVar>().obj.get()))
        unsupported(name + "() of " + describe(*a) + ", an object whose state is not guarded");
    }
  }
  return folded();
}

std::vector<VarRef> Interpreter::sorted_items(std::vector<VarRef> items, const VarRef& key, const VarRef& reverse) {
  // Sort by constant keys (the items themselves, or key(item)): Python's sorted() over
  // (key, position) pairs gives the same stable order.
  PyRef pairs = PyRef::steal(PyList_New(items.size()));
  for (size_t i = 0; i < items.size(); ++i) {
    VarRef k = (key && Trace::as_constant(*key) != Py_None) ? call(key, {items[i]}, {}) : items[i];
    PyRef kc = Trace::materialize(*k);
    if (!kc) unsupported("sorting values whose keys are not constants (" + describe(*k) + ")");
    PyList_SET_ITEM(pairs.get(), i, Py_BuildValue("(On)", kc.get(), static_cast<Py_ssize_t>(i)));
  }
  PyObject* rev = reverse ? Trace::as_constant(*reverse) : Py_False;
  if (!rev) unsupported("sorted() with a non-constant reverse flag");
  if (PyObject_IsTrue(rev)) {
    // Stable descending order: sort by key descending, position ascending.
    PyRef kw = PyRef::steal(Py_BuildValue("{s:O}", "reverse", Py_True));
    PyRef sort = PyRef::steal(PyObject_GetAttrString(pairs.get(), "sort"));
    PyRef op = PyRef::steal(PyImport_ImportModule("operator"));
    PyRef keyfn = PyRef::steal(op ? PyObject_CallMethod(op.get(), "itemgetter", "i", 0) : nullptr);
    if (!sort || !keyfn) throw PythonError();
    PyDict_SetItemString(kw.get(), "key", keyfn.get());
    PyRef empty = PyRef::steal(PyTuple_New(0));
    if (!PyRef::steal(PyObject_Call(sort.get(), empty.get(), kw.get()))) {
      PyErr_Clear();
      unsupported("sorting raised an exception (keys that do not compare)");
    }
  } else if (PyList_Sort(pairs.get()) < 0) {
    PyErr_Clear();
    unsupported("sorting raised an exception (keys that do not compare)");
  }
  std::vector<VarRef> out;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(pairs.get()); ++i)
    out.push_back(items[PyLong_AsSsize_t(PyTuple_GET_ITEM(PyList_GET_ITEM(pairs.get(), i), 1))]);
  return out;
}

VarRef Interpreter::call_container_method(const VarRef& self, const std::string& name, std::vector<VarRef>& args,
                                          Kwargs& kwargs) {
  if (!kwargs.empty() && name != "update" && name != "sort") unsupported(name + "() with keyword arguments on " + describe(*self));
  // Adding to a caller's list or dict whose contents the trace has not read reads nothing.
  if (name == "append" && args.size() == 1 && trace_.store_unread(self, nullptr, args[0])) return trace_.none();
  if (name == "__setitem__" && args.size() == 2 && self->kind == VarKind::Dict) {
    PyObject* k = Trace::as_constant(*args[0]);
    if (k && trace_.store_unread(self, k, args[1])) return trace_.none();
  }
  bool mutating = name == "append" || name == "extend" || name == "insert" || name == "pop" || name == "update" ||
                  name == "setdefault" || name == "clear" || name == "remove" || name == "__setitem__" ||
                  name == "reverse" || name == "sort" || name == "__delitem__" || name == "popitem";
  if (mutating && (self->kind == VarKind::List || self->kind == VarKind::Dict)) {
    // A list or dict of the caller is mutated here and brought to its final contents after the
    // graph (Trace::record_mutation). The values that may go into it are checked first.
    std::vector<VarRef> stored;
    if (name == "extend" && !args.empty()) {
      stored = iterate(args[0]);
    } else if (name == "update" && !args.empty() && args[0]->kind == VarKind::Dict) {
      stored = args[0]->as<DictVar>().values;
    } else if (name != "pop" && name != "remove" && name != "__delitem__" && name != "popitem") {
      stored = args;
    }
    if (name == "update")  // sort's key= and reverse= are not stored
      for (auto& [k, v] : kwargs) stored.push_back(v);
    trace_.record_mutation(self, stored);
  }
  if (self->kind == VarKind::List || self->kind == VarKind::Tuple) {
    auto& items = self->as<SequenceVar>().items;
    bool is_list = self->kind == VarKind::List;
    if (is_list && name == "append" && args.size() == 1) {
      items.push_back(args[0]);
      return trace_.none();
    }
    if (is_list && name == "extend" && args.size() == 1) {
      for (auto& x : iterate(args[0])) items.push_back(x);
      return trace_.none();
    }
    if (is_list && name == "insert" && args.size() == 2) {
      PyObject* i = Trace::as_constant(*args[0]);
      if (!i || !PyLong_Check(i)) unsupported("list.insert() at a non-constant index");
      int64_t at = PyLong_AsLongLong(i), n = items.size();
      if (at < 0) at = std::max<int64_t>(0, at + n);
      items.insert(items.begin() + std::min(at, n), args[1]);
      return trace_.none();
    }
    if (is_list && name == "pop" && args.size() <= 1) {
      int64_t at = -1;
      if (args.size() == 1) {
        PyObject* i = Trace::as_constant(*args[0]);
        if (!i || !PyLong_Check(i)) unsupported("list.pop() at a non-constant index");
        at = PyLong_AsLongLong(i);
      }
      int64_t n = items.size();
      if (at < 0) at += n;
      if (at < 0 || at >= n) unsupported("pop from an empty list or an index out of range");
      VarRef v = items[at];
      items.erase(items.begin() + at);
      return v;
    }
    if (is_list && name == "copy" && args.empty()) return make_list(items);
    if (is_list && name == "reverse" && args.empty()) {
      std::reverse(items.begin(), items.end());
      return trace_.none();
    }
    if (is_list && name == "sort" && args.empty()) {
      VarRef key, reverse;
      for (auto& [k, v] : kwargs) (k == "key" ? key : reverse) = v;
      items = sorted_items(items, key, reverse);
      return trace_.none();
    }
    if (is_list && name == "remove" && args.size() == 1) {
      for (size_t i = 0; i < items.size(); ++i) {
        PyObject* a = Trace::as_constant(*items[i]);
        PyObject* b = Trace::as_constant(*args[0]);
        if (identical(items[i], args[0]) || (a && b && PyObject_RichCompareBool(a, b, Py_EQ) == 1)) {
          items.erase(items.begin() + i);
          return trace_.none();
        }
      }
      unsupported("list.remove(x): x not in list");
    }
    if (is_list && name == "clear" && args.empty()) {
      items.clear();
      return trace_.none();
    }
    if ((name == "index" || name == "count") && args.size() == 1) {
      int64_t count = 0, first = -1;
      for (size_t i = 0; i < items.size(); ++i) {
        if (identical(items[i], args[0]) || [&] {
              PyObject* a = Trace::as_constant(*items[i]);
              PyObject* b = Trace::as_constant(*args[0]);
              return a && b && PyObject_RichCompareBool(a, b, Py_EQ) == 1;
            }()) {
          if (first < 0) first = i;
          ++count;
        }
      }
      if (name == "index" && first < 0) unsupported("index() of a value not in the sequence");
      return trace_.constant(PyRef::steal(PyLong_FromLongLong(name == "index" ? first : count)));
    }
    if (name == "__getitem__" && args.size() == 1) return subscript(self, args[0]);
  }
  if (self->kind == VarKind::Dict) {
    auto& d = self->as<DictVar>();
    if (name == "keys" || name == "values" || name == "items") {
      if (!args.empty()) unsupported("dict." + name + "() with arguments");
      std::vector<VarRef> out;
      for (size_t i = 0; i < d.keys.size(); ++i) {
        VarRef k = trace_.constant(d.keys[i]);
        out.push_back(name == "keys" ? k : name == "values" ? d.values[i] : make_tuple({k, d.values[i]}));
      }
      return make_tuple(std::move(out));
    }
    if ((name == "get" || name == "pop" || name == "__getitem__" || name == "setdefault") && !args.empty() &&
        args.size() <= 2) {
      PyObject* k = Trace::as_constant(*args[0]);
      if (!k) unsupported("dict." + name + "() with a non-constant key");
      int at = d.find(k);
      if (at < 0) {
        if (PyErr_Occurred()) PyErr_Clear();
        if (name == "__getitem__") unsupported("KeyError in dict lookup");
        if (name == "pop" && args.size() == 1) unsupported("KeyError in dict.pop()");
        VarRef dflt = args.size() == 2 ? args[1] : trace_.none();
        if (name == "setdefault") {
          d.keys.push_back(PyRef::borrow(k));
          d.values.push_back(dflt);
        }
        return dflt;
      }
      VarRef v = d.values[at];
      if (name == "pop") {
        d.keys.erase(d.keys.begin() + at);
        d.values.erase(d.values.begin() + at);
      }
      return v;
    }
    if (name == "update" && args.size() <= 1) {
      auto put = [&](PyRef key, VarRef value) {
        int at = d.find(key.get());
        if (at >= 0) {
          d.values[at] = std::move(value);
        } else {
          d.keys.push_back(std::move(key));
          d.values.push_back(std::move(value));
        }
      };
      if (!args.empty()) {
        if (args[0]->kind != VarKind::Dict) unsupported("dict.update() from a non-dict");
        auto& src = args[0]->as<DictVar>();
        for (size_t i = 0; i < src.keys.size(); ++i) put(src.keys[i], src.values[i]);
      }
      for (auto& [k, v] : kwargs) put(PyRef::steal(PyUnicode_FromString(k.c_str())), v);
      return trace_.none();
    }
    if (name == "__setitem__" && args.size() == 2) {
      store_subscript(self, args[0], args[1]);
      return trace_.none();
    }
    if (name == "clear" && args.empty()) {
      d.keys.clear();
      d.values.clear();
      return trace_.none();
    }
    if (name == "popitem" && args.empty()) {
      if (d.keys.empty()) unsupported("popitem(): dictionary is empty");
      VarRef item = make_tuple({trace_.constant(d.keys.back()), d.values.back()});
      d.keys.pop_back();
      d.values.pop_back();
      return item;
    }
    if (name == "copy" && args.empty()) {
      auto c = std::make_shared<DictVar>();
      c->keys = d.keys;
      c->values = d.values;
      return c;
    }
    if (name == "__contains__" && args.size() == 1)
      return trace_.constant(PyRef::borrow(contains(self, args[0]) ? Py_True : Py_False));
  }
  unsupported("method " + name + "() of " + describe(*self));
}

}  // namespace ember::frontend
