#include "pipeline/target.h"

namespace ember::pipeline {

std::string Target::str() const {
  switch (kind) {
    case Kind::Cpu: return "cpu";
    case Kind::Triton: return "triton";
  }
  return "?";
}

namespace {

Target triton_target(const ir::Device& device, Mode mode) {
  Target t = Target::gpu(device);
  switch (mode) {
    case Mode::Default:
    case Mode::ReduceOverhead:
    // max-autotune's tuner (8 candidates, coordinate descent) crashed the process
    // in its first run on the H200 (a segfault at the first tuned call, and in reading a choice from
    // the disk cache there) and is switched off until that is found: max-autotune generates the
    // default kernels. The mode's warning says so (python/ember/api.py).
    case Mode::MaxAutotune: break;
  }
  return t;
}

}  // namespace

std::optional<Target> target_for(const ir::Device& device, bool triton_on_cpu, Mode mode, std::string* reason) {
  if (device.type == "cpu") return triton_on_cpu ? triton_target(device, mode) : Target::cpu();
  if (device.type == "cuda") return triton_target(device, mode);
  *reason = "a graph value lives on " + device.str() + ": Ember generates code for cpu and cuda only";
  return std::nullopt;
}

}  // namespace ember::pipeline
