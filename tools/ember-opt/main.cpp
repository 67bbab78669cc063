// ember-opt: reads IR text, verifies it, runs the named passes in order, prints the result.
// The driver of Ember's golden tests (tests/golden), and the quickest way to watch one pass work.
//
//   ember-opt [--loop] [--verify] [--pass NAME]... [--list-passes] [--emit-cpp] FILE|-
//
// The input is graph IR, or loop IR with --loop (then --pass names loop passes). The input is
// always verified: passes may assume valid IR. --verify also verifies after every pass, blaming
// the pass that broke the IR. Exit status: 0 success; 1 the input does not parse or verify, a pass
// failed, or the file cannot be read; 2 bad command line.
//
// Each IR is one `Stage` below (how to parse, verify and print it, and its pass list); a tool
// mode that turns one IR into another (lowering, say) is a function from one stage's IR to the
// next's, run between the two stages' passes.
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "codegen/cpp/cpp_codegen.h"
#include "loop_ir/loop_ir.h"
#include "loop_ir/passes.h"
#include "passes/passes.h"

namespace {

constexpr const char* kUsage =
    "usage: ember-opt [--loop] [--verify] [--pass NAME]... [--list-passes] [--emit-cpp] FILE|-\n";

struct Options {
  bool loop_input = false;
  bool verify_each = false;
  bool list_passes = false;
  bool emit_cpp = false;  // loop IR in, the generated C++ out (instead of the loop IR)
  std::vector<std::string> passes;
  std::string path;
};

int usage_error(const std::string& message) {
  std::cerr << "ember-opt: " << message << "\n" << kUsage;
  return 2;
}

bool read_input(const std::string& path, std::string& text) {
  std::ostringstream buf;
  if (path == "-") {
    buf << std::cin.rdbuf();
  } else {
    std::ifstream in(path, std::ios::binary);
    if (!in) return false;
    buf << in.rdbuf();
  }
  text = buf.str();
  return true;
}

// One IR as the tool sees it.
template <typename IR, typename PassInfo>
struct Stage {
  const char* name;
  IR (*parse)(std::string_view);
  std::string (*print)(const IR&);
  std::vector<std::string> (*verify)(const IR&);
  const std::vector<PassInfo>& (*registered)();
  const PassInfo* (*find)(std::string_view);
};

const Stage<ember::ir::Graph, ember::passes::PassInfo> kGraphStage = {
    "graph", ember::ir::parse, ember::ir::print, ember::ir::verify, ember::passes::registered_passes,
    ember::passes::find_pass};
const Stage<ember::loop_ir::Program, ember::loop_ir::LoopPassInfo> kLoopStage = {
    "loop", ember::loop_ir::parse, ember::loop_ir::print, ember::loop_ir::verify,
    ember::loop_ir::registered_loop_passes, ember::loop_ir::find_loop_pass};

// Prints the verifier's messages; true if there were none.
template <typename IR, typename PassInfo>
bool report_verify(const Stage<IR, PassInfo>& stage, const IR& ir, const std::string& shown, const std::string& after) {
  std::vector<std::string> problems = stage.verify(ir);
  for (const std::string& p : problems) std::cerr << shown << ": error: " << after << p << "\n";
  return problems.empty();
}

// Resolves pass names against the stage's list; false (after a usage message) on an unknown one.
template <typename IR, typename PassInfo>
bool resolve_passes(const Stage<IR, PassInfo>& stage, const Options& options, std::vector<const PassInfo*>& out) {
  for (const std::string& name : options.passes) {
    const PassInfo* pass = stage.find(name);
    if (!pass) {
      std::string known;
      for (const auto& p : stage.registered()) known += std::string(known.empty() ? "" : ", ") + p.name;
      usage_error("unknown " + std::string(stage.name) + " pass '" + name + "' (known: " + known + ")");
      return false;
    }
    out.push_back(pass);
  }
  return true;
}

// --emit-cpp: the C++ translation unit of a loop IR program, with a memory plan that gives every
// temporary its own slot (the memory planner's plan once the pipeline wires it).
std::string emit_cpp(const ember::loop_ir::Program& program) {
  return ember::codegen::emit_cpp(program, ember::codegen::unshared_plan(program), ember::codegen::CppOptions{}).text;
}

// Parses, verifies, runs the passes, prints (through `output` when given). Returns the exit status.
template <typename IR, typename PassInfo, typename ParseError>
int run_stage(const Stage<IR, PassInfo>& stage, const Options& options, const std::string& text,
              std::string (*output)(const IR&) = nullptr) {
  std::vector<const PassInfo*> passes;
  if (!resolve_passes(stage, options, passes)) return 2;
  const std::string shown = options.path == "-" ? "<stdin>" : options.path;
  IR ir;
  try {
    ir = stage.parse(text);
  } catch (const ParseError& e) {
    std::string what = e.what();  // "line:column: message"
    size_t sep = what.find(": ");
    std::cerr << shown << ":" << what.substr(0, sep) << ": error: " << what.substr(sep + 2) << "\n";
    return 1;
  }
  if (!report_verify(stage, ir, shown, "")) return 1;
  for (const PassInfo* pass : passes) {
    try {
      pass->run(ir);
    } catch (const std::exception& e) {
      std::cerr << shown << ": error: pass " << pass->name << " failed: " << e.what() << "\n";
      return 1;
    }
    if (options.verify_each && !report_verify(stage, ir, shown, std::string("after pass ") + pass->name + ": ")) return 1;
  }
  try {
    std::cout << (output ? output(ir) : stage.print(ir));
  } catch (const std::exception& e) {
    std::cerr << shown << ": error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

template <typename IR, typename PassInfo>
void list_passes(const Stage<IR, PassInfo>& stage) {
  for (const auto& p : stage.registered()) std::cout << p.name << "\t" << p.summary << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--loop") {
      options.loop_input = true;
    } else if (arg == "--verify") {
      options.verify_each = true;
    } else if (arg == "--pass" || arg.rfind("--pass=", 0) == 0) {
      if (arg == "--pass" && i + 1 >= argc) return usage_error("--pass needs a pass name");
      options.passes.push_back(arg == "--pass" ? argv[++i] : arg.substr(7));
    } else if (arg == "--emit-cpp") {
      options.emit_cpp = options.loop_input = true;
    } else if (arg == "--list-passes") {
      options.list_passes = true;
    } else if (arg == "-h" || arg == "--help") {
      std::cout << kUsage;
      return 0;
    } else if (arg.size() > 1 && arg[0] == '-') {
      return usage_error("unknown option '" + arg + "'");
    } else if (!options.path.empty()) {
      return usage_error("one input file only (got '" + options.path + "' and '" + arg + "')");
    } else {
      options.path = arg;
    }
  }
  if (options.list_passes) {
    options.loop_input ? list_passes(kLoopStage) : list_passes(kGraphStage);
    return 0;
  }
  if (options.path.empty()) return usage_error("no input file (use - for standard input)");

  std::string text;
  if (!read_input(options.path, text)) {
    std::cerr << "ember-opt: cannot read " << options.path << ": " << std::strerror(errno) << "\n";
    return 1;
  }
  if (options.loop_input)
    return run_stage<ember::loop_ir::Program, ember::loop_ir::LoopPassInfo, ember::loop_ir::ParseError>(
        kLoopStage, options, text, options.emit_cpp ? emit_cpp : nullptr);
  return run_stage<ember::ir::Graph, ember::passes::PassInfo, ember::ir::ParseError>(kGraphStage, options, text);
}
