// emit_cpp: the C++ of one program — a buffer table, one extern "C" function per distinct kernel
// text (emit_kernel.cpp prints a kernel without buffer ids or its name, so kernels identical up to
// their buffers hash alike and share one), and the entry that runs the steps in order, calling the
// functions through its table argument (cpp_codegen.h).
//
// Where buffers live (the ABI in include/ember/runtime.h): Input, Output and Extern buffers are
// read from ctx->buffers by id; a Temp is ctx->arena + its planned offset; a View is its base's
// element 0 plus its own offset (in elements of the view's dtype). Kernels receive typed element-0
// pointers and add Σ index·stride themselves, with the strides folded in as constants.
//
// A program with shape symbols (dynamic shapes): the entry reads their values from ctx->sym into
// locals named like the symbols and passes each kernel those it uses, so sizes, strides and view
// offsets are expressions over them. Its memory is planned per call on the concrete sizes
// (memory_plan.h), so a Temp's address comes from ctx->buffers like an Input's (the runtime
// writes arena + offset there).
#include <algorithm>
#include <map>
#include <set>
#include <unordered_set>

#include "codegen/cpp/emit_internal.h"
#include "loop_ir/group.h"
#include "support/sha256.h"

namespace ember::codegen {

namespace {

using namespace detail;

// Elements from element 0 to one past the last element the strides can reach (0 if empty).
int64_t span_elements(const Buffer& b) {
  int64_t span = 1;
  for (size_t d = 0; d < b.sizes.size(); ++d) {
    const int64_t size = constant_of(b.sizes[d], "size " + std::to_string(d) + " of %" + b.name());
    const int64_t stride = constant_of(b.strides[d], "stride " + std::to_string(d) + " of %" + b.name());
    if (size == 0) return 0;
    if (stride < 0) throw CodegenError("%" + b.name() + " has a negative stride");
    span += (size - 1) * stride;
  }
  return span;
}

const char* kind_name(Buffer::Kind kind) {
  switch (kind) {
    case Buffer::Kind::Input: return "input";
    case Buffer::Kind::Output: return "output";
    case Buffer::Kind::Temp: return "temp";
    case Buffer::Kind::Extern: return "extern";
    case Buffer::Kind::View: return "view";
  }
  return "?";
}

// Where a buffer's element 0 is: a root pointer expression plus a constant byte offset.
struct Place {
  std::string root;          // "ctx->buffers[3]" (a void*) or "ctx->arena" (a char*)
  BufferId root_buffer = -1; // the buffer that owns the memory (views followed)
  sym::Expr bytes = 0;       // constant unless a view's offset is symbolic
};

class ProgramEmitter {
 public:
  ProgramEmitter(const Program& p, const memory::MemoryPlan& plan, const CppOptions& o)
      : program_(p), plan_(plan), options_(o), symbolic_(!p.symbols.empty()) {
    symbols_.program = &p;
  }

