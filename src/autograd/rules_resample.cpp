// Derivative rule of F.interpolate (rules.h): aten's upsample backward for the mode and rank, called
// with the output size, input size and scales the forward's aten kernel used, so the gradient is
// eager's to the bit (the kernels map each output element to its source with those scales).
#include <map>
#include <string>

#include "autograd/rules.h"

namespace ember::autograd::rules {

namespace {

// aten's backward op for a mode and a number of spatial dims, and whether it takes align_corners.
struct UpsampleBackward {
  const char* op;
  bool align_corners;
};

const UpsampleBackward* upsample_backward(const std::string& mode, size_t spatial) {
  static const std::map<std::pair<std::string, size_t>, UpsampleBackward> kOps = {
      {{"nearest", 1}, {"torch.ops.aten.upsample_nearest1d_backward", false}},
      {{"nearest", 2}, {"torch.ops.aten.upsample_nearest2d_backward", false}},
      {{"nearest", 3}, {"torch.ops.aten.upsample_nearest3d_backward", false}},
      {{"nearest-exact", 1}, {"torch.ops.aten._upsample_nearest_exact1d_backward", false}},
      {{"nearest-exact", 2}, {"torch.ops.aten._upsample_nearest_exact2d_backward", false}},
      {{"nearest-exact", 3}, {"torch.ops.aten._upsample_nearest_exact3d_backward", false}},
      {{"linear", 1}, {"torch.ops.aten.upsample_linear1d_backward", true}},
      {{"bilinear", 2}, {"torch.ops.aten.upsample_bilinear2d_backward", true}},
      {{"bicubic", 2}, {"torch.ops.aten.upsample_bicubic2d_backward", true}},
      {{"trilinear", 3}, {"torch.ops.aten.upsample_trilinear3d_backward", true}},
  };
  auto it = kOps.find({mode, spatial});
  return it == kOps.end() ? nullptr : &it->second;
}

const std::string* string_literal(const Arg* a) {
  return a && a->kind == Arg::Kind::Literal ? std::get_if<std::string>(&a->literal) : nullptr;
}

}  // namespace

// F.interpolate(input, size, scale_factor, mode, align_corners, recompute_scale_factor, antialias).
// F.interpolate hands aten the scale factors it was given (unless recompute_scale_factor), and aten's
// kernels then map indices by 1/scale rather than by the size ratio; the backward takes the same
// scales (None where the forward had a size). "area" (adaptive pooling) and antialias stay islands.
void interpolate_vjp(VjpCtx& c) {
  Rewriter& rw = c.rw;
  const Arg* input = argument(c.node, 0, "input");
  if (!input || input->kind != Arg::Kind::Value) passes::refuse();
  ValueId x = c.in(*input), g = *c.grad();
  const std::vector<int64_t> in_sizes = passes::const_sizes(rw.type(x)), out_sizes = passes::const_sizes(rw.type(g));
  if (in_sizes.size() < 3 || in_sizes.size() > 5 || out_sizes.size() != in_sizes.size()) passes::refuse();
  const size_t spatial = in_sizes.size() - 2;

  std::string mode = "nearest";
  if (const Arg* m = argument(c.node, 3, "mode")) {
    const std::string* s = string_literal(m);
    if (!s) passes::refuse();
    mode = *s;
  }
  const UpsampleBackward* backward = upsample_backward(mode, spatial);
  if (!backward) passes::refuse();
  if (const Arg* aa = argument(c.node, 6, "antialias"); aa && passes::bool_literal(*aa) != false) passes::refuse();
  bool align_corners = false;
  if (const Arg* ac = argument(c.node, 4, "align_corners"); ac && !passes::is_none(*ac)) {
    std::optional<bool> b = passes::bool_literal(*ac);
    if (!b || (*b && !backward->align_corners)) passes::refuse();
    align_corners = *b;
  }
  bool recompute = false;
  if (const Arg* r = argument(c.node, 5, "recompute_scale_factor"); r && !passes::is_none(*r)) {
    std::optional<bool> b = passes::bool_literal(*r);
    if (!b) passes::refuse();
    recompute = *b;
  }
  std::vector<Arg> scales(spatial, Arg::of_literal(ir::NoneLiteral{}));
  if (const Arg* sf = argument(c.node, 2, "scale_factor"); sf && !passes::is_none(*sf) && !recompute) {
    std::vector<Arg> given = sf->kind == Arg::Kind::List || sf->kind == Arg::Kind::Tuple ? sf->items : std::vector<Arg>{*sf};
    if (given.size() == 1) given.assign(spatial, given[0]);
    if (given.size() != spatial) passes::refuse();
    for (size_t i = 0; i < spatial; ++i) {
      std::optional<double> s = passes::number_literal(given[i]);
      if (!s) passes::refuse();
      scales[i] = Arg::of_literal(*s);
    }
  }

  std::vector<Arg> output_size, input_size;
  for (size_t d = 2; d < out_sizes.size(); ++d) output_size.push_back(Arg::of_literal(out_sizes[d]));
  for (int64_t n : in_sizes) input_size.push_back(Arg::of_literal(n));
  std::vector<Arg> args = {V(g), Arg::list(std::move(output_size)), Arg::list(std::move(input_size))};
  if (backward->align_corners) args.push_back(Arg::of_literal(align_corners));
  args.insert(args.end(), scales.begin(), scales.end());
  const ir::TensorType& t = rw.type(x);
  c.give(*input, rw.emit_torch(backward->op, std::move(args), {}, passes::make_type(t.dtype, t.sizes, t.device, false)));
}

}  // namespace ember::autograd::rules
