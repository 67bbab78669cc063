// AliasGuard (trace.h): the identity checks between the frame's tensors, lists and dicts that a trace
// relied on, checked after the GuardSet on every call and listed with the guards.
#include <map>
#include <unordered_map>

#include "frontend/interp/trace.h"

namespace ember::frontend {

std::string AliasGuard::describe() const {
  std::string out;
  std::map<int, size_t> first;  // ordered: the text is deterministic
  for (size_t i = 0; i < entries.size(); ++i) {
    auto [at, inserted] = first.emplace(entries[i].object, i);
    if (!inserted) out += entries[i].source->str() + " is " + entries[at->second].source->str() + "\n";
  }
  for (auto& [object, i] : first) {
    if (!entries[i].mutated) continue;
    for (auto& [other, j] : first)
      if (other != object) out += entries[i].source->str() + " is not " + entries[j].source->str() + "\n";
  }
  return out;
}

bool AliasGuard::holds(const FrameView& frame, std::string* why) const {
  if (entries.empty()) return true;
  std::vector<PyRef> objects;
  objects.reserve(entries.size());
  for (const Entry& e : entries) {
    objects.push_back(PyRef::steal(resolve(*e.source, frame)));
    if (!objects.back()) {
      PyErr_Clear();
      if (why) *why = "cannot read " + e.source->str() + " (identity check)";
      return false;
    }
  }
  // The first entry of each object stands for it; mutated objects are looked up by identity.
  std::unordered_map<int, size_t> first;
  std::unordered_map<PyObject*, size_t> mutated;
  for (size_t i = 0; i < entries.size(); ++i) {
    auto [at, inserted] = first.emplace(entries[i].object, i);
    if (!inserted && objects[i].get() != objects[at->second].get()) {
      if (why) *why = entries[i].source->str() + " is " + entries[at->second].source->str();
      return false;
    }
    if (inserted && entries[i].mutated) mutated.emplace(objects[i].get(), i);
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    auto hit = mutated.find(objects[i].get());
    if (hit != mutated.end() && entries[hit->second].object != entries[i].object) {
      if (why) *why = entries[i].source->str() + " is not " + entries[hit->second].source->str();
      return false;
    }
  }
  return true;
}

}  // namespace ember::frontend
