// Items, iteration, truthiness, operators and f-string formatting over Vars: operators on
// tensors become graph nodes; on constants they are computed for real.
#include <algorithm>

#include "frontend/interp/interpreter.h"
#include "frontend/interp/object_model.h"
#include "frontend/pyutil.h"

namespace ember::frontend {

using namespace object_model;

// ---------------------------------------------------------------------------------------------
// Items and iteration

bool Interpreter::is_torch_size(const VarRef& v) const {
  return v->kind == VarKind::Tuple && v->as<SequenceVar>().named_type.get() == trace_.table.size_type.get();
}

VarRef Interpreter::sized_tuple(std::vector<VarRef> items, bool torch_size) const {
  VarRef t = make_tuple(std::move(items));
  if (torch_size) t->as<SequenceVar>().named_type = trace_.table.size_type;
  return t;
}

VarRef Interpreter::subscript(const VarRef& obj, const VarRef& index_in) {
  if (obj->kind == VarKind::Tensor) {
    if (VarRef view = trace_.symbolic_subscript(obj, index_in)) return view;
    return trace_.call_torch(trace_.op_callable(ir::Op::Getitem), {obj, trace_.specialize_slices(index_in)}, {});
  }
  // Containers and objects take the index's value: list indices are structure, not math.
  VarRef index = trace_.specialize(trace_.specialize_slices(index_in), "an index of a " + describe(*obj));
  switch (obj->kind) {
    case VarKind::Record:
      return record_subscript(obj, index);
    case VarKind::Tensor:
      break;  // above
    case VarKind::Tuple:
    case VarKind::List: {
      auto& items = obj->as<SequenceVar>().items;
      PyObject* i = Trace::as_constant(*index);
      if (i && PyIndex_Check(i)) {
        Py_ssize_t at = PyNumber_AsSsize_t(i, PyExc_IndexError);
        if (at == -1 && PyErr_Occurred()) throw PythonError();
        Py_ssize_t n = items.size();
        if (at < 0) at += n;
        if (at < 0 || at >= n) raise(PyExc_IndexError, obj->kind == VarKind::List ? "list index out of range" : "tuple index out of range");
        return items[at];
      }
      if (i && PySlice_Check(i)) {
        Py_ssize_t start, stop, step;
        if (PySlice_Unpack(i, &start, &stop, &step) < 0) throw PythonError();
        Py_ssize_t n = PySlice_AdjustIndices(items.size(), &start, &stop, step);
        std::vector<VarRef> out;
        for (Py_ssize_t k = 0; k < n; ++k) out.push_back(items[start + k * step]);
        if (obj->kind == VarKind::List) return make_list(std::move(out));
        return sized_tuple(std::move(out), is_torch_size(obj));  // a torch.Size's slice is a torch.Size
      }
      unsupported("sequence index that is not a constant int or slice: " + describe(*index));
    }
    case VarKind::Dict: {
      PyObject* k = Trace::as_constant(*index);
      if (!k) unsupported("dict key that is not a constant");
      int at = obj->as<DictVar>().find(k);
      if (at < 0) {
        if (PyErr_Occurred()) raise_taken(take_exception(), "a dict lookup");  // an unhashable key
        raise_key_error(k);
      }
      return obj->as<DictVar>().values[at];
    }
    case VarKind::Object: {
      PyObject* o = obj->as<ObjectVar>().obj.get();
      PyObject* i = Trace::as_constant(*index);
      if (is_keyed_view(*obj)) {
        if (VarRef v = dict_view_lookup(obj, i)) return v;
        raise_key_error(i);
      }
      const TorchTable& t = trace_.table;
      if (PyObject_IsInstance(o, t.module_type.get()) == 1) {
        const char* members = module_container_kind(o);
        if (!members || !i) unsupported("indexing " + describe(*obj));
        auto children = module_children(obj, members);
        bool by_key = PyUnicode_Check(i);
        if (by_key) {
          for (auto& c : children)
            if (PyUnicode_Compare(c.key.get(), i) == 0) return c.var;
          raise_key_error(i);
        }
        std::vector<VarRef> items;
        for (auto& c : children) items.push_back(c.var);
        // Slicing a module list gives a list of its modules (eager builds a new container of
        // the same modules: iteration, len() and indexing agree). A sliced Sequential keeps its
        // type, so calling it runs its modules in order.
        VarRef sliced = subscript(make_list(std::move(items)), index);
        if (sliced->kind == VarKind::List && type_named(o, "torch.nn.modules.container", "Sequential"))
          sliced->as<SequenceVar>().named_type = PyRef::borrow(reinterpret_cast<PyObject*>(Py_TYPE(o)));
        return sliced;
      }
      if (VarRef r = call_python_dunder(obj, "__getitem__", index)) return r;
      if (i && is_builtin_instance(o)) {
        PyRef v = PyRef::steal(PyObject_GetItem(o, i));
        if (!v) {
          PyRef e = take_exception();
          if (pinned(*obj)) raise_taken(std::move(e), "indexing a " + std::string(Py_TYPE(o)->tp_name));
          unsupported("indexing a constant raised an error");
        }
        return trace_.constant(std::move(v));
      }
      unsupported("indexing " + describe(*obj));
    }
    default:
      unsupported("indexing " + describe(*obj));
  }
}

void Interpreter::store_subscript(const VarRef& obj, const VarRef& index_in, const VarRef& value) {
  VarRef index = trace_.specialize_slices(index_in);
  if (obj->kind == VarKind::Tensor) {
    trace_.call_torch(operator_fn("setitem"), {obj, index, value}, {});
    return;
  }
  if (obj->kind == VarKind::List) {
    trace_.record_mutation(obj, {value});
    auto& items = obj->as<SequenceVar>().items;
    PyObject* i = Trace::as_constant(*index);
    if (i && PySlice_Check(i)) {
      Py_ssize_t start, stop, step;
      if (PySlice_Unpack(i, &start, &stop, &step) < 0) throw PythonError();
      PySlice_AdjustIndices(items.size(), &start, &stop, step);
      if (step != 1) unsupported("extended slice assignment to a list");
      std::vector<VarRef> repl = iterate(value);
      if (stop < start) stop = start;
      items.erase(items.begin() + start, items.begin() + stop);
      items.insert(items.begin() + start, repl.begin(), repl.end());
      return;
    }
    if (!i || !PyIndex_Check(i)) unsupported("list item assignment at a non-constant index");
    Py_ssize_t at = PyNumber_AsSsize_t(i, nullptr), n = items.size();
    if (at < 0) at += n;
    if (at < 0 || at >= n) raise(PyExc_IndexError, "list assignment index out of range");
    items[at] = value;
    return;
  }
  if (obj->kind == VarKind::Dict) {
    PyObject* k = Trace::as_constant(*index);
    if (!k) unsupported("dict item assignment with a non-constant key");
    if (trace_.store_unread(obj, k, value)) return;
    auto& d = obj->as<DictVar>();
    trace_.record_mutation(obj, {value});
    int at = d.find(k);
    if (at >= 0) {
      d.values[at] = value;
    } else {
      if (PyErr_Occurred()) throw PythonError();
      d.keys.push_back(PyRef::borrow(k));
      d.values.push_back(value);
    }
    return;
  }
  if (obj->kind == VarKind::Record) {
    PyObject* k = Trace::as_constant(*index);
    if (!k || !PyUnicode_Check(k)) unsupported("item assignment on " + describe(*obj) + " with a key that is not a constant string");
    return record_store(obj, str_of(k), value);
  }
  unsupported("item assignment on " + describe(*obj));
}

void Interpreter::delete_subscript(const VarRef& obj, const VarRef& index) {
  PyObject* i = Trace::as_constant(*index);
  if (obj->kind == VarKind::List || obj->kind == VarKind::Dict) trace_.record_mutation(obj);
  if (obj->kind == VarKind::List && i) {
    auto& items = obj->as<SequenceVar>().items;
    if (PySlice_Check(i)) {
      Py_ssize_t start, stop, step;
      if (PySlice_Unpack(i, &start, &stop, &step) < 0) throw PythonError();
      Py_ssize_t n = PySlice_AdjustIndices(items.size(), &start, &stop, step);
      std::vector<bool> drop(items.size(), false);
      for (Py_ssize_t k = 0; k < n; ++k) drop[start + k * step] = true;
      std::vector<VarRef> kept;
      for (size_t k = 0; k < items.size(); ++k)
        if (!drop[k]) kept.push_back(items[k]);
      items = std::move(kept);
      return;
    }
    if (PyIndex_Check(i)) {
      Py_ssize_t at = PyNumber_AsSsize_t(i, nullptr), n = items.size();
      if (at < 0) at += n;
      if (at < 0 || at >= n) raise(PyExc_IndexError, "list assignment index out of range");
      items.erase(items.begin() + at);
      return;
    }
  }
  if (obj->kind == VarKind::Dict && i) {
    auto& d = obj->as<DictVar>();
    int at = d.find(i);
    if (at < 0) {
      if (PyErr_Occurred()) raise_taken(take_exception(), "del of a dict item");
      raise_key_error(i);
    }
    d.keys.erase(d.keys.begin() + at);
    d.values.erase(d.values.begin() + at);
    return;
  }
  unsupported("del of an item of " + describe(*obj));
}

VarRef Interpreter::call_python_dunder(const VarRef& obj, const char* name, const VarRef& arg) {
  if (obj->kind != VarKind::Object || obj->as<ObjectVar>().opaque) return nullptr;
  PyObject* o = obj->as<ObjectVar>().obj.get();
  if (is_builtin_instance(o) || PyType_Check(o) || PyObject_IsInstance(o, trace_.table.module_type.get()) == 1) return nullptr;
  PyRef key = PyRef::steal(PyUnicode_InternFromString(name));
  PyObject* method = _PyType_Lookup(Py_TYPE(o), key.get());
  if (!method || !PyFunction_Check(method)) return nullptr;
  std::vector<VarRef> args{obj};
  if (arg) args.push_back(arg);
  return inline_real_function(method, nullptr, std::move(args), {});
}

VarRef Interpreter::call_python_dunder(const VarRef& obj, const char* name) { return call_python_dunder(obj, name, nullptr); }

std::vector<Interpreter::ModuleMember> Interpreter::module_children(const VarRef& module, const char* dict_name) {
  if (!module->source) unsupported("members of a module that is not reachable from the frame");
  PyObject* m = module->as<ObjectVar>().obj.get();
  PyRef members = PyRef::steal(PyObject_GetAttrString(m, dict_name));
  if (!members || !PyDict_Check(members.get())) throw PythonError();
  trace_.guards.dict_keys(Source::attr(module->source, dict_name), PyRef::steal(PySequence_Tuple(members.get())).get());
  std::vector<ModuleMember> out;
  PyObject *k, *v;
  Py_ssize_t pos = 0;
  while (PyDict_Next(members.get(), &pos, &k, &v)) {
    if (!PyUnicode_Check(k)) unsupported("a module member with a non-string name");
    out.push_back({PyRef::borrow(k), PyRef::borrow(v),
                   v == Py_None ? trace_.none() : trace_.wrap(v, Source::module_member(module->source, str_of(k)))});
  }
  return out;
}

std::vector<VarRef> Interpreter::iterate(const VarRef& v) {
  switch (v->kind) {
    case VarKind::Record: {
      std::vector<VarRef> no_args;
      Kwargs no_kwargs;
      return iterate(record_method(v, "keys", no_args, no_kwargs));
    }
    case VarKind::Tuple:
    case VarKind::List:
      return v->as<SequenceVar>().items;
    case VarKind::Dict: {
      std::vector<VarRef> keys;
      for (auto& k : v->as<DictVar>().keys) keys.push_back(trace_.constant(k));
      return keys;
    }
    case VarKind::Iterator: {
      auto& it = v->as<IteratorVar>();
      std::vector<VarRef> rest(it.items.begin() + it.position, it.items.end());
      it.position = it.items.size();
      return rest;
    }
    case VarKind::Tensor: {
      PyRef unbind = PyRef::steal(PyObject_GetAttrString(trace_.table.torch.get(), "unbind"));
      if (!unbind) throw PythonError();
      return iterate(trace_.call_torch(unbind.get(), {v}, {}));
    }
    case VarKind::Object: {
      PyObject* o = v->as<ObjectVar>().obj.get();
      const TorchTable& t = trace_.table;
      if (PyObject_IsInstance(o, t.module_type.get()) == 1) {
        const char* members = module_container_kind(o);
        if (!members) unsupported("iterating " + describe(*v));
        bool dict_like = is_dict_container(o);
        std::vector<VarRef> out;
        for (auto& c : module_children(v, members)) out.push_back(dict_like ? trace_.constant(c.key) : c.var);
        return out;
      }
      if (std::optional<std::vector<VarRef>> items = iterate_python(v)) return std::move(*items);
      if (!is_builtin_instance(o) && !PyType_Check(o)) unsupported("iterating " + describe(*v));
      // An object read from the frame and guarded by its type alone (an iterator, whose items
      // reading consumes; a set) may hold other items on the next call: not unrolled.
      if (v->source && !trace_.guarded_by_value(o))
        unsupported("iterating " + describe(*v) + ", read from the frame and guarded by its type only");
      PyRef it = PyRef::steal(PyObject_GetIter(o));
      if (!it) {
        PyErr_Clear();
        unsupported("iterating " + describe(*v));
      }
      std::vector<VarRef> out;
      while (PyObject* item = PyIter_Next(it.get())) {
        out.push_back(trace_.constant(PyRef::steal(item)));
        if (out.size() > 100000) unsupported("iterating a very long constant sequence");
      }
      if (PyErr_Occurred()) throw PythonError();
      return out;
    }
    default:
      unsupported("iterating " + describe(*v));
  }
}

// ---------------------------------------------------------------------------------------------
// Operators

VarRef Interpreter::binary_op(int nb, const VarRef& lhs_in, const VarRef& rhs_in) {
  bool inplace = nb >= 13;
  int base = nb % 13;
  if (is_size_int(lhs_in) || is_size_int(rhs_in)) {
    // + - * // % on sizes and int constants stay expressions over the shape symbols.
    // A dynamic int's result keeps the plan that recomputes it from the frame (Trace::with_int_plan).
    std::optional<sym::Expr> a = size_expr(lhs_in), b = size_expr(rhs_in);
    PyObject* op = operator_fn(inplace ? kInplace[base] : kBinary[base]);
    if (a && b) {
      switch (base) {
        case 0: return trace_.with_int_plan(trace_.size_int(*a + *b), op, lhs_in, rhs_in);
        case 10: return trace_.with_int_plan(trace_.size_int(*a - *b), op, lhs_in, rhs_in);
        case 5: return trace_.with_int_plan(trace_.size_int(*a * *b), op, lhs_in, rhs_in);
        case 2:
          if (trace_.size_relation(sym::Rel{*b, sym::RelOp::Ne, 0}))
            return trace_.with_int_plan(trace_.size_int(floordiv(*a, *b)), op, lhs_in, rhs_in);
          break;
        case 6:
          if (trace_.size_relation(sym::Rel{*b, sym::RelOp::Ne, 0}))
            return trace_.with_int_plan(trace_.size_int(mod(*a, *b)), op, lhs_in, rhs_in);
          break;
        default:
          break;
      }
    }
  }
  if ((lhs_in->kind == VarKind::SymInt || rhs_in->kind == VarKind::SymInt) && !is_size_int(lhs_in) && !is_size_int(rhs_in)) {
    // + - * // % on ints keep a SymInt symbolic; anything else specializes it.
    bool arith = base == 0 || base == 10 || base == 5 || base == 2 || base == 6;
    if (arith)
      if (VarRef s = trace_.sym_int_arith(operator_fn(inplace ? kInplace[base] : kBinary[base]), lhs_in, rhs_in)) return s;
  }
  // A size with a tensor is the op's sym(...) scalar; anything else gets the size's value.
  bool tensors = lhs_in->kind == VarKind::Tensor || rhs_in->kind == VarKind::Tensor;
  VarRef lhs = tensors && is_size_int(lhs_in) ? lhs_in : trace_.specialize(lhs_in);
  VarRef rhs = tensors && is_size_int(rhs_in) ? rhs_in : trace_.specialize(rhs_in);
  if (lhs->kind == VarKind::Tensor || rhs->kind == VarKind::Tensor) {
    if (inplace && lhs->kind == VarKind::Tensor) return trace_.call_torch(operator_fn(kInplace[base]), {lhs, rhs}, {});
    if (lhs->kind == VarKind::Tensor && kBinaryCore[base] != ir::Op::TorchCall)
      return trace_.call_torch(trace_.op_callable(kBinaryCore[base]), {lhs, rhs}, {});
    // `0.5 * x` with x of symbolic sizes: the core op with the operands swapped (+ and * commute,
    // exactly, and promote alike), whose shape rule answers; a static x keeps operator.mul's node.
    if (rhs->kind == VarKind::Tensor && (base == 0 || base == 5) && !inplace && trace_.symbolic(rhs->as<TensorVar>().type))
      return trace_.call_torch(trace_.op_callable(kBinaryCore[base]), {rhs, lhs}, {});
    return trace_.call_torch(operator_fn(kBinary[base]), {lhs, rhs}, {});
  }
  // Sequences the trace models: concatenation and repetition keep the left operand's kind.
  // (A constant on the left, such as a torch.Size, goes through Python below.)
  bool lseq = lhs->kind == VarKind::Tuple || lhs->kind == VarKind::List;
  bool rseq = rhs->kind == VarKind::Tuple || rhs->kind == VarKind::List;
  // A constant tuple (`()` is a LOAD_CONST) joined with a tuple the trace built: a tuple.
  bool const_tuple_join = base == 0 && rhs->kind == VarKind::Tuple && lhs->kind == VarKind::Object &&
                          PyTuple_CheckExact(lhs->as<ObjectVar>().obj.get());
  if (lseq || (rseq && base == 5) || const_tuple_join) {
    if (base == 0) {  // concatenation
      std::vector<VarRef> items = iterate(lhs);
      for (auto& x : iterate(rhs)) items.push_back(x);
      if (inplace && lhs->kind == VarKind::List) {
        trace_.record_mutation(lhs, items);
        lhs->as<SequenceVar>().items = std::move(items);
        return lhs;
      }
      if (lhs->kind == VarKind::List) return make_list(std::move(items));
      return sized_tuple(std::move(items), is_torch_size(lhs));  // torch.Size + tuple is a torch.Size
    }
    if (base == 5) {  // repetition
      const VarRef& seq = lseq ? lhs : rhs;
      PyObject* n = Trace::as_constant(*(lseq ? rhs : lhs));
      if (!n || !PyLong_Check(n)) unsupported("sequence repetition by a non-constant");
      std::vector<VarRef> items, one = iterate(seq);
      for (long k = 0; k < PyLong_AsLong(n); ++k) items.insert(items.end(), one.begin(), one.end());
      return seq->kind == VarKind::List ? make_list(std::move(items)) : make_tuple(std::move(items));
    }
  }
  if (base == 7 && lhs->kind == VarKind::Dict && rhs->kind == VarKind::Dict) {  // d1 | d2
    if (inplace) trace_.record_mutation(lhs, rhs->as<DictVar>().values);
    const DictVar& left = lhs->as<DictVar>();  // reads an unread dict of the caller first
    auto merged = inplace ? std::static_pointer_cast<DictVar>(lhs) : std::make_shared<DictVar>(left);
    if (!inplace) merged->source = nullptr;
    auto& src = rhs->as<DictVar>();
    for (size_t i = 0; i < src.keys.size(); ++i) merged->put(src.keys[i].get(), src.values[i]);
    return merged;
  }
  // Python evaluates the rest on values: sizes inside containers get theirs (guarded).
  trace_.specialize_sizes(*lhs);
  trace_.specialize_sizes(*rhs);
  PyRef a = Trace::materialize(*lhs), b = Trace::materialize(*rhs);
  if (!a || !b) unsupported(std::string("operator ") + kBinary[base] + " on " + describe(*lhs) + " and " + describe(*rhs));
  PyRef r = PyRef::steal(PyObject_CallFunctionObjArgs(operator_fn(inplace ? kInplace[base] : kBinary[base]), a.get(), b.get(), nullptr));
  if (!r) {
    PyRef e = take_exception();
    if (pinned(*lhs) && pinned(*rhs)) raise_taken(std::move(e), std::string("operator ") + kBinary[base] + " on constants");
    unsupported(std::string("operator ") + kBinary[base] + " raised an exception on constants");
  }
  return trace_.constant(std::move(r));
}

namespace {

// Python tries the reflected comparison of the right operand: a < b falls back to b > a.
const int kReflected[6] = {Py_GT, Py_GE, Py_EQ, Py_NE, Py_LT, Py_LE};

// Whether comparing `o` by `op` can run Python code: the method its type resolves for `op` is not
// C code (a str-based Enum compares with str's C method; a class with a Python __eq__ does not).
// object.__ne__ calls __eq__, so `!=` looks at both.
bool comparison_runs_python(PyObject* o, int op) {
  if (is_builtin_instance(o)) return false;
  static const char* kNames[6] = {"__lt__", "__le__", "__eq__", "__ne__", "__gt__", "__ge__"};
  for (int which : {op, op == Py_NE ? Py_EQ : op}) {
    PyRef name = PyRef::steal(PyUnicode_InternFromString(kNames[which]));
    PyObject* m = _PyType_Lookup(Py_TYPE(o), name.get());
    if (m && !Py_IS_TYPE(m, &PyWrapperDescr_Type) && !Py_IS_TYPE(m, &PyMethodDescr_Type) && !PyCFunction_Check(m))
      return true;
  }
  return false;
}

}  // namespace

VarRef Interpreter::compare(int op, const VarRef& lhs, const VarRef& rhs) {
  if (is_size_int(lhs) || is_size_int(rhs)) {
    std::optional<sym::Expr> a = size_expr(lhs), b = size_expr(rhs);
    if (a && b) {
      // A comparison of sizes: a relation the shape guard keeps (or a static fact).
      static const sym::RelOp kOps[] = {sym::RelOp::Lt, sym::RelOp::Le, sym::RelOp::Eq, sym::RelOp::Ne, sym::RelOp::Lt, sym::RelOp::Le};
      bool swap = op == Py_GT || op == Py_GE;
      sym::Rel rel{swap ? *b : *a, kOps[op], swap ? *a : *b};
      return trace_.constant(PyRef::borrow(trace_.size_relation(rel) ? Py_True : Py_False));
    }
    return compare(op, trace_.specialize(lhs), trace_.specialize(rhs));
  }
  if (lhs->kind == VarKind::Tensor) return trace_.call_torch(trace_.op_callable(kCompareCore[op]), {lhs, rhs}, {});
  if (rhs->kind == VarKind::Tensor) return trace_.call_torch(operator_fn(kCompare[op]), {lhs, rhs}, {});
  if ((op == Py_EQ || op == Py_NE) && lhs->kind == VarKind::Object && rhs->kind == VarKind::Object) {
    PyObject* a = lhs->as<ObjectVar>().obj.get();
    PyObject* b = rhs->as<ObjectVar>().obj.get();
    bool plain = (!is_builtin_instance(a) || !is_builtin_instance(b)) &&
                 Py_TYPE(a)->tp_richcompare == PyBaseObject_Type.tp_richcompare &&
                 Py_TYPE(b)->tp_richcompare == PyBaseObject_Type.tp_richcompare;
    if (plain) return trace_.constant(PyRef::borrow(((a == b) == (op == Py_EQ)) ? Py_True : Py_False));
  }
  trace_.specialize_sizes(*lhs);  // a tuple of sizes compared with constants: Python decides on values
  trace_.specialize_sizes(*rhs);
  PyRef a = Trace::materialize(*lhs), b = Trace::materialize(*rhs);
  if (!a || !b) unsupported(std::string("comparison ") + kCompare[op] + " of " + describe(*lhs) + " and " + describe(*rhs));
  if (comparison_runs_python(a.get(), op) || comparison_runs_python(b.get(), kReflected[op]))
    unsupported("comparison that runs a user-defined __eq__/__lt__");
  PyRef r = PyRef::steal(PyObject_RichCompare(a.get(), b.get(), op));
  if (!r) {
    PyErr_Clear();
    unsupported("comparison raised an exception on constants");
  }
  return trace_.constant(std::move(r));
}

VarRef Interpreter::unary(const char* torch_name, int py_op, const VarRef& v_in) {
  // -T and +T of a size stay expressions (a dynamic int keeps its plan: 0 - T).
  if (is_size_int(v_in) && (py_op == 0 || py_op == 1)) {
    sym::Expr e = *v_in->as<SymIntVar>().size;
    if (py_op == 1) return v_in;
    VarRef zero = trace_.constant(PyRef::steal(PyLong_FromLong(0)));
    return trace_.with_int_plan(trace_.size_int(sym::Expr(0) - e), operator_fn("sub"), zero, v_in);
  }
  VarRef v = trace_.specialize(v_in);
  if (v->kind == VarKind::Tensor) {
    PyRef fn = PyRef::steal(PyObject_GetAttrString(trace_.table.torch.get(), torch_name));
    if (!fn) throw PythonError();
    return trace_.call_torch(fn.get(), {v}, {});
  }
  PyObject* c = Trace::as_constant(*v);
  if (!c) unsupported(std::string("unary ") + torch_name + " of " + describe(*v));
  PyObject* r = py_op == 0 ? PyNumber_Negative(c) : py_op == 1 ? PyNumber_Positive(c) : py_op == 2 ? PyNumber_Invert(c) : PyNumber_Absolute(c);
  if (!r) {
    PyErr_Clear();
    unsupported(std::string("unary ") + torch_name + " raised an exception on a constant");
  }
  return trace_.constant(PyRef::steal(r));
}

bool Interpreter::truthy(const VarRef& v) {
  switch (v->kind) {
    case VarKind::SymInt:
    case VarKind::Slice:
      return truthy(trace_.specialize(v));
    case VarKind::Record:
      return !record_present(v->as<RecordVar>()).empty();
    case VarKind::Tensor:
      unsupported("branching on a tensor's value (data-dependent control flow, bool(tensor))");
    case VarKind::Tuple:
    case VarKind::List:
      return !v->as<SequenceVar>().items.empty();
    case VarKind::Dict:
      return !v->as<DictVar>().keys.empty();
    case VarKind::Null:
      unsupported("truth value of NULL");
    case VarKind::Object: {
      PyObject* o = v->as<ObjectVar>().obj.get();
      PyTypeObject* t = Py_TYPE(o);
      bool user_truth = (t->tp_flags & Py_TPFLAGS_HEAPTYPE) &&
                        ((t->tp_as_number && t->tp_as_number->nb_bool) || (t->tp_as_mapping && t->tp_as_mapping->mp_length) ||
                         (t->tp_as_sequence && t->tp_as_sequence->sq_length));
      if (user_truth && PyObject_IsInstance(o, trace_.table.module_type.get()) != 1) {
        // Python asks __bool__, then __len__ (through len(): its checks apply).
        if (VarRef r = call_python_dunder(v, "__bool__")) {
          PyObject* c = Trace::as_constant(*trace_.specialize(r));
          if (!c || !PyBool_Check(c)) unsupported("__bool__ of a " + std::string(t->tp_name) + " object returned a value that is not a known bool");
          return c == Py_True;
        }
        static PyObject* bool_name = PyUnicode_InternFromString("__bool__");
        if (!_PyType_Lookup(t, bool_name)) {
          VarRef n = length(v);
          return PyLong_AsSsize_t(Trace::as_constant(*n)) != 0;
        }
        unsupported("truth value of a " + std::string(t->tp_name) + " object (user-defined __bool__/__len__)");
      }
      if (user_truth) return PyObject_Length(o) != 0;  // a container module: len(_modules)
      int r = PyObject_IsTrue(o);
      if (r < 0) throw PythonError();
      return r;
    }
    default:
      return true;
  }
}

bool Interpreter::identical(const VarRef& a, const VarRef& b) {
  if (a == b) return true;
  if (a->kind == VarKind::Object && b->kind == VarKind::Object)
    return a->as<ObjectVar>().obj.get() == b->as<ObjectVar>().obj.get();
  if (a->kind == VarKind::Tensor && b->kind == VarKind::Tensor)
    return a->as<TensorVar>().value == b->as<TensorVar>().value;
  if (a->kind == VarKind::Null || b->kind == VarKind::Null) return a->kind == b->kind;
  if (a->source && b->source) {
    if (a->source->str() == b->source->str()) return true;
    unsupported("identity test between two objects of the caller");
  }
  return false;  // different kinds of abstract values are different objects
}

bool Interpreter::contains(const VarRef& container, const VarRef& item) {
  if (container->kind == VarKind::Dict) {
    PyObject* k = Trace::as_constant(*item);
    if (!k) unsupported("`in` test of a dict with a non-constant key");
    int at = container->as<DictVar>().find(k);
    if (at < 0 && PyErr_Occurred()) throw PythonError();
    return at >= 0;
  }
  if (container->kind == VarKind::Tuple || container->kind == VarKind::List) {
    PyObject* c = Trace::as_constant(*item);
    for (auto& x : container->as<SequenceVar>().items) {
      if (identical(x, item)) return true;
      PyObject* xc = Trace::as_constant(*x);
      if (c && xc && is_builtin_instance(c) && is_builtin_instance(xc)) {
        int r = PyObject_RichCompareBool(xc, c, Py_EQ);
        if (r < 0) throw PythonError();
        if (r) return true;
      } else if (x->kind == VarKind::Tensor || item->kind == VarKind::Tensor) {
        if (x->kind == item->kind) unsupported("`in` test comparing tensors by value");
      }
    }
    return false;
  }
  if (container->kind == VarKind::Record) {
    std::vector<VarRef> key{item};
    Kwargs none;
    return truthy(record_method(container, "__contains__", key, none));
  }
  if (is_keyed_view(*container)) return dict_view_lookup(container, Trace::as_constant(*item)) != nullptr;
  if (VarRef r = call_python_dunder(container, "__contains__", item)) return truthy(r);
  // Without __contains__, Python's `in` walks the object's own iteration.
  if (std::optional<std::vector<VarRef>> items = iterate_python(container)) return contains(make_tuple(std::move(*items)), item);
  PyObject* c = Trace::as_constant(*container);
  PyObject* i = Trace::as_constant(*item);
  if (c && i && is_builtin_instance(c)) {
    int r = PySequence_Contains(c, i);
    if (r < 0) {
      PyErr_Clear();
      unsupported("`in` test raised an exception");
    }
    return r;
  }
  if (c && PyObject_IsInstance(c, trace_.table.module_type.get()) == 1 && i && PyUnicode_Check(i)) {
    // `name in module_dict`
    PyRef modules = PyRef::steal(PyObject_GetAttrString(c, "_modules"));
    if (modules && PyDict_Check(modules.get()) && container->source) {
      trace_.guards.dict_keys(Source::attr(container->source, "_modules"), PyRef::steal(PySequence_Tuple(modules.get())).get());
      return PyDict_Contains(modules.get(), i) == 1;
    }
  }
  unsupported("`in` test on " + describe(*container));
}

VarRef Interpreter::length(const VarRef& v) {
  size_t n = 0;
  switch (v->kind) {
    case VarKind::Record:
      n = record_present(v->as<RecordVar>()).size();
      break;
    case VarKind::Tuple:
    case VarKind::List:
      n = v->as<SequenceVar>().items.size();
      break;
    case VarKind::Dict:
      n = v->as<DictVar>().keys.size();
      break;
    case VarKind::Tensor: {
      auto& sizes = v->as<TensorVar>().type.sizes;
      if (sizes.empty()) unsupported("len() of a 0-d tensor");
      if (trace_.symbolic(sizes[0])) return trace_.size_int(sizes[0]);
      n = trace_.shapes.hint(sizes[0]);
      break;
    }
    case VarKind::Object: {
      PyObject* o = v->as<ObjectVar>().obj.get();
      if (PyObject_IsInstance(o, trace_.table.module_type.get()) == 1) {
        const char* members = module_container_kind(o);
        if (!members) unsupported("len() of " + describe(*v));
        n = module_children(v, members).size();
        break;
      }
      if (VarRef r = call_python_dunder(v, "__len__")) {
        // Python's len() takes __len__'s result through __index__ and refuses negatives.
        PyObject* c = Trace::as_constant(*trace_.specialize(r));
        if (!c || !PyLong_CheckExact(c) || PyLong_AsSsize_t(c) < 0) {
          PyErr_Clear();
          unsupported("__len__ of a " + std::string(Py_TYPE(o)->tp_name) + " object returned a value that is not a known int >= 0");
        }
        return trace_.constant(PyRef::borrow(c));
      }
      if (!is_builtin_instance(o)) unsupported("len() of a " + std::string(Py_TYPE(o)->tp_name) + " object");
      Py_ssize_t r = PyObject_Length(o);
      if (r < 0) {
        PyErr_Clear();
        unsupported("len() raised an exception");
      }
      n = r;
      break;
    }
    default:
      unsupported("len() of " + describe(*v));
  }
  return trace_.constant(PyRef::steal(PyLong_FromSize_t(n)));
}

PyObject* Interpreter::python_type(const VarRef& v) const {
  switch (v->kind) {
    case VarKind::Tensor:
      return v->as<TensorVar>().py_type.get();
    case VarKind::Object:
      return reinterpret_cast<PyObject*>(Py_TYPE(v->as<ObjectVar>().obj.get()));
    case VarKind::SymInt:  // a size or a dynamic int: its value's type (int)
      return reinterpret_cast<PyObject*>(Py_TYPE(v->as<SymIntVar>().value.get()));
    case VarKind::Tuple:
    case VarKind::List: {
      auto& s = v->as<SequenceVar>();
      return s.named_type ? s.named_type.get()
                          : reinterpret_cast<PyObject*>(v->kind == VarKind::Tuple ? &PyTuple_Type : &PyList_Type);
    }
    case VarKind::Dict:
      return reinterpret_cast<PyObject*>(&PyDict_Type);
    case VarKind::Function:
      return reinterpret_cast<PyObject*>(&PyFunction_Type);
    case VarKind::Record:
      return v->as<RecordVar>().cls.get();
    default:
      return nullptr;
  }
}

VarRef Interpreter::isinstance(const VarRef& obj, const VarRef& cls) {
  PyRef c = Trace::materialize(*cls);
  if (!c) unsupported("isinstance() with a class that is not known at trace time");
  PyObject* type = python_type(obj);
  if (!type) unsupported("isinstance() of " + describe(*obj));
  int r = PyObject_IsSubclass(type, c.get());
  if (r < 0) {
    PyErr_Clear();
    unsupported("isinstance() raised an exception");
  }
  return trace_.constant(PyRef::borrow(r ? Py_True : Py_False));
}

VarRef Interpreter::build_slice(const VarRef& start_in, const VarRef& stop_in, const VarRef& step_in) {
  // A slice object holds ints, not expressions: a size bound makes a SliceVar, which a tensor
  // subscript keeps symbolic and any other use specializes (Trace::specialize).
  if (is_size_int(start_in) || is_size_int(stop_in) || is_size_int(step_in)) {
    auto bound = [&](const VarRef& v) { return is_size_int(v) ? v : trace_.specialize(v); };
    VarRef start = bound(start_in), stop = bound(stop_in), step = bound(step_in);
    if (Trace::as_constant(*start) || is_size_int(start))
      if (Trace::as_constant(*stop) || is_size_int(stop))
        if (Trace::as_constant(*step) || is_size_int(step)) return std::make_shared<SliceVar>(start, stop, step);
  }
  VarRef start = trace_.specialize(start_in), stop = trace_.specialize(stop_in), step = trace_.specialize(step_in);
  PyObject* a = Trace::as_constant(*start);
  PyObject* b = Trace::as_constant(*stop);
  PyObject* c = Trace::as_constant(*step);
  if (!a || !b || !c) unsupported("slice bounds that are not constants (tensor-valued bounds are data-dependent)");
  return trace_.constant(PyRef::steal(PySlice_New(a, b, c)));
}

VarRef Interpreter::format_value(const VarRef& v_in, const VarRef& spec) {
  VarRef v = trace_.specialize(v_in);
  trace_.specialize_sizes(*v);
  PyRef c = Trace::materialize(*v);
  PyObject* s = spec ? Trace::as_constant(*spec) : nullptr;
  if (!c || (spec && !s)) unsupported("formatting " + describe(*v) + " in an f-string");
  PyRef r = PyRef::steal(PyObject_Format(c.get(), s));
  if (!r) {
    PyErr_Clear();
    unsupported("formatting raised an exception");
  }
  return trace_.constant(std::move(r));
}

void Interpreter::step_convert_value(const bytecode::Instruction& ins) {
  // arg2 = 1: the value sits under the format spec (3.11/3.12 FORMAT_VALUE with both).
  VarRef& slot = peek(ins.arg2 + 1);
  PyRef c = Trace::materialize(*slot);
  if (!c) unsupported("formatting a value that is not a constant: " + describe(*slot));
  PyObject* r = ins.arg == 1 ? PyObject_Str(c.get()) : ins.arg == 2 ? PyObject_Repr(c.get()) : PyObject_ASCII(c.get());
  if (!r) {
    PyErr_Clear();
    unsupported("str()/repr() of a constant raised an exception");
  }
  slot = trace_.constant(PyRef::steal(r));
}

void Interpreter::step_build_string(const bytecode::Instruction& ins) {
  std::vector<VarRef> parts = pop_n(ins.arg);
  std::string s;
  for (auto& p : parts) {
    PyObject* c = Trace::as_constant(*p);
    if (!c || !PyUnicode_Check(c)) unsupported("string building from a non-constant");
    s += str_of(c);
  }
  push(trace_.constant(PyRef::steal(PyUnicode_FromStringAndSize(s.data(), s.size()))));
}

}  // namespace ember::frontend