  CppSource emit() {
    check_buffers();
    CppSource src;
    // The vector header comes first: the compiler driver precompiles it, and GCC uses a
    // precompiled header only when its include is the first token of the file.
    src.prelude = "#include <ember/vec.h>\n\n#include <algorithm>\n#include <cstdint>\n#include <limits>\n\n"
                  "#include <ember/runtime.h>\n\nnamespace ev = ember::vec;\n\n";

    // Each kernel once per distinct canonical text; `uses[k]` is program kernel k's function.
    std::vector<detail::KernelCode> kernels(program_.kernels.size());
    std::vector<size_t> uses(program_.kernels.size());
    std::vector<std::vector<std::string>> sites(program_.kernels.size());
    std::map<std::string, size_t> by_name;
    std::vector<size_t> first_use;  // per function: the program kernel it was first emitted for
    // Grouped kernels (loop_ir/group.h): one function per group, registered at its first member.
    std::map<size_t, const loop_ir::Group*> group_at;  // first member -> its group
    std::set<size_t> grouped;
    for (const loop_ir::Group& g : program_.groups) {
      group_at[static_cast<size_t>(g.kernels.front())] = &g;
      for (int k : g.kernels) grouped.insert(static_cast<size_t>(k));
    }
    for (const loop_ir::Step& step : program_.steps) {
      if (step.kind != loop_ir::Step::Kind::Kernel) continue;
      const size_t index = static_cast<size_t>(step.index);
      const Kernel& k = program_.kernels.at(index);
      if (grouped.count(index) && !group_at.count(index)) continue;
      if (group_at.count(index)) {
        const loop_ir::Group& g = *group_at.at(index);
        bool restrict_all = true;
        for (int member : g.kernels) restrict_all = restrict_all && restrict_ok(kernel_params(program_.kernels.at(member)));
        GroupCode code = emit_group(program_, g, options_, restrict_all);
        kernels[index].text = code.text;
        kernels[index].pointer_type = code.pointer_type;
        group_width_[index] = code.width;
      }
      if (!group_at.count(index)) {
        std::vector<KernelParam> params = kernel_params(k);
        kernels[index] = emit_kernel(program_, k, options_, restrict_ok(params), &sites[index]);
      }
      CppKernel fn = canonical_kernel(kernels[index]);
      auto [at, fresh] = by_name.emplace(fn.name, src.kernels.size());
      if (fresh) {
        src.kernels.push_back(std::move(fn));
        first_use.push_back(index);
      } else if (src.kernels[at->second].text != fn.text) {
        throw CodegenError("kernels " + src.kernels[at->second].instances.front() + " and " + k.name +
                           " differ but their text hashes to the same name " + fn.name);
      }
      src.kernels[at->second].instances.push_back(k.name);
      uses[index] = at->second;
    }

    std::string entry = "extern \"C\" int " + src.entry + "(ember_ctx* ctx, void* const* kernels) {\n";
    for (size_t k = 0; k < program_.symbols.size(); ++k)
      entry += "  const int64_t " + program_.symbols[k].name + " = ctx->sym[" + std::to_string(k) + "];\n";
    for (size_t f = 0; f < src.kernels.size(); ++f) {
      const detail::KernelCode& code = kernels[first_use[f]];
      entry += "  const auto " + src.kernels[f].name + " = reinterpret_cast<" + code.pointer_type + ">(kernels[" +
               std::to_string(f) + "]);\n";
    }
    int number = 0;
    for (const loop_ir::Step& step : program_.steps) {
      const size_t index = static_cast<size_t>(step.index);
      entry += "  // step " + std::to_string(number++) + ": ";
      if (step.kind == loop_ir::Step::Kind::Extern) {
        const loop_ir::ExternCall& call = program_.externs.at(index);
        entry += "extern " + std::to_string(step.index) + " " + call.callable + extern_summary(call) + "\n";
        entry += "  if (ctx->call_extern(ctx, " + std::to_string(step.index) + ") != 0) return 1;\n";
        continue;
      }
      const Kernel& k = program_.kernels.at(index);
      const detail::KernelCode& code = kernels[index];
      if (group_at.count(index)) {
        entry += group_call(*group_at.at(index), src.kernels[uses[index]].name, group_width_.at(index));
        continue;
      }
      if (grouped.count(index)) {
        entry += "kernel " + k.name + ": in the group above\n";
        continue;
      }
      entry += "kernel " + k.name + "\n";
      std::string call = "  " + src.kernels[uses[index]].name + "(";
      for (size_t p = 0; p < code.params.size(); ++p)
        call += (p ? ", " : "") + typed_pointer(code.params[p].buffer);
      for (const std::string& name : code.symbols) call += (call.back() == '(' ? "" : ", ") + name;
      if (code.uses_ctx) call += std::string(call.back() == '(' ? "" : ", ") + "ctx";
      entry += call + ");\n";
      if (code.uses_ctx) {
        // The function numbers its check sites from 0; this call's start at `base` in the table.
        const size_t base = src.check_sites.size();
        entry += "  if (ctx->error != 0) {\n    ctx->error_site += " + std::to_string(base) + ";\n    return 1;\n  }\n";
      }
      for (const std::string& site : sites[index]) src.check_sites.push_back(site);
    }
    entry += "  return 0;\n}\n";

    std::string& out = src.text;
    out += "// Generated by Ember from loop IR program @" + program_.name + ". Do not edit.\n";
    out += "// Buffers (element 0 of each; kernels add index * stride with constant strides):\n";
    for (const Buffer& b : program_.buffers) out += "//   %" + b.name() + " " + describe(b) + "\n";
    out += src.prelude;
    for (const CppKernel& fn : src.kernels) out += fn.text + "\n";
    out += entry;
    src.entry_code = std::move(entry);
    return src;
  }

 private:
  // The function of `code`, named after the hash of its text (which names no buffer id and no
  // kernel: emit_kernel prints parameters by position and the name as a placeholder).
  static CppKernel canonical_kernel(const detail::KernelCode& code) {
    CppKernel fn;
    fn.name = "ember_k_" + sha256_hex(code.text).substr(0, 16);
    const std::string placeholder = kFunctionPlaceholder;
    fn.text = code.text;
    for (size_t at = 0; (at = fn.text.find(placeholder, at)) != std::string::npos; at += fn.name.size())
      fn.text.replace(at, placeholder.size(), fn.name);
    return fn;
  }

