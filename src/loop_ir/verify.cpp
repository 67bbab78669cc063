// The loop IR verifier: the structural and type rules of loop_ir.h (docs/loop-ir.md lists them),
// which every pass must preserve and every later stage (scheduler, memory planner, code
// generators) may assume.
//
// It never throws and never trusts an id: parsed text can hold any malformed program, and the
// point is to say what is wrong, one message per problem, each naming the buffer, kernel or node.
// Decisions it encodes: stores into Input buffers (and views of them) are allowed, since that is
// how a graph's in-place mutations of its inputs are written back; a Temp or Output buffer must be
// written by an earlier or the same step before a step reads it; a program never returns a Temp
// buffer (the arena dies with the call).
#include <algorithm>
#include <map>
#include <set>

#include "loop_ir/group.h"
#include "loop_ir/loop_ir.h"

namespace ember::loop_ir {

namespace {

std::string bref(BufferId id) { return "%b" + std::to_string(id); }
std::string tref(NodeId id) { return "%t" + std::to_string(id); }

// What a kernel body computes a buffer element in: float16 and bfloat16 widen to float32.
DType compute_dtype(DType storage) {
  return storage == DType::Float16 || storage == DType::BFloat16 ? DType::Float32 : storage;
}

// Operand dtypes an op accepts, beyond "the same as the node's".
enum class Domain { Any, Float, IntegerOrBool };

Domain domain(ScalarOp op) {
  switch (op) {
    case ScalarOp::Exp:
    case ScalarOp::Log:
    case ScalarOp::Log1p:
    case ScalarOp::Expm1:
    case ScalarOp::Sqrt:
    case ScalarOp::Rsqrt:
    case ScalarOp::Sin:
    case ScalarOp::Cos:
    case ScalarOp::Tanh:
    case ScalarOp::Sigmoid:
    case ScalarOp::Erf:
    case ScalarOp::Reciprocal:
    case ScalarOp::Div:
    case ScalarOp::IsNan:
    case ScalarOp::WelfordMean:
    case ScalarOp::WelfordM2:
      return Domain::Float;
    case ScalarOp::BitwiseNot:
    case ScalarOp::BitwiseAnd:
    case ScalarOp::BitwiseOr:
    case ScalarOp::BitwiseXor:
      return Domain::IntegerOrBool;
    case ScalarOp::Load:
    case ScalarOp::Constant:
    case ScalarOp::Index:
    case ScalarOp::Neg:
    case ScalarOp::Abs:
    case ScalarOp::Relu:
    case ScalarOp::Floor:
    case ScalarOp::Ceil:
    case ScalarOp::Trunc:
    case ScalarOp::Round:
    case ScalarOp::Sign:
    case ScalarOp::LogicalNot:
    case ScalarOp::Cast:
    case ScalarOp::Add:
    case ScalarOp::Sub:
    case ScalarOp::Mul:
    case ScalarOp::FloorDiv:
    case ScalarOp::Mod:
    case ScalarOp::Pow:
    case ScalarOp::Maximum:
    case ScalarOp::Minimum:
    case ScalarOp::Eq:
    case ScalarOp::Ne:
    case ScalarOp::Lt:
    case ScalarOp::Le:
    case ScalarOp::Gt:
    case ScalarOp::Ge:
    case ScalarOp::LogicalAnd:
    case ScalarOp::LogicalOr:
    case ScalarOp::Where:
    case ScalarOp::PhiloxRand:
    case ScalarOp::ReduceSum:
    case ScalarOp::ReduceProd:
    case ScalarOp::ReduceMax:
    case ScalarOp::ReduceMin:
    case ScalarOp::CheckIndex:
    case ScalarOp::Store:
      return Domain::Any;
  }
  return Domain::Any;
}

// A literal of `dtype`: bool for b8, an integer for integer dtypes, an integer or a float for
// float dtypes (`else 0` on an f32 load).
bool scalar_fits(const Scalar& s, DType dtype) {
  if (std::holds_alternative<bool>(s)) return dtype == DType::Bool;
  if (std::holds_alternative<int64_t>(s)) return ir::is_integral(dtype) || ir::is_floating_point(dtype);
  return ir::is_floating_point(dtype);
}

// An index variable's letter and number: `i3` is ('i', 3); anything else (shape symbols) is ('\0', -1).
std::pair<char, int64_t> index_variable(const std::string& name) {
  if (name.size() < 2 || (name[0] != 'i' && name[0] != 'r' && name[0] != 't')) return {'\0', -1};
  if (name.size() > 10) return {'\0', -1};
  int64_t k = 0;
  for (size_t i = 1; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return {'\0', -1};
    k = k * 10 + (name[i] - '0');
  }
  if (name.size() > 2 && name[1] == '0') return {name[0], -2};  // leading zero: never canonical
  return {name[0], k};
}

class Verifier {
 public:
  explicit Verifier(const Program& p) : p_(p) {}

