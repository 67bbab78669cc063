// ember-opt: reads IR text, verifies it, runs pipeline steps over it, prints the result. The driver
// of Ember's golden tests (tests/golden), and the quickest way to watch one step work.
//
//   ember-opt [--loop] [--verify] [--pass NAME]... | [--stop-after NAME] [--print-after NAME]...
//             [--max-nodes N] [--target cpu|triton|triton-max-autotune] [--exact-random] [--deterministic]
//             [--list-passes] FILE|-
//
// The input is graph IR, or loop IR with --loop; it is always verified (steps may assume valid IR).
// Every step is one of the pipeline's (src/pipeline/pipeline.h; --list-passes lists them in order):
//   --pass NAME        runs the named steps, in the order given (a golden test of one step);
//   --stop-after NAME  runs the pipeline as the compiler does, from the first step that reads the
//                      input's IR through NAME;
//   neither            parses, verifies and prints.
// --verify also verifies after every step, blaming the step that broke the IR. --print-after NAME
// prints the IR after that step (as `// after NAME:` and the IR) before the final result.
// --max-nodes sets the scheduler's fusion size cap of the target. --target picks what `emit`
// generates: C++ (cpu, the default) or Triton kernels (triton; triton-max-autotune: the Triton
// target of mode="max-autotune", whose candidate configs and matmul templates then print).
// --exact-random: the joint step gives dropout eager's numbers (native_dropout), as the option
// fallback_random does. --deterministic: lowering as under torch.use_deterministic_algorithms (no
// atomic adds on CUDA: lowering::LowerOptions). The result prints in the form of the last IR made:
// graph IR; loop IR (after the scheduler, its decisions first as `// fusion:` lines; after the
// memory planner, its plan last as `// memory:` lines); C++ or Triton after `emit`.
// Exit status: 0 success; 1 the input does not parse or verify, a step failed, or the file cannot
// be read; 2 bad command line.
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "pipeline/pipeline.h"

