// EffectLog: the stores a trace makes outside itself (attributes, globals, cells, the contents of
// the caller's lists and dicts), in program order, to replay after the graph; and the overlays
// through which the trace's later reads see its own attribute and global writes.
//
// The log records; it does not decide. Whether a store can be replayed exactly (a container that
// holds itself, an instance __dict__, a value no plan can rebuild) is the trace's decision, made
// before it appends (trace_effects.cpp, closures.cpp). Trace::finish() gives every entry its plan;
// the compiled entry applies them (driver/compiled_frame.cpp).
#pragma once

#include <Python.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "frontend/interp/value_plan.h"
#include "frontend/interp/variables.h"
#include "frontend/source.h"
#include "pybridge/pyref.h"

namespace ember::frontend {

// A store the trace made outside itself, replayed after the graph. Contents: a list or dict of
// the caller (read through `target`) that the trace mutated, brought in place to its final
// contents (`plan` builds a new list or dict holding them; the replay copies them into the real
// object, so its identity is kept). One Contents effect per container, at its first mutation.
struct SideEffect {
  enum class Kind : uint8_t { SetAttr, SetGlobal, SetCell, Contents };
  Kind kind = Kind::SetAttr;
  SourceRef target;  // SetAttr: the object; Contents: the list or dict
  PyRef globals;     // SetGlobal: the dict
  std::string name;
  int cell = -1;     // SetCell: index in the compiled function's closure
  VarRef value;     // during the trace
  ValuePlan plan;   // after finish()
};

class EffectLog {
 public:
  // `obj.name = value` on an object read from the frame; later reads of the attribute see `value`.
  void set_attr(const VarRef& obj, const std::string& name, const VarRef& value);
  // `globals[name] = value`; later reads of the global see `value`.
  void set_global(PyObject* globals, const std::string& name, const VarRef& value);
  // A write to the compiled function's own closure cell `closure_index`.
  void set_cell(int closure_index, const VarRef& value);
  // A write to a real cell the trace read through `cell` (its `cell_contents` is set).
  void set_cell_contents(const SourceRef& cell, const VarRef& value);
  // The caller's list or dict read through `target` ends with the contents of `container`.
  void set_contents(const SourceRef& target, const VarRef& container);

  // The value the trace wrote to `obj.name` / `globals[name]`, or nullptr.
  VarRef attr(PyObject* obj, const std::string& name) const;
  VarRef global(PyObject* globals, const std::string& name) const;

  std::vector<SideEffect>& entries() { return entries_; }
  // The entries, for the compiled entry that replays them; the log is empty afterwards.
  std::vector<SideEffect> take() { return std::move(entries_); }

 private:
  std::vector<SideEffect> entries_;
  std::map<std::pair<PyObject*, std::string>, VarRef> attr_overlay_;
  std::map<std::pair<PyObject*, std::string>, VarRef> global_overlay_;
};

}  // namespace ember::frontend