  std::vector<std::string> run() {
    check_symbols();
    check_buffers();
    check_steps();
    for (size_t s = 0; s < p_.steps.size(); ++s) {
      const Step& step = p_.steps[s];
      switch (step.kind) {
        case Step::Kind::Kernel:
          if (valid_kernel(step.index)) check_kernel(p_.kernels[step.index], static_cast<int>(s));
          break;
        case Step::Kind::Extern:
          if (valid_extern(step.index)) check_extern(p_.externs[step.index], static_cast<int>(s));
          break;
      }
    }
    check_data_flow();
    check_outputs();
    check_groups();
    return std::move(messages_);
  }

 private:
  void report(std::string message) { messages_.push_back(std::move(message)); }

  bool valid_buffer(BufferId id) const {
    return id >= 0 && static_cast<size_t>(id) < p_.buffers.size() && p_.buffers[id].id == id;
  }
  bool valid_kernel(int i) const { return i >= 0 && static_cast<size_t>(i) < p_.kernels.size(); }
  bool valid_extern(int i) const { return i >= 0 && static_cast<size_t>(i) < p_.externs.size(); }

  // The buffer whose storage `id` lies in (itself unless a view); -1 if the chain is broken.
  BufferId root(BufferId id) const {
    for (size_t hops = 0; valid_buffer(id) && hops <= p_.buffers.size(); ++hops) {
      if (p_.buffers[id].kind != Buffer::Kind::View) return id;
      id = p_.buffers[id].base;
    }
    return -1;
  }

  // Shape expressions (sizes, strides, offsets, ranges) are over shape symbols only.
  void check_shape_expr(const sym::Expr& e, const std::string& who) {
    std::set<std::string> names;
    sym::free_symbols(e, names);
    for (const std::string& n : names)
      if (index_variable(n).first != '\0')
        report(who + " uses the index variable " + n + ", but only shape symbols may appear there");
  }

  // Shape symbols: declared once each, with a consistent range, and every symbol an expression
  // mentions (other than index variables) is declared.
  void check_symbols() {
    std::set<std::string> declared;
    for (const sym::SymbolInfo& s : p_.symbols) {
      const std::string who = "symbol " + s.name;
      if (!declared.insert(s.name).second) report(who + " is declared twice");
      if (index_variable(s.name).first != '\0') report(who + " is spelled like an index variable");
      if (s.min < 0 || s.min > s.hint || s.hint > s.max) report(who + " has hint " + std::to_string(s.hint) + " outside its range");
      if (s.divisor < 1) report(who + " has divisor " + std::to_string(s.divisor) + "; it must be at least 1");
    }
    std::set<std::string> used;
    for (const Buffer& b : p_.buffers) {
      for (const sym::Expr& e : b.sizes) sym::free_symbols(e, used);
      for (const sym::Expr& e : b.strides) sym::free_symbols(e, used);
      sym::free_symbols(b.offset, used);
    }
    for (const Kernel& k : p_.kernels) {
      for (const sym::Expr& e : k.ranges) sym::free_symbols(e, used);
      for (const Loop& l : k.loops)
        for (const sym::Expr& e : l.ranges) sym::free_symbols(e, used);
      for (const Node& n : k.nodes) {
        for (const sym::Expr& e : n.index) sym::free_symbols(e, used);
        sym::free_symbols(n.bound, used);
      }
    }
    for (const std::string& name : used)
      if (index_variable(name).first == '\0' && !declared.count(name))
        report("shape symbol " + name + " is used but not declared (a `symbol` line)");
  }

