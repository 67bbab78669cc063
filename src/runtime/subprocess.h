// Runs a program and collects what it prints: the compiler driver's only way to start processes.
//
// Guarantees: no shell is involved (arguments are passed as they are, so paths with spaces or
// quotes are safe); stdout and stderr are collected together, whole; the child inherits the
// environment. posix_spawn rather than fork, so a large multi-threaded parent is not copied.
#pragma once

#include <string>
#include <vector>

namespace ember::runtime {

struct ProcessResult {
  bool started = false;  // false: the program could not be run; `output` says why
  int exit_status = -1;  // exit code, or 128 + signal number if a signal killed it
  std::string output;    // stdout and stderr, interleaved as written
};

// argv[0] is looked up on PATH when it has no '/'.
ProcessResult run_process(const std::vector<std::string>& argv);

// The arguments as a shell would need them typed (for error messages a user can paste).
std::string shell_quote(const std::vector<std::string>& argv);

}  // namespace ember::runtime