namespace {

namespace pipeline = ember::pipeline;

constexpr const char* kUsage =
    "usage: ember-opt [--loop] [--verify] [--pass NAME]... | [--stop-after NAME] [--print-after NAME]... "
    "[--max-nodes N] [--target cpu|triton|triton-max-autotune] [--exact-random] [--deterministic] [--list-passes] FILE|-\n";

struct Options {
  bool loop_input = false;
  bool list_passes = false;
  std::vector<std::string> passes;
  std::string path;
  pipeline::Instruments instruments;
  pipeline::Target target = pipeline::Target::cpu();
  bool exact_random = false;
  bool deterministic = false;
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

// "line:column: message" of a parse error -> "FILE:line:column: error: message".
void report_parse_error(const std::string& shown, const std::string& what) {
  size_t sep = what.find(": ");
  std::cerr << shown << ":" << what.substr(0, sep) << ": error: " << what.substr(sep + 2) << "\n";
}

// The input as a compilation, or nullopt after reporting why it does not parse or verify.
std::optional<pipeline::Compilation> read_compilation(const Options& options, const std::string& text,
                                                      const std::string& shown) {
  std::optional<pipeline::Compilation> c;
  try {
    if (options.loop_input) {
      c.emplace(ember::loop_ir::parse(text));
    } else {
      c.emplace(ember::ir::parse(text));
    }
  } catch (const ember::loop_ir::ParseError& e) {
    report_parse_error(shown, e.what());
    return std::nullopt;
  } catch (const ember::ir::ParseError& e) {
    report_parse_error(shown, e.what());
    return std::nullopt;
  }
  std::vector<std::string> problems = c->verify();
  for (const std::string& p : problems) std::cerr << shown << ": error: " << p << "\n";
  if (!problems.empty()) return std::nullopt;
  return c;
}

int parse_args(int argc, char** argv, Options& options) {
  auto value_of = [&](int& i, const std::string& arg, const char* flag, std::string& out) {
    std::string prefix = std::string(flag) + "=";
    if (arg.rfind(prefix, 0) == 0) {
      out = arg.substr(prefix.size());
      return true;
    }
    if (i + 1 >= argc) return false;
    out = argv[++i];
    return true;
  };
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    auto is = [&arg](const char* flag) { return arg == flag || arg.rfind(std::string(flag) + "=", 0) == 0; };
    if (arg == "--loop") {
      options.loop_input = true;
    } else if (arg == "--verify") {
      options.instruments.verify = true;
    } else if (arg == "--exact-random") {
      options.exact_random = true;
    } else if (arg == "--deterministic") {
      options.deterministic = true;
    } else if (arg == "--list-passes") {
      options.list_passes = true;
    } else if (is("--pass") || is("--stop-after") || is("--print-after") || is("--max-nodes") || is("--target")) {
      std::string flag = arg.substr(0, arg.find('='));
      if (!value_of(i, arg, flag.c_str(), value)) return usage_error(flag + " needs a value");
      if (flag == "--target") {
        if (value != "cpu" && value != "triton" && value != "triton-max-autotune")
          return usage_error("--target is cpu, triton or triton-max-autotune, not '" + value + "'");
        // The target's settings, not just its kind (the Triton target splits reductions and rounds
        // in registers); what --max-nodes set is kept.
        const int max_nodes = options.target.schedule.max_nodes;
        std::string why;
        options.target = value == "cpu"      ? pipeline::Target::cpu()
                         : value == "triton" ? pipeline::Target::gpu()
                                             : *pipeline::target_for(ember::ir::Device{"cuda", 0}, false, ember::Mode::MaxAutotune, &why);
        options.target.schedule.max_nodes = max_nodes;
        continue;
      }
      if (flag == "--max-nodes") {
        try {
          options.target.schedule.max_nodes = std::stoi(value);
        } catch (const std::exception&) {
          return usage_error("--max-nodes needs a number, not '" + value + "'");
        }
        continue;
      }
      if (!pipeline::find_step(value)) {
        std::string known;
        for (const pipeline::Step& s : pipeline::steps()) known += std::string(known.empty() ? "" : ", ") + s.name;
        return usage_error("unknown step '" + value + "' (known: " + known + ")");
      }
      if (flag == "--pass") options.passes.push_back(value);
      if (flag == "--stop-after") options.instruments.stop_after = value;
      if (flag == "--print-after") options.instruments.print_after.push_back(value);
    } else if (arg == "-h" || arg == "--help") {
      std::cout << kUsage;
      std::exit(0);
    } else if (arg.size() > 1 && arg[0] == '-') {
      return usage_error("unknown option '" + arg + "'");
    } else if (!options.path.empty()) {
      return usage_error("one input file only (got '" + options.path + "' and '" + arg + "')");
    } else {
      options.path = arg;
    }
  }
  options.target.deterministic = options.deterministic;  // after --target, which replaces the target
  if (!options.passes.empty() && !options.instruments.stop_after.empty())
    return usage_error("--pass and --stop-after do not combine: name the steps, or where the pipeline stops");
  if (!options.list_passes && options.path.empty()) return usage_error("no input file (use - for standard input)");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (int status = parse_args(argc, argv, options)) return status;
  if (options.list_passes) {
    for (const pipeline::Step& s : pipeline::steps())
      std::cout << s.name << "\t" << pipeline::ir_kind_name(s.reads) << "\t" << s.summary << "\n";
    return 0;
  }
  std::string text;
  if (!read_input(options.path, text)) {
    std::cerr << "ember-opt: cannot read " << options.path << ": " << std::strerror(errno) << "\n";
    return 1;
  }
  const std::string shown = options.path == "-" ? "<stdin>" : options.path;
  std::optional<pipeline::Compilation> c = read_compilation(options, text, shown);
  if (!c) return 1;
  c->joint_options.exact_random = options.exact_random;

  options.instruments.on_step = [](const pipeline::StepRecord& step) {
    if (!step.ir.empty()) std::cout << "// after " << step.name << ":\n" << step.ir;
  };
  try {
    if (options.passes.empty() && !options.instruments.stop_after.empty())
      pipeline::compile(*c, options.target, options.instruments);
    for (const std::string& name : options.passes)
      pipeline::run_step(*pipeline::find_step(name), *c, options.target, options.instruments);
  } catch (const pipeline::VerifyError& e) {
    std::cerr << shown << ": error: " << e.what() << "\n";
    return 1;
  } catch (const pipeline::StepError& e) {
    std::cerr << shown << ": error: step " << e.step << " failed: " << e.what() << "\n";
    return 1;
  }
  std::cout << c->print();
  return 0;
}