  void check_buffers() {
    std::map<int, BufferId> input_at;
    for (size_t i = 0; i < p_.buffers.size(); ++i) {
      const Buffer& b = p_.buffers[i];
      if (b.id == -1) {
        report(bref(static_cast<BufferId>(i)) + " is never defined, but a later buffer id is: buffer ids must be dense (0..n-1)");
        continue;
      }
      if (b.id != static_cast<BufferId>(i)) {
        report("the buffer at position " + std::to_string(i) + " has id " + bref(b.id) + ": a buffer's id must be its position");
        continue;
      }
      std::string who = "buffer " + bref(b.id);
      if (b.sizes.size() != b.strides.size())
        report(who + " has " + std::to_string(b.sizes.size()) + " sizes but " + std::to_string(b.strides.size()) + " strides");
      for (const sym::Expr& e : b.sizes) check_shape_expr(e, who + "'s sizes");
      for (const sym::Expr& e : b.strides) check_shape_expr(e, who + "'s strides");
      check_shape_expr(b.offset, who + "'s offset");
      if (b.kind != Buffer::Kind::View && b.base != -1) report(who + " is not a view but names a base, " + bref(b.base));
      switch (b.kind) {
        case Buffer::Kind::Input:
          if (b.index < 0) {
            report(who + " is an input with no valid position (" + std::to_string(b.index) + ")");
          } else if (auto [it, fresh] = input_at.emplace(b.index, b.id); !fresh) {
            report(who + " and " + bref(it->second) + " are both graph input " + std::to_string(b.index));
          } else if (static_cast<size_t>(b.index) >= p_.inputs.size() || p_.inputs[b.index] != b.id) {
            report(who + " is graph input " + std::to_string(b.index) + ", but the program's inputs do not list it there");
          }
          break;
        case Buffer::Kind::Output:
          if (b.index >= 0 && (static_cast<size_t>(b.index) >= p_.outputs.size() || p_.outputs[b.index] != b.id))
            report(who + " says it is output " + std::to_string(b.index) + ", but the program does not return it there");
          else if (std::find(p_.outputs.begin(), p_.outputs.end(), b.id) == p_.outputs.end())
            report(who + " is an output buffer, but the program never returns it");
          break;
        case Buffer::Kind::Temp:
        case Buffer::Kind::Extern:
          if (b.index != -1) report(who + " has a position (" + std::to_string(b.index) + "); only inputs and outputs do");
          break;
        case Buffer::Kind::View:
          if (b.index != -1) report(who + " has a position (" + std::to_string(b.index) + "); only inputs and outputs do");
          if (b.base == b.id)
            report(who + " is a view of itself");
          else if (!valid_buffer(b.base))
            report(who + " is a view of " + bref(b.base) + ", which is not a buffer");
          else if (root(b.id) < 0)
            report(who + " is a view in a cycle of views");
          break;
      }
    }
    for (size_t k = 0; k < p_.inputs.size(); ++k) {
      BufferId id = p_.inputs[k];
      if (!valid_buffer(id) || p_.buffers[id].kind != Buffer::Kind::Input || p_.buffers[id].index != static_cast<int>(k))
        report("graph input " + std::to_string(k) + " is " + bref(id) + ", which is not an input buffer with that position");
    }
  }

