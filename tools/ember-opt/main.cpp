// ember-opt: reads graph IR text, verifies it, runs the named passes in order, prints the result.
// The driver of Ember's golden tests (tests/golden), and the quickest way to watch one pass work.
//
//   ember-opt [--verify] [--pass NAME]... [--lower] [--list-passes] FILE|-
//
// The input is always verified: passes may assume a valid graph. --verify also verifies after
// every pass, blaming the pass that broke the graph. --lower lowers the result to loop IR
// (src/lowering) and prints that instead. Exit status: 0 success; 1 the input does not
// parse or verify, a pass failed, or the file cannot be read; 2 bad command line.
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "loop_ir/loop_ir.h"
#include "lowering/lowering.h"
#include "passes/passes.h"

namespace {

constexpr const char* kUsage = "usage: ember-opt [--verify] [--pass NAME]... [--lower] [--list-passes] FILE|-\n";

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

// Prints the verifier's messages; true if there were none.
bool report_verify(const ember::ir::Graph& graph, const std::string& path, const std::string& after) {
  std::vector<std::string> problems = ember::ir::verify(graph);
  for (const std::string& p : problems) std::cerr << path << ": error: " << after << p << "\n";
  return problems.empty();
}

}  // namespace

int main(int argc, char** argv) {
  bool verify_each = false;
  bool lower = false;
  std::vector<const ember::passes::PassInfo*> passes;
  std::string path;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--verify") {
      verify_each = true;
    } else if (arg == "--lower") {
      lower = true;
    } else if (arg == "--pass" || arg.rfind("--pass=", 0) == 0) {
      std::string name;
      if (arg == "--pass") {
        if (i + 1 >= argc) return usage_error("--pass needs a pass name");
        name = argv[++i];
      } else {
        name = arg.substr(7);
      }
      const ember::passes::PassInfo* pass = ember::passes::find_pass(name);
      if (!pass) {
        std::string known;
        for (const auto& p : ember::passes::registered_passes()) known += std::string(known.empty() ? "" : ", ") + p.name;
        return usage_error("unknown pass '" + name + "' (known: " + known + ")");
      }
      passes.push_back(pass);
    } else if (arg == "--list-passes") {
      for (const auto& p : ember::passes::registered_passes()) std::cout << p.name << "\t" << p.summary << "\n";
      return 0;
    } else if (arg == "-h" || arg == "--help") {
      std::cout << kUsage;
      return 0;
    } else if (arg.size() > 1 && arg[0] == '-') {
      return usage_error("unknown option '" + arg + "'");
    } else if (!path.empty()) {
      return usage_error("one input file only (got '" + path + "' and '" + arg + "')");
    } else {
      path = arg;
    }
  }
  if (path.empty()) return usage_error("no input file (use - for standard input)");

  std::string text;
  if (!read_input(path, text)) {
    std::cerr << "ember-opt: cannot read " << path << ": " << std::strerror(errno) << "\n";
    return 1;
  }
  const std::string shown = path == "-" ? "<stdin>" : path;

  ember::ir::Graph graph;
  try {
    graph = ember::ir::parse(text);
  } catch (const ember::ir::ParseError& e) {
    std::string what = e.what();  // "line:column: message"
    size_t sep = what.find(": ");
    std::cerr << shown << ":" << what.substr(0, sep) << ": error: " << what.substr(sep + 2) << "\n";
    return 1;
  }
  if (!report_verify(graph, shown, "")) return 1;

  for (const ember::passes::PassInfo* pass : passes) {
    try {
      pass->run(graph);
    } catch (const std::exception& e) {
      std::cerr << shown << ": error: pass " << pass->name << " failed: " << e.what() << "\n";
      return 1;
    }
    if (verify_each && !report_verify(graph, shown, std::string("after pass ") + pass->name + ": ")) return 1;
  }
  if (lower) {
    try {
      std::cout << ember::loop_ir::print(ember::lowering::lower(graph));
    } catch (const std::exception& e) {
      std::cerr << shown << ": error: lowering failed: " << e.what() << "\n";
      return 1;
    }
    return 0;
  }
  std::cout << ember::ir::print(graph);
  return 0;
}