  // The call of a group's function: its table of pointers (each member's, at its base element)
  // and element counts, on the entry's stack.
  std::string group_call(const loop_ir::Group& g, const std::string& function, size_t width) const {
    const std::string name = g.name;
    std::string ptrs, sizes;
    const std::optional<std::vector<bool>> streams = loop_ir::group_streams(program_, g.kernels);
    for (int k : g.kernels) {
      const loop_ir::GroupMember m =
          *loop_ir::group_member(program_, program_.kernels.at(static_cast<size_t>(k)), nullptr, streams ? &*streams : nullptr);
      if (m.buffers.size() != width) throw CodegenError("group @" + name + ": members of another width");
      for (size_t p = 0; p < width; ++p) {
        const std::string at = m.bases[p] == 0 ? "" : " + " + std::to_string(m.bases[p]);
        ptrs += "      static_cast<void*>(" + typed_pointer(m.buffers[p]) + at + "),\n";
      }
      sizes += (sizes.empty() ? "" : ", ") + std::to_string(m.extent);
    }
    std::string out = "group @" + name + " (" + std::to_string(g.kernels.size()) + " kernels: @" +
                      program_.kernels.at(g.kernels.front()).name + " first)\n";
    out += "  {\n    void* const " + name + "_ptrs[] = {\n" + ptrs + "    };\n";
    out += "    static const int64_t " + name + "_sizes[] = {" + sizes + "};\n";
    out += "    " + function + "(" + name + "_ptrs, " + name + "_sizes, " + std::to_string(g.kernels.size()) + ");\n  }\n";
    return out;
  }

  void check_buffers() const {
    if (plan_.offsets.size() != program_.buffers.size())
      throw CodegenError("the memory plan has " + std::to_string(plan_.offsets.size()) + " offsets for " +
                         std::to_string(program_.buffers.size()) + " buffers");
    for (const Buffer& b : program_.buffers) {
      require_supported(b.dtype, "%" + b.name());
      for (const sym::Expr& e : b.sizes) hint_of(program_, e, "a size of %" + b.name());
      for (const sym::Expr& e : b.strides) hint_of(program_, e, "a stride of %" + b.name());
      hint_of(program_, b.offset, "the offset of %" + b.name());
      const int64_t span = symbolic_ ? 0 : span_elements(b);
      if (b.kind == Buffer::Kind::View) {
        if (b.base < 0 || static_cast<size_t>(b.base) >= program_.buffers.size() || b.base == b.id)
          throw CodegenError("view %" + b.name() + " has no valid base");
        continue;
      }
      if (b.offset != sym::Expr(0))
        throw CodegenError("%" + b.name() + " (" + kind_name(b.kind) + ") has offset " + b.offset.str() +
                           "; only views may start past element 0");
      if (b.kind != Buffer::Kind::Temp || symbolic_) continue;  // symbolic: placed per call
      const int64_t at = plan_.offsets[static_cast<size_t>(b.id)];
      const int64_t bytes = span * ir::dtype_itemsize(b.dtype);
      if (at < 0 || at % 64 != 0 || at + bytes > plan_.arena_bytes)
        throw CodegenError("the memory plan places temp %" + b.name() + " (" + std::to_string(bytes) +
                           " bytes) at " + std::to_string(at) + " in an arena of " +
                           std::to_string(plan_.arena_bytes) + " bytes");
    }
  }

  Place place(BufferId id, int depth = 0) const {
    const Buffer& b = program_.buffers.at(static_cast<size_t>(id));
    if (depth > static_cast<int>(program_.buffers.size())) throw CodegenError("views form a cycle at %" + b.name());
    switch (b.kind) {
      case Buffer::Kind::Input:
      case Buffer::Kind::Output:
      case Buffer::Kind::Extern: return Place{"ctx->buffers[" + std::to_string(id) + "]", id, 0};
      case Buffer::Kind::Temp:
        if (symbolic_) return Place{"ctx->buffers[" + std::to_string(id) + "]", id, 0};
        return Place{"ctx->arena", id, plan_.offsets[static_cast<size_t>(id)]};
      case Buffer::Kind::View: {
        Place p = place(b.base, depth + 1);
        p.bytes = p.bytes + b.offset * ir::dtype_itemsize(b.dtype);
        return p;
      }
    }
    throw CodegenError("unknown buffer kind");
  }

  std::string typed_pointer(BufferId id) const {
    const Buffer& b = program_.buffers.at(static_cast<size_t>(id));
    const Place p = place(id);
    const std::string t = storage_type(b.dtype);
    const std::string bytes = p.bytes.is_constant() ? std::to_string(p.bytes.constant()) : "(" + c_index(p.bytes, symbols_) + ")";
    if (p.root == "ctx->arena") return "reinterpret_cast<" + t + "*>(ctx->arena + " + bytes + ")";
    if (p.bytes == sym::Expr(0)) return "static_cast<" + t + "*>(" + p.root + ")";
    return "reinterpret_cast<" + t + "*>(static_cast<char*>(" + p.root + ") + " + bytes + ")";
  }