  void check_steps() {
    std::vector<int> kernel_uses(p_.kernels.size(), 0), extern_uses(p_.externs.size(), 0);
    for (const Step& s : p_.steps) {
      switch (s.kind) {
        case Step::Kind::Kernel:
          if (!valid_kernel(s.index))
            report("a step runs kernel " + std::to_string(s.index) + ", which does not exist");
          else
            ++kernel_uses[s.index];
          break;
        case Step::Kind::Extern:
          if (!valid_extern(s.index))
            report("a step runs extern call " + std::to_string(s.index) + ", which does not exist");
          else
            ++extern_uses[s.index];
          break;
      }
    }
    std::set<std::string> names;
    for (size_t k = 0; k < p_.kernels.size(); ++k) {
      const std::string& name = p_.kernels[k].name;
      if (kernel_uses[k] != 1)
        report("kernel @" + name + " runs in " + std::to_string(kernel_uses[k]) + " steps; every kernel runs exactly once");
      if (name.empty()) report("kernel " + std::to_string(k) + " has no name");
      if (!names.insert(name).second) report("two kernels are named @" + name);
    }
    for (size_t k = 0; k < p_.externs.size(); ++k)
      if (extern_uses[k] != 1)
        report("extern call " + std::to_string(k) + " (\"" + p_.externs[k].callable + "\") runs in " +
               std::to_string(extern_uses[k]) + " steps; every extern call runs exactly once");
  }

  // ---- Groups (loop_ir/group.h): named once, members are consecutive steps, in no other group, and
  // obey the group rule.
  void check_groups() {
    const bool sound = messages_.empty();  // the rule reads buffers and views: only when they are valid
    std::set<std::string> names;
    std::set<int> grouped;
    std::vector<int> step_of(p_.kernels.size(), -1);
    for (size_t s = 0; s < p_.steps.size(); ++s)
      if (p_.steps[s].kind == Step::Kind::Kernel && valid_kernel(p_.steps[s].index))
        step_of[p_.steps[s].index] = static_cast<int>(s);
    for (const Group& g : p_.groups) {
      const std::string who = "group @" + g.name;
      if (g.name.empty() || !names.insert(g.name).second) report(who + ": no name, or a name two groups have");
      bool valid = true;
      for (size_t m = 0; m < g.kernels.size(); ++m) {
        const int k = g.kernels[m];
        if (!valid_kernel(k) || step_of[k] < 0) {
          report(who + ": member " + std::to_string(k) + " is not a kernel any step runs");
          valid = false;
          continue;
        }
        if (!grouped.insert(k).second) report(who + ": @" + p_.kernels[k].name + " is in two groups");
        if (m > 0 && valid_kernel(g.kernels[m - 1]) && step_of[g.kernels[m - 1]] >= 0 &&
            step_of[k] != step_of[g.kernels[m - 1]] + 1)
          report(who + ": @" + p_.kernels[k].name + " does not run right after the member before it");
      }
      if (!valid || !sound) continue;
      const std::string refusal = group_refusal(p_, g.kernels);
      if (!refusal.empty()) report(who + ": " + refusal);
    }
  }

  // ---- Extern calls.
  void check_extern(const ExternCall& call, int step) {
    std::string who = "extern call \"" + call.callable + "\"";
    if (call.callable.empty()) report("an extern call has no callable");
    std::vector<BufferId> args = call.buffer_args();
    if (call.mutates_first_arg && args.empty()) report(who + " mutates its first buffer argument, but has none");
    for (size_t i = 0; i < args.size(); ++i) {
      if (!valid_buffer(args[i])) {
        report(who + " takes " + bref(args[i]) + ", which is not a buffer");
        continue;
      }
      BufferId r = root(args[i]);
      if (r < 0) continue;
      reads_.push_back({r, step, who});
    }
    for (BufferId w : call.written_args())
      if (valid_buffer(w) && root(w) >= 0) writes_.push_back({root(w), step, who});
    switch (call.result_form) {
      case ir::Node::ResultForm::Single:
        if (call.results.size() != 1) report(who + " returns a single tensor but binds " + std::to_string(call.results.size()) + " buffers");
        break;
      case ir::Node::ResultForm::None:
        if (!call.results.empty()) report(who + " returns nothing but binds " + std::to_string(call.results.size()) + " buffers");
        break;
      case ir::Node::ResultForm::Tuple:
      case ir::Node::ResultForm::List:
        break;
    }
    for (BufferId r : call.results) {
      if (!valid_buffer(r)) {
        report(who + " binds " + bref(r) + ", which is not a buffer");
      } else if (p_.buffers[r].kind != Buffer::Kind::Extern) {
        report(who + " binds " + bref(r) + ", which is not an extern buffer (only extern calls define those)");
      } else if (auto [it, fresh] = extern_def_.emplace(r, step); !fresh) {
        report(bref(r) + " is bound by more than one extern call; an extern buffer has exactly one");
      }
    }
  }

