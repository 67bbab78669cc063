// Tiled transposes: a pointwise kernel that stores contiguously along its last outer variable C but
// loads some buffer with a constant stride along C and contiguously along the variable before it, R
// (MLP-Mixer's and ConvNeXt's residual adds `x + y.transpose(...)`, a transposing copy), ran as a
// scalar loop: no vector along C could load that buffer, and along R the store would be strided.
// Here the kernel runs kSize x kSize tiles of (R, C): each transposed buffer is loaded as kSize
// vectors along R (one per column), transposed in registers (ev::transpose), and row a of the tile
// is then the vector along C at R + a that the rest of the body computes with as usual.
//
// Shape of the code, per point of the outer variables before R:
//   for (rt < ER / kSize) for (ct < EC / kSize) {
//     tile_t5[j] = load(column C = ct*kSize + j, rows from R = rt*kSize); ev::transpose(tile_t5);
//     for (a < kSize) { R = rt*kSize + a; C = ct*kSize; <body; the transposed load is tile_t5[a]> }
//   }
//   if (m = ER % kSize) for (ct < EC / kSize) { <the same over the last m rows: masked loads of m lanes> }
//   if (EC % kSize) for (R < ER) { <the masked tail of columns past the last whole vector> }
// The tail loads the strided buffers lane by lane (NodeEnv::strided_lanes), so its results are the
// same elements. Column vectors start at multiples of kSize, so chunk_contiguous loads stay valid.
#include "codegen/cpp/emit_internal.h"

