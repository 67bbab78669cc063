// ValuePlan: how to rebuild a Python value after a compiled frame's graph ran (the frame's return
// value, a value a side effect stores, the values a graph break passes on). The trace makes plans
// (Trace::plan_value); the compiled entry builds them on every call (driver/compiled_frame.cpp).
#pragma once

#include <Python.h>

#include <cstdint>
#include <vector>

#include "frontend/source.h"
#include "pybridge/pyref.h"

namespace ember::frontend {

// How to rebuild a Python value after the graph ran: the frame's return value, or the value a
// side effect stores.
struct ValuePlan {
  enum class Kind : uint8_t { Const, GraphOutput, FromSource, Tuple, List, Dict, Named, Call, Object, Function, Cell, FrameCell };
  Kind kind = Kind::Const;
  PyRef constant;          // Const; for Named, the type to call with the items; for Dict, the keys
                           // tuple; for Call, the callable applied to the items; for Object, the
                           // tuple (class, attribute names): object.__new__(class), then the
                           // items assigned to those attributes
                           // Function: the tuple (code, globals); its items are the defaults
                           // tuple, the kwdefaults dict, the closure tuple and the flat
                           // annotations tuple, each a None constant when absent.
                           // Cell: a new cell; items: its contents, or none while empty.
  int output = -1;         // GraphOutput: index into Graph::outputs(); FrameCell: index of the
                           // compiled function's closure cell (the cell object itself)
  SourceRef source;        // FromSource
  std::vector<ValuePlan> items;
  // A list, dict, object, function or cell the trace made: every plan of the same Var has the
  // same id (0, 1, ...), and one run builds it once, so aliases stay aliases (`l = []; return l,
  // l`) and closures share their cells with the frame. Objects, functions and cells are
  // registered before their items are built: a plan met again inside its own items (a recursive
  // closure) has no items and stands for the object being built. -1 otherwise.
  int identity = -1;
};

}  // namespace ember::frontend
