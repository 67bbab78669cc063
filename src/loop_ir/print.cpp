// The loop IR printer: the text form of loop_ir.h and docs/loop-ir.md, which parse.cpp reads back
// to an equal program.
//
// Steps print in execution order, each kernel or extern call where it runs; a kernel or extern
// call that no step names is not printed (verify() reports it). Names are ids (`%b3`, `%t7`,
// `@k0`) and nothing is iterated in pointer order, so the text depends only on the program.
// Members of a group print inside it (loop_ir/group.h); a member printed out of its group's order
// is what verify() reports. Literals and extern arguments use the graph IR's spelling (ir/text_form.h). A malformed node
// (say, a missing operand) still prints, as well as the text form can say it, so that a verifier
// message can be read next to it.
#include <map>

#include "ir/text_form.h"
#include "loop_ir/loop_ir.h"

namespace ember::loop_ir {

namespace {

std::string join(const std::vector<sym::Expr>& xs) {
  std::string out;
  for (size_t i = 0; i < xs.size(); ++i) out += (i ? ", " : "") + xs[i].str();
  return out;
}

// `[i0 < 4, i1 < s0]`; nothing when there are no ranges.
std::string ranges(const std::vector<sym::Expr>& extents, char var) {
  if (extents.empty()) return "";
  std::string out = " [";
  for (size_t k = 0; k < extents.size(); ++k)
    out += (k ? ", " : "") + std::string(1, var) + std::to_string(k) + " < " + extents[k].str();
  return out + "]";
}

struct ScalarPrinter {
  std::string operator()(bool b) const { return b ? "true" : "false"; }
  std::string operator()(int64_t i) const { return std::to_string(i); }
  std::string operator()(double d) const { return ir::format_float(d); }
};

std::string scalar(const Scalar& s) { return std::visit(ScalarPrinter{}, s); }
std::string node_ref(NodeId id) { return "%t" + std::to_string(id); }
std::string buffer_ref(BufferId id) { return "%b" + std::to_string(id); }

std::string access(const Node& node) { return buffer_ref(node.buffer) + "[" + join(node.index) + "]"; }

std::string operands(const Node& node) {
  std::string out;
  for (size_t i = 0; i < node.operands.size(); ++i) out += (i ? ", " : "") + node_ref(node.operands[i]);
  return out;
}

std::string print_node(const Node& node) {
  const std::string type = " : " + std::string(ir::dtype_name(node.dtype));
  const std::string def = node_ref(node.id) + " = ";
  // Ops with attributes have their own syntax; every other op is `name operands`.
  if (node.op == ScalarOp::Load) {
    std::string out = def + "load " + access(node);
    if (!node.operands.empty()) out += " if " + operands(node) + " else " + scalar(node.constant);
    return out + type;
  }
  if (node.op == ScalarOp::Constant) return def + "constant " + scalar(node.constant) + type;
  if (node.op == ScalarOp::Index) return def + "index " + join(node.index) + type;
  if (node.op == ScalarOp::CheckIndex) return def + "check_index " + operands(node) + " < " + node.bound.str() + type;
  if (node.op == ScalarOp::Store) return "store " + access(node) + (node.accumulate ? " += " : " = ") + operands(node);
  return def + op_info(node.op).name + " " + operands(node) + type;
}

std::string print_kernel(const Kernel& kernel, const std::string& indent) {
  std::string out = indent + "kernel @" + kernel.name + ranges(kernel.ranges, 'i') + " {\n";
  auto open = [&](int loop) {
    if (loop >= 0 && static_cast<size_t>(loop) < kernel.loops.size())
      out += indent + "  loop" + ranges(kernel.loops[loop].ranges, 'r') + " {\n";
    else
      out += indent + "  loop {  // loop index " + std::to_string(loop) + " is out of range\n";
  };
  auto close = [&] { out += indent + "  }\n"; };
  // Loops print in order with their nodes; an empty loop still prints (it has ranges).
  int current = -1;
  for (const Node& node : kernel.nodes) {
    if (node.loop != current) {
      if (current != -1) close();
      for (int l = current + 1; l < node.loop && static_cast<size_t>(l) < kernel.loops.size(); ++l) {
        open(l);
        close();
      }
      open(node.loop);
      current = node.loop;
    }
    out += indent + "    " + print_node(node) + "\n";
  }
  if (current != -1) close();
  for (size_t l = static_cast<size_t>(current + 1); l < kernel.loops.size(); ++l) {
    open(static_cast<int>(l));
    close();
  }
  return out + indent + "}\n";
}

std::string print_buffer(const Buffer& b) {
  std::string out = "buffer " + buffer_ref(b.id) + " : " + ir::dtype_name(b.dtype) + "[" + join(b.sizes) + "]{" +
                    join(b.strides) + "}";
  if (b.device != ir::Device{}) out += " " + b.device.str();
  switch (b.kind) {
    case Buffer::Kind::Input: out += " input " + std::to_string(b.index); break;
    case Buffer::Kind::Output: out += b.index >= 0 ? " output " + std::to_string(b.index) : " output"; break;
    case Buffer::Kind::Temp: out += " temp"; break;
    case Buffer::Kind::Extern: out += " extern"; break;
    case Buffer::Kind::View: return out + " view " + buffer_ref(b.base) + " + " + b.offset.str();
  }
  if (b.offset != sym::Expr(0)) out += " offset " + b.offset.str();
  return out;
}

std::string print_extern(const ExternCall& call) {
  std::string out = "extern (";
  for (size_t i = 0; i < call.results.size(); ++i) out += (i ? ", " : "") + buffer_ref(call.results[i]);
  out += ") = " + ir::quote(call.callable) + "(";
  bool first = true;
  for (const ir::Arg& a : call.args) {
    out += (first ? "" : ", ") + ir::print_arg(a, "%b");
    first = false;
  }
  for (const auto& [name, a] : call.kwargs) {
    out += (first ? "" : ", ") + name + "=" + ir::print_arg(a, "%b");
    first = false;
  }
  out += ")";
  // The result form is implied by the result count when it is the usual one (one result: a
  // single tensor; none: nothing returned); otherwise it is spelled out.
  switch (call.result_form) {
    case ir::Node::ResultForm::Single: out += call.results.size() == 1 ? "" : " single"; break;
    case ir::Node::ResultForm::None: out += call.results.empty() ? "" : " none"; break;
    case ir::Node::ResultForm::Tuple: out += " tuple"; break;
    case ir::Node::ResultForm::List: out += " list"; break;
  }
  if (call.mutates_first_arg) out += " mutates";
  return out;
}

}  // namespace

std::string print(const Kernel& kernel) { return print_kernel(kernel, ""); }

std::string print(const Program& program) {
  std::string name = ir::is_identifier(program.name) ? program.name : ir::quote(program.name);
  std::string out = "program @" + name + " {\n";
  for (const sym::SymbolInfo& s : program.symbols) out += "  " + sym::print_symbol(s) + "\n";
  for (const Buffer& b : program.buffers) out += "  " + print_buffer(b) + "\n";
  // Group members print inside `group @g { ... }`, opened at the first and closed after the last.
  std::map<int, std::pair<const Group*, size_t>> member_of;  // kernel -> its group, its position there
  for (const Group& g : program.groups)
    for (size_t m = 0; m < g.kernels.size(); ++m) member_of.emplace(g.kernels[m], std::make_pair(&g, m));
  for (const Step& step : program.steps) {
    switch (step.kind) {
      case Step::Kind::Kernel:
        if (step.index >= 0 && static_cast<size_t>(step.index) < program.kernels.size()) {
          auto group = member_of.find(step.index);
          if (group == member_of.end()) {
            out += print_kernel(program.kernels[step.index], "  ");
            break;
          }
          const auto [g, position] = group->second;
          if (position == 0) out += "  group @" + g->name + " {\n";
          out += print_kernel(program.kernels[step.index], "    ");
          if (position + 1 == g->kernels.size()) out += "  }\n";
        } else
          out += "  // step: kernel " + std::to_string(step.index) + " does not exist\n";
        break;
      case Step::Kind::Extern:
        if (step.index >= 0 && static_cast<size_t>(step.index) < program.externs.size())
          out += "  " + print_extern(program.externs[step.index]) + "\n";
        else
          out += "  // step: extern call " + std::to_string(step.index) + " does not exist\n";
        break;
    }
  }
  out += "  return (";
  for (size_t i = 0; i < program.outputs.size(); ++i) out += (i ? ", " : "") + buffer_ref(program.outputs[i]);
  return out + ")\n}\n";
}

}  // namespace ember::loop_ir