namespace ember::codegen::detail {

namespace {

// More transposed buffers than this would spill the tiles' registers (16 vectors each).
constexpr size_t kMaxTiledLoads = 4;

bool is_tiled_load(const NodeEnv& env, const Node& n, const std::string& col) {
  if (n.op != ScalarOp::Load) return false;
  const std::optional<int64_t> c =
      linear_coefficient(element_offset(env.program->buffers.at(n.buffer), n.index), col);
  return c && *c != 0 && *c != 1;
}

}  // namespace

std::string tile_refusal(const NodeEnv& env) {
  const Kernel& k = *env.kernel;
  const size_t rank = k.ranges.size();
  if (rank < 2) return "one outer variable";
  const std::string row = "i" + std::to_string(rank - 2), col = "i" + std::to_string(rank - 1);
  if (!k.ranges[rank - 1].is_constant() || !k.ranges[rank - 2].is_constant()) return "symbolic extents";
  size_t tiled = 0;
  for (const Node& n : k.nodes) {
    if (n.op != ScalarOp::Load && n.op != ScalarOp::Store) continue;
    const Buffer& b = env.program->buffers.at(n.buffer);
    const sym::Expr offset = element_offset(b, n.index);
    const std::optional<int64_t> c = linear_coefficient(offset, col);
    if (n.op == ScalarOp::Store) {
      if (n.accumulate) return "%t" + std::to_string(n.id) + " adds into its buffer";
      if (c != std::optional<int64_t>(1) && !(!c && chunk_contiguous(offset, col)))
        return "%t" + std::to_string(n.id) + " stores with a stride along " + col;
      continue;
    }
    if (!is_tiled_load(env, n, col)) continue;
    if (b.dtype != DType::Float32) return "%t" + std::to_string(n.id) + " loads a transposed non-f32 buffer";
    if (linear_coefficient(offset, row) != std::optional<int64_t>(1))
      return "%t" + std::to_string(n.id) + " is not contiguous along " + row;
    ++tiled;
  }
  if (tiled == 0) return "no transposed load";
  if (tiled > kMaxTiledLoads) return std::to_string(tiled) + " transposed loads";
  return "";
}

void emit_tiled_points(NodeEnv& env, const std::string& pragma, int depth, std::string& out) {
  const Kernel& k = *env.kernel;
  const size_t rank = k.ranges.size();
  const std::string row = "i" + std::to_string(rank - 2), col = "i" + std::to_string(rank - 1);
  const std::string er = std::to_string(k.ranges[rank - 2].constant());
  const std::string ec = std::to_string(k.ranges[rank - 1].constant());
  const std::string ks = "ev::VecF::kSize";
  auto line = [&](int d, const std::string& text) { out += std::string(2 * static_cast<size_t>(d), ' ') + text + "\n"; };
  const std::function<bool(NodeId)> inside = [](NodeId) { return true; };
  auto tile = [](const Node& n) { return "tile_t" + std::to_string(n.id); };

  // One tile's body at `d`: rows from `first_row` (`rows` of them: kSize, or the masked count `m`),
  // the kSize columns from ct * kSize. Each transposed buffer loads one vector along R per column.
  auto tile_body = [&](int d, const std::string& first_row, const std::string& rows) {
    const std::string count = rows == ks ? "" : ", " + rows;
    for (const Node& n : k.nodes) {
      if (!is_tiled_load(env, n, col)) continue;
      line(d, "ev::VecF " + tile(n) + "[" + ks + "];");
      line(d, "for (int j = 0; j < " + ks + "; ++j) {");
      line(d + 1, "const int64_t " + row + " = " + first_row + ", " + col + " = ct * " + ks + " + j;");
      line(d + 1, tile(n) + "[j] = ev::VecF::load(" + env.buffer_name(n.buffer) + " + " +
                      c_index(element_offset(env.program->buffers.at(n.buffer), n.index), env.symbols) + count + ");");
      line(d, "}");
      line(d, "ev::transpose(" + tile(n) + ");");
    }
    line(d, "for (int a = 0; a < " + rows + "; ++a) {");
    line(d + 1, "const int64_t " + row + " = " + first_row + " + a, " + col + " = ct * " + ks + ";");
    for (const Node& n : k.nodes) {
      if (is_tiled_load(env, n, col)) {
        line(d + 1, "const ev::VecF t" + std::to_string(n.id) + " = " + tile(n) + "[a];");
      } else {
        emit_vector_node(env, n, col, Mode::Vector, inside, std::string(2 * static_cast<size_t>(d + 1), ' '), out);
      }
    }
    line(d, "}");
  };

  // Whole tiles.
  if (!pragma.empty()) line(depth, pragma);
  line(depth, "for (int64_t rt = 0; rt < " + er + " / " + ks + "; ++rt) {");
  line(depth + 1, "for (int64_t ct = 0; ct < " + ec + " / " + ks + "; ++ct) {");
  tile_body(depth + 2, "rt * " + ks, ks);
  line(depth + 1, "}");
  line(depth, "}");

  // The last rows (fewer than kSize) in tiles too: each column vector loads only their lanes, so a
  // 3x3 convolution weight's [C_out, 3, 3, C_in] relayout (rows: its 3 or 9 positions) runs in
  // tiles instead of lane by lane.
  line(depth, "if (" + er + " % " + ks + " != 0) {");
  line(depth + 1, "const int m = static_cast<int>(" + er + " % " + ks + ");");
  line(depth + 1, "for (int64_t ct = 0; ct < " + ec + " / " + ks + "; ++ct) {");
  tile_body(depth + 2, er + " - m", "m");
  line(depth + 1, "}");
  line(depth, "}");

  // The columns past the last whole vector, row by row: a masked tail that loads the strided
  // buffers lane by lane.
  line(depth, "if (" + ec + " % " + ks + " != 0) {");
  line(depth + 1, "for (int64_t " + row + " = 0; " + row + " < " + er + "; ++" + row + ") {");
  line(depth + 2, "const int64_t " + col + " = " + ec + " - " + ec + " % " + ks + ";");
  line(depth + 2, "const int n = static_cast<int>(" + ec + " % " + ks + ");");
  for (const Node& n : k.nodes)
    emit_vector_node(env, n, col, Mode::VectorTail, inside, std::string(2 * static_cast<size_t>(depth + 2), ' '), out);
  line(depth + 1, "}");
  line(depth, "}");
}

}  // namespace ember::codegen::detail