  std::string describe(const Buffer& b) const {
    std::string s = std::string(ir::dtype_name(b.dtype)) + "[";
    for (size_t d = 0; d < b.sizes.size(); ++d) s += (d ? ", " : "") + b.sizes[d].str();
    s += "]{";
    for (size_t d = 0; d < b.strides.size(); ++d) s += (d ? ", " : "") + b.strides[d].str();
    s += "} " + std::string(kind_name(b.kind));
    switch (b.kind) {
      case Buffer::Kind::Input: return s + " " + std::to_string(b.index) + ": ctx->buffers[" + std::to_string(b.id) + "]";
      case Buffer::Kind::Output:
      case Buffer::Kind::Extern: return s + ": ctx->buffers[" + std::to_string(b.id) + "]";
      case Buffer::Kind::Temp:
        if (symbolic_) return s + ": ctx->buffers[" + std::to_string(b.id) + "] (planned per call)";
        return s + ": arena + " + std::to_string(plan_.offsets[static_cast<size_t>(b.id)]);
      case Buffer::Kind::View: return s + " of %b" + std::to_string(b.base) + " + " + b.offset.str();
    }
    return s;
  }

  static std::string extern_summary(const loop_ir::ExternCall& call) {
    const std::vector<BufferId> ids = call.buffer_args();
    std::string s = "(";
    for (size_t k = 0; k < ids.size(); ++k) s += (k ? ", %b" : "%b") + std::to_string(ids[k]);
    s += ") -> (";
    for (size_t k = 0; k < call.results.size(); ++k) s += (k ? ", %b" : "%b") + std::to_string(call.results[k]);
    s += ")";
    const std::vector<BufferId> written = call.written_args();
    for (size_t k = 0; k < written.size(); ++k) s += (k ? ", %b" : " writes %b") + std::to_string(written[k]);
    return s;
  }

  // Buffers an extern may return an alias of: its arguments' memory.
  bool passed_to_extern(BufferId root) const {
    for (const loop_ir::ExternCall& call : program_.externs)
      for (BufferId id : call.buffer_args())
        if (place(id).root_buffer == root) return true;
    return false;
  }

  // Byte range [first, last) a buffer can touch, relative to its root (constant sizes only).
  std::pair<int64_t, int64_t> byte_range(BufferId id) const {
    const Buffer& b = program_.buffers.at(static_cast<size_t>(id));
    const int64_t first = place(id).bytes.constant();
    return {first, first + span_elements(b) * ir::dtype_itemsize(b.dtype)};
  }

  // __restrict on every pointer is sound when every written buffer's memory is known to be
  // reachable through no other parameter: it is an Output or a Temp (fresh memory, not the
  // caller's and not something an extern could have returned an alias of), and no other
  // parameter shares its memory. Inputs may alias each other (f(x, x)); extern results may alias
  // their arguments (x.contiguous() returns x).
  bool restrict_ok(const std::vector<KernelParam>& params) const {
    for (const KernelParam& w : params) {
      if (!w.written) continue;
      const Place pw = place(w.buffer);
      const Buffer& root = program_.buffers.at(static_cast<size_t>(pw.root_buffer));
      const bool temp = root.kind == Buffer::Kind::Temp;
      if (root.kind != Buffer::Kind::Output && !temp) return false;
      if (passed_to_extern(pw.root_buffer)) return false;
      for (const KernelParam& other : params) {
        if (other.buffer == w.buffer) continue;
        const Place po = place(other.buffer);
        const Buffer& other_root = program_.buffers.at(static_cast<size_t>(po.root_buffer));
        if (po.root_buffer == pw.root_buffer) return false;
        // A symbolic program's temporaries are placed per call by the same planner, whose live
        // ranges keep every two temporaries one step touches apart (memory_plan.h).
        if (temp && other_root.kind == Buffer::Kind::Temp && !symbolic_) {
          auto a = byte_range(w.buffer), b = byte_range(other.buffer);
          if (a.first < b.second && b.first < a.second) return false;  // the planner reused the space
        }
      }
    }
    return true;
  }

  const Program& program_;
  const memory::MemoryPlan& plan_;
  const CppOptions& options_;
  const bool symbolic_;  // has shape symbols: temporaries are placed per call
  std::map<size_t, size_t> group_width_;  // a group's first member -> pointers per member in its table
  IndexSymbols symbols_;
};

}  // namespace

CppSource emit_cpp(const loop_ir::Program& program, const memory::MemoryPlan& plan, const CppOptions& options) {
  return ProgramEmitter(program, plan, options).emit();
}

}  // namespace ember::codegen