  // ---- Kernels.
  // Whether node `def` is usable from loop `loop`: the same loop (a reduction is not: its value
  // exists only after its loop), a reduction of an earlier loop, or a node of an earlier loop
  // without ranges. Reports why not.
  bool visible(const Kernel& k, const Node& def, int loop, const std::string& who, const std::string& what) {
    bool reduce = op_info(def.op).cls == OpClass::Reduce;
    if (def.loop == loop && !reduce) return true;
    if (def.loop == loop) {
      report(who + " uses the reduction " + tref(def.id) + what + " inside its own loop; its value exists only after the loop ends");
      return false;
    }
    if (def.loop > loop) {
      report(who + " uses " + tref(def.id) + what + ", which is in a later loop");
      return false;
    }
    bool once = def.loop >= 0 && static_cast<size_t>(def.loop) < k.loops.size() && k.loops[def.loop].ranges.empty();
    if (!reduce && !once) {
      report(who + " uses " + tref(def.id) + what + " of an earlier loop that has ranges; only reductions and nodes of loops without ranges are visible to later loops");
      return false;
    }
    return true;
  }

  void check_index_expr(const Kernel& k, const Node& n, const sym::Expr& e, const std::string& who) {
    std::set<std::string> names;
    sym::free_symbols(e, names);
    for (const std::string& name : names) {
      auto [letter, number] = index_variable(name);
      if (letter == '\0') continue;
      if (number < 0) {
        report(who + " uses " + name + ", which is not a canonical index variable name");
        continue;
      }
      size_t loop_rank = n.loop >= 0 && static_cast<size_t>(n.loop) < k.loops.size() ? k.loops[n.loop].ranges.size() : 0;
      if (letter == 'i' && static_cast<size_t>(number) >= k.ranges.size()) {
        report(who + " uses " + name + ", but the kernel has " + std::to_string(k.ranges.size()) + " outer variables");
      } else if (letter == 'r' && static_cast<size_t>(number) >= loop_rank) {
        report(who + " uses " + name + ", but its loop has " + std::to_string(loop_rank) + " variables");
      } else if (letter == 't') {
        if (number >= n.id) {
          report(who + " uses " + name + ", the value of a node that is not defined before it");
          continue;
        }
        const Node& def = k.nodes[number];
        if (def.op == ScalarOp::Store) {
          report(who + " uses " + name + ", but that node is a store, which has no value");
        } else if (!ir::is_integral(def.dtype)) {
          report(who + " uses " + name + " as an index, but %" + name + " is " + ir::dtype_name(def.dtype) + ", not an integer");
        } else {
          visible(k, def, n.loop, who, " (as the index variable " + name + ")");
        }
      }
    }
  }

  void check_access(const Kernel& k, const Node& n, const std::string& who, int step) {
    for (const sym::Expr& e : n.index) check_index_expr(k, n, e, who);
    if (!valid_buffer(n.buffer)) {
      report(who + " names " + bref(n.buffer) + ", which is not a buffer");
      return;
    }
    const Buffer& b = p_.buffers[n.buffer];
    if (n.index.size() != b.sizes.size())
      report(who + " indexes " + bref(b.id) + " with " + std::to_string(n.index.size()) + " expressions, but it has " +
             std::to_string(b.sizes.size()) + " dimensions");
    BufferId r = root(n.buffer);
    if (r < 0) return;
    (n.op == ScalarOp::Store ? writes_ : reads_).push_back({r, step, "kernel @" + k.name});
  }

