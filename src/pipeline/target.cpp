#include "pipeline/target.h"

namespace ember::pipeline {

std::string Target::str() const {
  switch (kind) {
    case Kind::Cpu: return "cpu";
    case Kind::Triton: return "triton";
  }
  return "?";
}

std::optional<Target> target_for(const ir::Device& device, std::string* reason) {
  if (device.type == "cpu") return Target::cpu();
  *reason = "a graph value lives on " + device.str() + ": only the CPU backend exists";
  return std::nullopt;
}

}  // namespace ember::pipeline
