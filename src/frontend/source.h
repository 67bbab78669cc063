// Sources: where a value the trace depended on lives, relative to the frame.
//
// Every Python object the symbolic interpreter reads from outside the trace remembers its source
// (a local, a global, a closure cell, then attributes and items). Guards check the object at the
// source on each call; graph inputs (tensors, parameters, buffers) are read through their source.
// A source prints as Python-like text: L['x'], G['torch'], C['scale'], L['self'].layers[0].weight,
// L['cfg']['dim'], M['transformers.utils.generic'].__dict__['logger'].
#pragma once

#include <Python.h>

#include <cstdint>
#include <memory>
#include <string>

#include "frontend/frame.h"

namespace ember::frontend {

struct Source;
using SourceRef = std::shared_ptr<const Source>;

struct Source {
  enum class Kind : uint8_t {
    Local,        // index: localsplus slot (an argument); name: the parameter name
    Global,       // name: key in the frame's globals
    Builtin,      // name: key in the frame's builtins
    Closure,      // index: position in the function's closure tuple; name: the free variable
    Attr,         // base.name, by ordinary attribute lookup
    ModuleMember, // base is an nn.Module; name found in its __dict__, _parameters, _buffers or _modules
    Item,         // base[index] for a list or tuple
    DictItem,     // base[key] for a dict with a str key (name)
    Module,       // name: a loaded module, sys.modules[name] (the globals of library code Ember inlines)
  };
  Kind kind;
  SourceRef base;    // null for Local, Global, Builtin, Closure
  std::string name;
  int64_t index = 0;

  static SourceRef local(int slot, std::string name);
  static SourceRef global(std::string name);
  static SourceRef builtin(std::string name);
  static SourceRef closure(int index, std::string name);
  static SourceRef attr(SourceRef base, std::string name);
  static SourceRef module_member(SourceRef base, std::string name);
  static SourceRef item(SourceRef base, int64_t index);
  static SourceRef dict_item(SourceRef base, std::string key);
  static SourceRef module(std::string name);

  std::string str() const;
};

// Resolves `source` against `frame`. Returns a new reference, or nullptr with a Python error set
// (AttributeError, KeyError, IndexError...) when the path no longer exists.
PyObject* resolve(const Source& source, const FrameView& frame);

}  // namespace ember::frontend