  // An accumulating store: a sum over the kernel's points in any order, into a buffer that nothing
  // else in the kernel touches, of a dtype that adds exactly in registers (not a f16/bf16 rounding).
  void check_accumulation(const Kernel& k, const Node& n, const std::string& who) {
    const DType d = p_.buffers[n.buffer].dtype;
    if (d == DType::Float16 || d == DType::BFloat16 || d == DType::Bool)
      report(who + " accumulates into " + std::string(ir::dtype_name(d)) + " buffer " + bref(n.buffer) +
             "; sums accumulate in f32 or an integer dtype");
    const BufferId r = root(n.buffer);
    for (const Node& o : k.nodes)
      if (o.id != n.id && (o.op == ScalarOp::Load || o.op == ScalarOp::Store) && valid_buffer(o.buffer) && root(o.buffer) == r) {
        report(who + " accumulates into " + bref(n.buffer) + ", which " + tref(o.id) + " of the same kernel also " +
               (o.op == ScalarOp::Load ? "reads" : "writes"));
        return;
      }
  }

  void check_kernel(const Kernel& k, int step) {
    std::string kname = "kernel @" + k.name;
    for (const sym::Expr& e : k.ranges) check_shape_expr(e, kname + "'s ranges");
    for (size_t l = 0; l < k.loops.size(); ++l)
      for (const sym::Expr& e : k.loops[l].ranges) check_shape_expr(e, kname + "'s loop " + std::to_string(l) + " ranges");
    for (size_t i = 0; i < k.nodes.size(); ++i) {
      if (k.nodes[i].id != static_cast<NodeId>(i)) {
        report(kname + ": the node at position " + std::to_string(i) + " has id " + tref(k.nodes[i].id) +
               ": a node's id must be its position (a store's included)");
        return;  // every other check looks nodes up by id
      }
    }
    int last_loop = 0;
    for (const Node& n : k.nodes) {
      std::string who = kname + ": " + (n.op == ScalarOp::Store ? "the store " + tref(n.id) : tref(n.id));
      if (n.loop < 0 || static_cast<size_t>(n.loop) >= k.loops.size()) {
        report(who + " is in loop " + std::to_string(n.loop) + ", but the kernel has " + std::to_string(k.loops.size()) + " loops");
        continue;
      }
      if (n.loop < last_loop) report(who + " is in loop " + std::to_string(n.loop) + " after a node of loop " + std::to_string(last_loop) + "; nodes are in loop order");
      last_loop = std::max(last_loop, n.loop);
      check_node(k, n, who, step);
    }
  }

