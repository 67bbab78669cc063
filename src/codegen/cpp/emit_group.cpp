// A grouped kernel's function (loop_ir/group.h): the members' common body, emitted once by
// emit_kernel over a symbolic extent, and a driver that walks a table of the members' pointers and
// element counts in one parallel region.
//
// The driver cuts all the members' elements, laid end to end, into parts of about
// CppOptions::parallel_threshold elements (at most kMaxParts), split across threads by OpenMP's
// static schedule, so each thread gets about the same number of elements however the sizes are
// spread (a 256-element LayerNorm weight and a 768x256 matrix alike). A part that ends inside a
// member ends at a multiple of kMaxVectorLanes elements of that member (both parts compute the
// same cut), so the body's vector loops start aligned to the member as the member's own kernel
// would, and only a member's last piece has a tail. Each element runs the same statements as in
// the member's own kernel: the same values, bit for bit.
#include "codegen/cpp/emit_internal.h"
#include "loop_ir/group.h"

namespace ember::codegen::detail {

namespace {
// Parts beyond this many cost more in scanning the table than they gain in balance.
constexpr int64_t kMaxParts = 1024;
}  // namespace

GroupCode emit_group(const Program& program, const loop_ir::Group& group, const CppOptions& options, bool restrict_ok) {
  const Kernel& first = program.kernels.at(group.kernels.front());
  Program body_program;
  body_program.name = "group";
  const std::optional<std::vector<bool>> streams = loop_ir::group_streams(program, group.kernels);
  const std::vector<bool>* view = streams ? &*streams : nullptr;
  const Kernel body = loop_ir::group_body(program, first, view, "group_n", body_program);
  CppOptions serial = options;
  serial.openmp = false;  // the driver's region is the only one
  KernelCode code = emit_kernel(body_program, body, serial, restrict_ok, nullptr);
  const std::string body_name = std::string(kFunctionPlaceholder) + "_body";
  for (size_t at = 0; (at = code.text.find(kFunctionPlaceholder, at)) != std::string::npos; at += body_name.size())
    code.text.replace(at, std::string(kFunctionPlaceholder).size(), body_name);

  const loop_ir::GroupMember member = *loop_ir::group_member(program, first, nullptr, view);
  const size_t width = code.params.size();
  std::string call = body_name + "(";
  for (size_t p = 0; p < width; ++p) {
    const loop_ir::Buffer& b = body_program.buffers.at(code.params[p].buffer);
    const std::string type = std::string(code.params[p].written ? "" : "const ") + storage_type(b.dtype) + "*";
    const bool stream = member.streams.at(static_cast<size_t>(code.params[p].buffer));
    call += "static_cast<" + type + ">(ptrs[m * " + std::to_string(width) + " + " + std::to_string(p) + "])" +
            (stream ? " + a" : "") + ", ";
  }
  call += "b - a);";

  GroupCode out;
  out.width = width;
  out.pointer_type = "void (*)(void* const*, const int64_t*, int64_t)";
  const std::string lanes = std::to_string(kMaxVectorLanes);
  const std::string part = std::to_string(std::max<int64_t>(options.parallel_threshold, kMaxVectorLanes));
  out.text = code.text + "\n";
  out.text += "// group: members of the body above, one parallel region over all their elements\n";
  out.text += "//   table: " + std::to_string(width) + " pointers per member (streams at its element 0, scalars "
              "where they read), then its element count\n";
  out.text += std::string("extern \"C\" void ") + kFunctionPlaceholder +
              "(void* const* ptrs, const int64_t* sizes, const int64_t count) {\n";
  out.text += "  int64_t total = 0;\n";
  out.text += "  for (int64_t m = 0; m < count; ++m) total += sizes[m];\n";
  out.text += "  const int64_t parts = std::max<int64_t>(1, std::min<int64_t>(total / " + part + ", " +
              std::to_string(kMaxParts) + "));\n";
  out.text += "  // A member's piece ends at a multiple of " + lanes + " of its elements, or at its end.\n";
  out.text += "  auto cut = [](int64_t x, int64_t n) -> int64_t { return x <= 0 ? 0 : x >= n ? n : x - x % " + lanes +
              "; };\n";
  if (options.openmp) out.text += "  #pragma omp parallel for schedule(static) if(parts > 1)\n";
  out.text += "  for (int64_t part = 0; part < parts; ++part) {\n";
  out.text += "    const int64_t lo = total * part / parts, hi = total * (part + 1) / parts;\n";
  out.text += "    int64_t start = 0;\n";
  out.text += "    for (int64_t m = 0; m < count && start < hi; start += sizes[m++]) {\n";
  out.text += "      const int64_t a = cut(lo - start, sizes[m]), b = cut(hi - start, sizes[m]);\n";
  out.text += "      if (a < b) " + call + "\n";
  out.text += "    }\n  }\n}\n";
  return out;
}

}  // namespace ember::codegen::detail
