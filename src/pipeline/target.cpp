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
  if (searches_configs(mode)) {
    t.triton.max_configs = kMaxAutotuneConfigs;
    t.coordinate_descent = true;
    // The template-or-extern choice is timed on a device: the interpreter keeps the extern.
    t.triton.matmul_templates = device.type == "cuda";
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
