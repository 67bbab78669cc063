// Facts about Python objects and operators that the interpreter's files share.
#pragma once

#include <Python.h>

#include "ir/graph.h"

namespace ember::frontend::object_model {

PyObject* operator_module();
PyObject* operator_fn(const char* name);  // borrowed operator.<name>

// operator-module names of binary operators by NB_* number; in-place forms are NB_* + 13.
extern const char* const kBinary[13];
extern const char* const kInplace[13];
extern const char* const kCompare[6];
// Core ops for `tensor <op> other`, by NB_* number (TorchCall where Python's operator differs).
extern const ir::Op kBinaryCore[13];
extern const ir::Op kCompareCore[6];

// An object of a type implemented in C, whose attributes and iteration run no Python code.
bool is_builtin_instance(PyObject* o);
// Whether `o`'s type has `module.qualname` in its MRO.
bool type_named(PyObject* o, const char* module, const char* qualname);
// The member dict a torch.nn container keeps its children in, or nullptr for other modules.
const char* module_container_kind(PyObject* o);
bool is_dict_container(PyObject* o);

}  // namespace ember::frontend::object_model