  void check_node(const Kernel& k, const Node& n, const std::string& who, int step) {
    const ScalarOpInfo& info = op_info(n.op);
    if (n.accumulate && n.op != ScalarOp::Store) report(who + " (" + info.name + ") is marked accumulating; only a store may be");
    bool arity_ok = n.op == ScalarOp::Load ? n.operands.size() <= 1 : n.operands.size() == static_cast<size_t>(info.arity);
    if (!arity_ok) {
      report(who + " (" + info.name + ") has " + std::to_string(n.operands.size()) + " operands; it takes " +
             (n.op == ScalarOp::Load ? "none, or a mask" : std::to_string(info.arity)));
      return;
    }
    std::vector<DType> operand_dtypes;
    bool operands_ok = true;
    for (NodeId o : n.operands) {
      if (o < 0 || o >= n.id) {
        report(who + " uses " + tref(o) + ", which is not defined before it");
        operands_ok = false;
      } else if (k.nodes[o].op == ScalarOp::Store) {
        report(who + " uses " + tref(o) + ", a store, which has no value");
        operands_ok = false;
      } else {
        if (!visible(k, k.nodes[o], n.loop, who, "")) operands_ok = false;
        operand_dtypes.push_back(k.nodes[o].dtype);
      }
    }
    auto half = [](DType d) { return d == DType::Float16 || d == DType::BFloat16; };
    const bool rounding = n.op == ScalarOp::Cast && operand_dtypes.size() == 1 && operand_dtypes[0] == DType::Float32;
    if (half(n.dtype) && !rounding)
      report(who + " computes in " + ir::dtype_name(n.dtype) + "; kernel bodies compute float16 and bfloat16 in f32");
    for (DType o : operand_dtypes)
      if (half(o) && !(n.op == ScalarOp::Cast && n.dtype == DType::Float32))
        report(who + " reads a " + ir::dtype_name(o) + " rounding; only a cast to f32 may");
    auto dt = [](DType d) { return std::string(ir::dtype_name(d)); };

    switch (info.cls) {
      case OpClass::Leaf:
        if (n.op == ScalarOp::Load) {
          check_access(k, n, who, step);
          if (valid_buffer(n.buffer)) {
            DType want = compute_dtype(p_.buffers[n.buffer].dtype);
            if (n.dtype != want)
              report(who + " loads " + dt(p_.buffers[n.buffer].dtype) + " from " + bref(n.buffer) + " as " + dt(n.dtype) + "; it yields " + dt(want));
          }
          if (operands_ok && !operand_dtypes.empty()) {
            if (operand_dtypes[0] != DType::Bool) report(who + "'s mask " + tref(n.operands[0]) + " is " + dt(operand_dtypes[0]) + ", not b8");
            if (!scalar_fits(n.constant, n.dtype)) report(who + "'s value where masked is not a literal of dtype " + dt(n.dtype));
          }
        } else if (n.op == ScalarOp::Constant) {
          if (!scalar_fits(n.constant, n.dtype)) report(who + " is not a literal of dtype " + dt(n.dtype));
        } else if (n.op == ScalarOp::Index) {
          if (n.index.size() != 1) report(who + " (index) has " + std::to_string(n.index.size()) + " expressions; it takes one");
          for (const sym::Expr& e : n.index) check_index_expr(k, n, e, who);
          if (n.dtype != DType::Int64) report(who + " (index) is " + dt(n.dtype) + "; index values are i64");
        }
        return;
      case OpClass::Effect:
        check_access(k, n, who, step);
        if (operands_ok && valid_buffer(n.buffer)) {
          DType want = compute_dtype(p_.buffers[n.buffer].dtype);
          if (operand_dtypes[0] != want)
            report(who + " stores " + dt(operand_dtypes[0]) + " into " + dt(p_.buffers[n.buffer].dtype) + " buffer " +
                   bref(n.buffer) + "; it takes " + dt(want));
          if (n.dtype != operand_dtypes[0]) report(who + " has dtype " + dt(n.dtype) + ", not its operand's " + dt(operand_dtypes[0]));
          if (n.accumulate) check_accumulation(k, n, who);
        }
        return;
      case OpClass::Unary:
      case OpClass::Binary:
      case OpClass::Compare:
      case OpClass::Ternary:
      case OpClass::Reduce:
        break;
    }
    if (n.op == ScalarOp::CheckIndex) check_index_expr(k, n, n.bound, who);
    if (!operands_ok) return;

    // Value operands: where's condition is b8, the rest share one dtype.
    std::vector<DType> values = operand_dtypes;
    if (n.op == ScalarOp::Where) {
      if (values[0] != DType::Bool) report(who + "'s condition " + tref(n.operands[0]) + " is " + dt(values[0]) + ", not b8");
      values.erase(values.begin());
    }
    for (size_t i = 1; i < values.size(); ++i)
      if (values[i] != values[0]) {
        report(who + "'s operands have different dtypes (" + dt(values[0]) + " and " + dt(values[i]) + "); lowering inserts casts");
        return;
      }
    DType operand = values[0];
    if (info.cls == OpClass::Compare) {
      if (n.dtype != DType::Bool) report(who + " (" + info.name + ") is " + dt(n.dtype) + "; comparisons and logical ops yield b8");
    } else if (n.op == ScalarOp::PhiloxRand) {
      if (n.dtype != DType::Float32 || operand != DType::Int64)
        report(who + " (philox_rand) is " + dt(n.dtype) + " of " + dt(operand) + " operands; it is f32 of i64 seed and counter");
    } else if (n.op != ScalarOp::Cast && n.dtype != operand) {
      report(who + " (" + info.name + ") is " + dt(n.dtype) + " but its operands are " + dt(operand));
    }
    switch (domain(n.op)) {
      case Domain::Any: break;
      case Domain::Float:
        if (!ir::is_floating_point(operand)) report(who + " (" + info.name + ") needs a floating-point operand, not " + dt(operand));
        break;
      case Domain::IntegerOrBool:
        if (!ir::is_integral(operand) && operand != DType::Bool)
          report(who + " (" + info.name + ") needs an integer or b8 operand, not " + dt(operand));
        break;
    }
    if (n.op == ScalarOp::CheckIndex && !ir::is_integral(operand)) report(who + " (check_index) checks " + dt(operand) + ", not an integer");
  }

