// ember-opt: reads IR text, verifies it, runs the named passes in order, prints the result.
// The driver of Ember's golden tests (tests/golden), and the quickest way to watch one pass work.
//
//   ember-opt [--loop] [--verify] [--pass NAME]... [--list-passes] [--lower] [--schedule [--max-nodes N]] [--plan]
//             [--emit-cpp] FILE|-
//
// The input is graph IR, or loop IR with --loop (then --pass names loop passes). The input is
// always verified: passes may assume valid IR. --verify also verifies after every pass, blaming
// the pass that broke the IR. --lower lowers the graph (after its passes) to loop IR. On loop IR
// (read with --loop, or lowered), --schedule runs the scheduler (its decisions print first, as
// `// fusion: ...` lines) and --plan the memory planner (its plan prints after the program, as
// `// memory: ...` lines), and --emit-cpp prints the generated C++ instead of the loop IR (with
// the memory planner's plan; --emit-cpp alone reads loop IR). Exit status: 0 success; 1 the input does not parse or verify, a pass
// failed, or the file cannot be read; 2 bad command line.
//
// Each IR is one `Stage` below (how to parse, verify and print it, and its pass list); a tool
// mode that turns one IR into another (lowering, say) is a function from one stage's IR to the
// next's, run between the two stages' passes.
#include <cerrno>
#include <cstring>
#include <functional>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "ir/graph.h"
#include "loop_ir/loop_ir.h"
#include "loop_ir/passes.h"
#include "codegen/cpp/cpp_codegen.h"
#include "lowering/lowering.h"
#include "memory/memory_plan.h"
#include "passes/passes.h"
#include "scheduler/scheduler.h"

namespace {

constexpr const char* kUsage =
    "usage: ember-opt [--loop] [--verify] [--pass NAME]... [--list-passes] [--lower] [--schedule [--max-nodes N]] "
    "[--plan] [--emit-cpp] FILE|-\n";

struct Options {
  bool loop_input = false;
  bool verify_each = false;
  bool list_passes = false;
  bool lower = false;
  std::vector<std::string> passes;
  std::string path;
  bool schedule = false;  // loop IR only
  bool plan = false;      // loop IR only
  bool emit_cpp = false;  // loop IR only: the generated C++ is printed instead of the loop IR
  ember::scheduler::ScheduleOptions schedule_options;
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

// Prints a loop program, scheduled (--schedule) and with its memory plan (--plan) if asked.
int print_program(ember::loop_ir::Program& program, const Options& options, const std::string& shown) {
  std::string before, after;
  try {
    if (options.schedule)
      for (const auto& d : ember::scheduler::schedule(program, options.schedule_options)) before += "// fusion: " + d.str() + "\n";
    if (options.plan) {
      std::istringstream lines(ember::memory::plan_memory(program).str());
      for (std::string line; std::getline(lines, line);) after += "// memory: " + line + "\n";
    }
  } catch (const std::exception& e) {
    std::cerr << shown << ": error: " << (options.plan && !options.schedule ? "plan" : "schedule") << " failed: " << e.what() << "\n";
    return 1;
  }
  if (!options.emit_cpp) {
    std::cout << before << ember::loop_ir::print(program) << after;
    return 0;
  }
  try {
    std::cout << before << ember::codegen::emit_cpp(program, ember::memory::plan_memory(program), ember::codegen::CppOptions{}).text;
  } catch (const std::exception& e) {
    std::cerr << shown << ": error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

// Parses, verifies, runs the passes, prints (or hands the result to `next`, the next stage).
// Returns the exit status.
template <typename IR, typename PassInfo, typename ParseError>
int run_stage(const Stage<IR, PassInfo>& stage, const Options& options, const std::string& text,
              const std::function<int(const IR&, const std::string& shown)>& next = nullptr) {
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
  if (next) return next(ir, shown);
  if constexpr (std::is_same_v<IR, ember::loop_ir::Program>) {
    return print_program(ir, options, shown);
  } else {
    std::cout << stage.print(ir);
    return 0;
  }
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
    } else if (arg == "--lower") {
      options.lower = true;
    } else if (arg == "--pass" || arg.rfind("--pass=", 0) == 0) {
      if (arg == "--pass" && i + 1 >= argc) return usage_error("--pass needs a pass name");
      options.passes.push_back(arg == "--pass" ? argv[++i] : arg.substr(7));
    } else if (arg == "--schedule") {
      options.schedule = true;
    } else if (arg == "--plan") {
      options.plan = true;
    } else if (arg == "--emit-cpp") {
      options.emit_cpp = true;
    } else if (arg == "--max-nodes") {
      if (i + 1 >= argc) return usage_error("--max-nodes needs a number");
      try {
        options.schedule_options.max_nodes = std::stoi(argv[++i]);
      } catch (const std::exception&) {
        return usage_error(std::string("--max-nodes needs a number, not '") + argv[i] + "'");
      }
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
  if (options.emit_cpp && !options.lower) options.loop_input = true;
  if ((options.schedule || options.plan) && !options.loop_input && !options.lower)
    return usage_error("--schedule and --plan need loop IR: --loop or --lower");
  if (options.lower && options.loop_input) return usage_error("--lower takes graph IR, not --loop");

  std::string text;
  if (!read_input(options.path, text)) {
    std::cerr << "ember-opt: cannot read " << options.path << ": " << std::strerror(errno) << "\n";
    return 1;
  }
  if (options.loop_input) return run_stage<ember::loop_ir::Program, ember::loop_ir::LoopPassInfo, ember::loop_ir::ParseError>(kLoopStage, options, text);
  // --lower: graph IR -> loop IR (lowering verifies the program it returns).
  auto lower_and_print = [&options](const ember::ir::Graph& graph, const std::string& shown) {
    ember::loop_ir::Program program;
    try {
      program = ember::lowering::lower(graph);
    } catch (const std::exception& e) {
      std::cerr << shown << ": error: lowering failed: " << e.what() << "\n";
      return 1;
    }
    return print_program(program, options, shown);
  };
  using GraphNext = std::function<int(const ember::ir::Graph&, const std::string&)>;
  return run_stage<ember::ir::Graph, ember::passes::PassInfo, ember::ir::ParseError>(
      kGraphStage, options, text, options.lower ? GraphNext(lower_and_print) : GraphNext());
}
