// Closures in a trace: the cell objects a frame reaches, and the plans that rebuild functions
// made by MAKE_FUNCTION (and their cells) after the graph.
//
// A closure made during the trace can cross a graph break, be returned or be stored: it is
// rebuilt as a real function from its code, globals, defaults, kwdefaults, annotations and
// closure. Its cells must be *the same objects* as the cells of the frame it was made in, so
// that `nonlocal` writes on either side are seen on the other (as in CPython): a cell the trace
// made is planned with an identity (built once per run, shared by every closure and by the
// glue and resume functions that receive it; graph_break.h), and a real cell is passed on as the
// object it is. The code after a break therefore reads real cell objects from its arguments;
// wrap_cell keeps one CellVar per cell object so that a write through one name (the resume
// function's cell variable) is seen through another (the closure's __closure__ item).
#include "frontend/interp/trace.h"

namespace ember::frontend {

VarRef Trace::wrap_cell(PyObject* cell, const SourceRef& source) {
  guards.type_match(source, Py_TYPE(cell));
  auto found = cell_index_.find(cell);
  if (found != cell_index_.end()) {
    const VarRef& var = cells_[found->second].var;
    const SourceRef& contents = var->source;
    if (contents && contents->kind == Source::Kind::Attr && contents->name == "cell_contents") {
      cell_sources_.emplace_back(source, found->second);
    } else {
      // Known without a source of the cell object (the function's own closure): only an
      // identity guard ties the two.
      guards.id_match(source, cell);
    }
    return var;
  }
  auto c = std::make_shared<CellVar>();
  c->real = PyRef::borrow(cell);
  // Its contents are read (and guarded) lazily, by LOAD_DEREF, through this source.
  c->source = Source::attr(source, "cell_contents");
  int index = static_cast<int>(cells_.size());
  cell_index_.emplace(cell, index);
  cells_.push_back(FrameCell{c, false});
  cell_sources_.emplace_back(source, index);
  return c;
}

void Trace::register_frame_cell(PyObject* cell, const VarRef& var) {
  if (cell_index_.count(cell)) return;
  cell_index_.emplace(cell, static_cast<int>(cells_.size()));
  cells_.push_back(FrameCell{var, false});
}

VarRef Trace::cell_of(PyObject* cell) {
  auto found = cell_index_.find(cell);
  if (found != cell_index_.end()) return cells_[found->second].var;
  auto c = std::make_shared<CellVar>();
  c->real = PyRef::borrow(cell);
  register_frame_cell(cell, c);
  return c;
}

void Trace::guard_closure(PyObject* fn, const SourceRef& source) {
  guards.type_match(source, Py_TYPE(fn));
  guards.id_match(Source::attr(source, "__code__"), PyFunction_GET_CODE(fn));
  guards.id_match(Source::attr(source, "__globals__"), PyFunction_GET_GLOBALS(fn));
  guards.length(Source::attr(source, "__closure__"), PyTuple_GET_SIZE(PyFunction_GET_CLOSURE(fn)));
}

void Trace::record_cell_write(const VarRef& cell, const VarRef& value) {
  auto& c = cell->as<CellVar>();
  auto found = cell_index_.find(c.real.get());
  if (found == cell_index_.end()) throw Unsupported("assignment to a nonlocal variable whose cell Ember did not read");
  cells_[found->second].written = true;
  effects.set_cell_contents(c.source->base, value);
}

void Trace::alias_cells(int first_object) {
  // Sources that reached one cell must reach one cell again; a cell the trace wrote must not be
  // reachable through the source of another cell it modelled apart.
  std::vector<int> sources_per(cells_.size(), 0);
  bool any_written = false;
  for (auto& [source, index] : cell_sources_) ++sources_per[index];
  for (auto& c : cells_) any_written = any_written || c.written;
  for (auto& [source, index] : cell_sources_)
    if ((any_written && cells_.size() > 1) || sources_per[index] > 1)
      aliases.entries.push_back(AliasGuard::Entry{source, first_object + index, cells_[index].written});
}

ValuePlan Trace::plan_cell(const VarRef& v) {
  auto& c = v->as<CellVar>();
  ValuePlan p;
  if (c.real) {
    // The compiled function's own closure cell, or a cell object read from the frame.
    if (c.source && c.source->kind == Source::Kind::Closure) {
      p.kind = ValuePlan::Kind::FrameCell;
      p.output = static_cast<int>(c.source->index);
    } else if (c.source && c.source->kind == Source::Kind::Attr && c.source->name == "cell_contents") {
      p.kind = ValuePlan::Kind::FromSource;
      p.source = c.source->base;
    } else {
      p.kind = ValuePlan::Kind::Const;  // a cell of a function known at trace time
      p.constant = c.real;
    }
    return p;
  }
  p.kind = ValuePlan::Kind::Cell;
  p.identity = identities_.emplace(v.get(), static_cast<int>(identities_.size())).first->second;
  if (!planning_.insert(v.get()).second) return p;  // inside its own contents (see ValuePlan)
  if (c.contents) p.items.push_back(plan_value(c.contents));
  planning_.erase(v.get());
  return p;
}

ValuePlan Trace::plan_function(const VarRef& v) {
  auto& f = v->as<FunctionVar>();
  ValuePlan p;
  p.kind = ValuePlan::Kind::Function;
  p.identity = identities_.emplace(v.get(), static_cast<int>(identities_.size())).first->second;
  p.constant = PyRef::steal(PyTuple_Pack(2, f.code.get(), f.globals.get()));
  if (!p.constant) throw PythonError();
  if (!planning_.insert(v.get()).second) return p;
  auto none = [] {
    ValuePlan n;
    n.constant = PyRef::borrow(Py_None);
    return n;
  };
  auto tuple_of = [&](const std::vector<VarRef>& xs) {
    if (xs.empty()) return none();
    ValuePlan t;
    t.kind = ValuePlan::Kind::Tuple;
    for (const VarRef& x : xs) t.items.push_back(plan_value(x));
    return t;
  };
  p.items.push_back(tuple_of(f.defaults));
  p.items.push_back(f.kwdefaults ? plan_value(f.kwdefaults) : none());
  p.items.push_back(tuple_of(f.closure));
  p.items.push_back(f.annotations ? plan_value(f.annotations) : none());
  planning_.erase(v.get());
  return p;
}

}  // namespace ember::frontend
