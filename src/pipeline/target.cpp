#include "pipeline/target.h"

namespace ember::pipeline {

std::string Target::str() const {
  switch (kind) {
    case Kind::Cpu: return "cpu";
    case Kind::Triton: return "triton";
  }
  return "?";
}

std::optional<Target> target_for(const ir::Device& device, bool triton_on_cpu, std::string* reason) {
  if (device.type == "cpu") return triton_on_cpu ? Target::gpu(device) : Target::cpu();
  if (device.type == "cuda") return Target::gpu(device);
  *reason = "a graph value lives on " + device.str() + ": Ember generates code for cpu and cuda only";
  return std::nullopt;
}

}  // namespace ember::pipeline