  // ---- Buffers across steps.
  struct Access {
    BufferId root;
    int step;
    std::string who;
  };

  void check_data_flow() {
    std::map<BufferId, int> first_write;
    for (const Access& w : writes_) {
      auto [it, fresh] = first_write.emplace(w.root, w.step);
      if (!fresh) it->second = std::min(it->second, w.step);
    }
    std::set<BufferId> reported;
    for (const Access& a : reads_) {
      const Buffer& b = p_.buffers[a.root];
      switch (b.kind) {
        case Buffer::Kind::Input:
          break;
        case Buffer::Kind::Extern: {
          auto def = extern_def_.find(a.root);
          if ((def == extern_def_.end() || def->second >= a.step) && reported.insert(a.root).second)
            report(a.who + " uses " + bref(a.root) + " before an extern call defines it");
          break;
        }
        case Buffer::Kind::Temp:
        case Buffer::Kind::Output: {
          auto w = first_write.find(a.root);
          if ((w == first_write.end() || w->second > a.step) && reported.insert(a.root).second)
            report(a.who + " reads " + bref(a.root) + " before anything writes it");
          break;
        }
        case Buffer::Kind::View:
          break;  // roots are never views
      }
    }
    for (const Access& w : writes_)
      if (p_.buffers[w.root].kind == Buffer::Kind::Extern) {
        auto def = extern_def_.find(w.root);
        if ((def == extern_def_.end() || def->second > w.step) && reported.insert(w.root).second)
          report(w.who + " writes " + bref(w.root) + " before an extern call defines it");
      }
    for (const Buffer& b : p_.buffers)
      if (b.kind == Buffer::Kind::Output && valid_buffer(b.id) && !first_write.count(b.id))
        report("output buffer " + bref(b.id) + " is never written");
  }

  void check_outputs() {
    for (size_t k = 0; k < p_.outputs.size(); ++k) {
      BufferId id = p_.outputs[k];
      if (!valid_buffer(id)) {
        report("the program returns " + bref(id) + ", which is not a buffer");
        continue;
      }
      BufferId r = root(id);
      if (r >= 0 && p_.buffers[r].kind == Buffer::Kind::Temp)
        report("the program returns " + bref(id) + ", which lives in the per-call arena (a temp buffer)");
      if (r >= 0 && p_.buffers[r].kind == Buffer::Kind::Extern && !extern_def_.count(r))
        report("the program returns " + bref(id) + ", which no extern call defines");
    }
  }

  const Program& p_;
  std::vector<std::string> messages_;
  std::map<BufferId, int> extern_def_;  // extern buffer -> the step that defines it
  std::vector<Access> reads_, writes_;
};

}  // namespace

std::vector<std::string> verify(const Program& program) { return Verifier(program).run(); }

}  // namespace ember::loop_ir
