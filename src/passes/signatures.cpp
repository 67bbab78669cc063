// The signature table (signatures.h). Each entry is written the way Python prints a signature,
// with a `:kind` after the names that canonicalize normalizes; a parameter after `*` or after a
// `*varargs` one is keyword-only. Spelled as text so the table reads like torch's documentation.
#include "passes/signatures.h"

#include <map>
#include <stdexcept>

namespace ember::passes {

using ir::Arg;

namespace {

// {callable, signature}; several callables may share one signature.
struct Entry {
  std::vector<const char*> callables;
  const char* spec;
};

const char* const kFactoryKw = "*, out=None, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False";
const char* const kLikeKw =
    "*, dtype=None, layout=None, device=None, pin_memory=None, requires_grad=False, memory_format=None";

std::vector<Entry> entries() {
  static const std::string zeros = std::string("*size:sizes, ") + (kFactoryKw + 3);
  static const std::string full = std::string("size:sizes, fill_value, ") + kFactoryKw;
  static const std::string arange = std::string("start, end=None, step=1, ") + kFactoryKw;
  static const std::string like = std::string("input, ") + kLikeKw;
  static const std::string full_like = std::string("input, fill_value, ") + kLikeKw;
  static const std::string new_zeros = std::string("self, *size:sizes, ") + (kFactoryKw + 13);  // no out=
  static const std::string new_full = std::string("self, size:sizes, fill_value, *, ") + (kFactoryKw + 13);
  return {
      {{"torch.add", "torch.sub", "torch.rsub", "torch.Tensor.__rsub__"}, "input, other, *, alpha=1"},
      {{"torch.div"}, "input, other, *, rounding_mode=None"},
      {{"torch.mul", "torch.floor_divide", "torch.remainder", "torch.pow", "torch.maximum", "torch.minimum",
        "torch.eq", "torch.ne", "torch.lt", "torch.le", "torch.gt", "torch.ge", "torch.bitwise_and",
        "torch.bitwise_or", "torch.bitwise_xor", "torch.logical_and", "torch.logical_or"},
       "input, other"},
      {{"torch.where"}, "condition, input, other"},
      {{"torch.masked_fill"}, "input, mask, value"},
      {{"torch.clamp"}, "input, min=None, max=None"},
      {{"torch.clamp_min", "torch.Tensor.clamp_min"}, "input, min"},
      {{"torch.clamp_max", "torch.Tensor.clamp_max"}, "input, max"},
      {{"torch.square", "torch.Tensor.square", "torch.t", "torch.Tensor.t", "torch.nn.functional.sigmoid",
        "torch.nn.functional.tanh"},
       "input"},
      {{"torch.nn.functional.gelu"}, "input, *, approximate='none'"},
      {{"torch.nn.functional.silu", "torch.nn.functional.relu", "torch.nn.functional.relu6",
        "torch.nn.functional.hardswish", "torch.nn.functional.hardsigmoid", "torch.nn.functional.mish"},
       "input, inplace=False"},
      {{"torch.nn.functional.selu"}, "input, inplace=False"},
      {{"torch.nn.functional.leaky_relu"}, "input, negative_slope=0.01, inplace=False"},
      {{"torch.nn.functional.elu", "torch.nn.functional.celu"}, "input, alpha=1.0, inplace=False"},
      {{"torch.nn.functional.threshold", "torch.nn.functional._threshold"}, "input, threshold, value, inplace=False"},
      {{"torch.nn.functional.rrelu"}, "input, lower=0.125, upper=0.3333333333333333, training=False, inplace=False"},
      {{"torch.nn.functional.softplus"}, "input, beta=1.0, threshold=20.0"},
      {{"torch.nn.functional.hardtanh"}, "input, min_val=-1.0, max_val=1.0, inplace=False"},
      {{"torch.sum", "torch.mean"}, "input, dim:dims=None, keepdim=False, *, dtype=None"},
      {{"torch.amax", "torch.amin"}, "input, dim:dims=(), keepdim=False"},
      {{"torch.var", "torch.var_mean", "torch.std", "torch.std_mean", "torch.Tensor.std"},
       "input, dim:dims=None, unbiased=None, keepdim=False, *, correction=None"},
      {{"torch.logsumexp", "torch.Tensor.logsumexp"}, "input, dim:dims, keepdim=False"},
      {{"torch.softmax", "torch.log_softmax"}, "input, dim:dim, dtype=None"},
      {{"torch.nn.functional.softmax", "torch.nn.functional.log_softmax"},
       "input, dim:dim=None, _stacklevel=3, dtype=None"},
      {{"torch.nn.functional.layer_norm"}, "input, normalized_shape:sizes, weight=None, bias=None, eps=1e-05"},
      {{"torch.nn.functional.rms_norm"}, "input, normalized_shape:sizes, weight=None, eps=None"},
      {{"torch._weight_norm"}, "v, g, dim=0"},
      {{"torch.nn.functional.normalize"}, "input, p=2.0, dim=1, eps=1e-12, out=None"},
      {{"torch._C._linalg.linalg_vector_norm"}, "input, ord=2, dim=None, keepdim=False, *, dtype=None, out=None"},
      {{"torch.norm"}, "input, p='fro', dim=None, keepdim=False, out=None, dtype=None"},
      {{"torch.Tensor.norm"}, "input, p='fro', dim=None, keepdim=False, dtype=None"},
      {{"torch.nn.functional.group_norm"}, "input, num_groups, weight=None, bias=None, eps=1e-05"},
      {{"torch.nn.functional.adaptive_avg_pool2d", "torch.adaptive_avg_pool1d"}, "input, output_size"},
      {{"torch.conv2d"}, "input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1"},
      {{"torch.nn.functional.max_pool2d"},
       "input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False"},
      {{"torch.nn.functional.avg_pool2d"},
       "input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None"},
      {{"torch.nn.functional.batch_norm"},
       "input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-05"},
      {{"torch.nn.functional.linear"}, "input, weight, bias=None"},
      {{"torch.addmm"}, "input, mat1, mat2, *, beta=1, alpha=1"},
      {{"torch.matmul"}, "input, other, *, out=None"},
      {{"torch.baddbmm", "torch.Tensor.baddbmm"}, "input, batch1, batch2, *, beta=1, alpha=1"},
      {{"torch.addcmul", "torch.addcdiv", "torch.Tensor.addcmul", "torch.Tensor.addcdiv"},
       "input, tensor1, tensor2, *, value=1"},
      {{"torch.roll", "torch.Tensor.roll"}, "input, shifts, dims=None"},
      {{"torch.Tensor.repeat"}, "self, *sizes"},
      {{"torch.repeat_interleave", "torch.Tensor.repeat_interleave"}, "input, repeats=None, dim=None, *, output_size=None"},
      {{"torch.nn.functional.dropout", "torch.nn.functional.dropout1d", "torch.nn.functional.dropout2d",
        "torch.nn.functional.dropout3d"},
       "input, p=0.5, training=True, inplace=False"},
      {{"torch.nn.functional.alpha_dropout", "torch.nn.functional.feature_alpha_dropout"},
       "input, p=0.5, training=False, inplace=False"},
      {{"torch.nn.functional.cross_entropy"},
       "input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction='mean', "
       "label_smoothing=0.0"},
      {{"torch.nn.functional.nll_loss"},
       "input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction='mean'"},
      {{"torch.Tensor.view"}, "self, *size:sizes"},
      {{"torch.reshape"}, "input, *shape:sizes"},
      {{"torch.Tensor.expand"}, "self, *size:sizes, implicit=False"},
      {{"torch.permute"}, "input, *dims:perm"},
      {{"torch.transpose"}, "input, dim0:dim, dim1:dim"},
      {{"torch.unsqueeze"}, "input, dim:diminsert"},
      {{"torch.squeeze"}, "input, dim:dims=None"},
      {{"torch.flatten"}, "input, start_dim:dim=0, end_dim:dim=-1"},
      {{"torch.unflatten", "torch.Tensor.unflatten"}, "input, dim:dim, sizes"},
      {{"operator.getitem"}, "a, b"},
      {{"torch.ops.aten.slice"}, "input, dim:dim=0, start=None, end=None, step=1"},
      {{"torch.select"}, "input, dim:dim, index"},
      {{"torch.narrow", "torch.Tensor.narrow"}, "input, dim:dim, start, length"},
      {{"torch.unbind", "torch.Tensor.unbind"}, "input, dim:dim=0"},
      {{"torch.Tensor.contiguous", "torch.Tensor.float", "torch.Tensor.double", "torch.Tensor.half",
        "torch.Tensor.bfloat16", "torch.Tensor.long", "torch.Tensor.int", "torch.Tensor.short", "torch.Tensor.bool",
        "torch.Tensor.byte", "torch.Tensor.char"},
       "self"},
      {{"torch.Tensor.type_as", "torch.Tensor.reshape_as", "torch.Tensor.view_as", "torch.Tensor.expand_as"},
       "self, other"},
      {{"torch.cat"}, "tensors:tensors, dim:dim=0"},
      {{"torch.stack"}, "tensors:tensors, dim:diminsert=0"},
      {{"torch.split"}, "tensor, split_size_or_sections, dim:dim=0"},
      {{"torch.chunk"}, "input, chunks, dim:dim=0"},
      {{"torch.gather"}, "input, dim:dim, index, *, sparse_grad=False"},
      {{"torch.index_select"}, "input, dim:dim, index"},
      {{"torch.index_add"}, "input, dim:dim, index, source, *, alpha=1"},
      {{"torch.scatter_add"}, "input, dim:dim, index, src"},
      {{"torch.slice_scatter"}, "input, src, dim:dim=0, start=None, end=None, step=1"},
      {{"torch.tril", "torch.triu"}, "input, diagonal=0"},
      {{"torch.zeros", "torch.ones"}, zeros.c_str()},
      {{"torch.full"}, full.c_str()},
      {{"torch.arange"}, arange.c_str()},
      {{"torch.zeros_like", "torch.ones_like"}, like.c_str()},
      {{"torch.full_like"}, full_like.c_str()},
      {{"torch.Tensor.new_zeros", "torch.Tensor.new_ones"}, new_zeros.c_str()},
      {{"torch.Tensor.new_full"}, new_full.c_str()},
      {{"torch.diff", "torch.Tensor.diff"}, "input, n=1, dim:dim=-1, prepend=None, append=None"},
      {{"torch.nn.functional.pad"}, "input, pad, mode='constant', value=None"},
      {{"torch.nn.functional.embedding"},
       "input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False, sparse=False"},
  };
}

std::string trim(std::string s) {
  size_t a = s.find_first_not_of(' '), b = s.find_last_not_of(' ');
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

Arg parse_default(const std::string& text) {
  if (text == "None") return Arg::of_literal(ir::NoneLiteral{});
  if (text == "True") return Arg::of_literal(true);
  if (text == "False") return Arg::of_literal(false);
  if (text == "()") return Arg::tuple({});
  if (text.size() >= 2 && text.front() == '\'') return Arg::of_literal(text.substr(1, text.size() - 2));
  if (text.find_first_of(".e") != std::string::npos) return Arg::of_literal(std::stod(text));
  return Arg::of_literal(static_cast<int64_t>(std::stoll(text)));
}

Param::Kind parse_kind(const std::string& k) {
  if (k.empty()) return Param::Kind::Any;
  if (k == "dim") return Param::Kind::Dim;
  if (k == "diminsert") return Param::Kind::DimInsert;
  if (k == "dims") return Param::Kind::Dims;
  if (k == "perm") return Param::Kind::Perm;
  if (k == "sizes") return Param::Kind::Sizes;
  if (k == "tensors") return Param::Kind::Tensors;
  throw std::logic_error("signature table: unknown parameter kind '" + k + "'");
}

std::vector<Param> parse_spec(const std::string& spec) {
  std::vector<Param> params;
  bool keyword_only = false;
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string::npos) comma = spec.size();
    std::string item = trim(spec.substr(pos, comma - pos));
    pos = comma + 1;
    if (item.empty()) continue;
    if (item == "*") {
      keyword_only = true;
      continue;
    }
    Param p;
    if (item[0] == '*') {
      p.varargs = true;
      item = item.substr(1);
    }
    size_t eq = item.find('=');
    if (eq != std::string::npos) {
      p.default_value = parse_default(trim(item.substr(eq + 1)));
      item = trim(item.substr(0, eq));
    }
    size_t colon = item.find(':');
    if (colon != std::string::npos) {
      p.kind = parse_kind(item.substr(colon + 1));
      item = item.substr(0, colon);
    }
    p.name = item;
    p.keyword_only = keyword_only;
    if (p.varargs) keyword_only = true;
    params.push_back(std::move(p));
  }
  return params;
}

const std::map<std::string, Signature, std::less<>>& table() {
  static const std::map<std::string, Signature, std::less<>> kTable = [] {
    std::map<std::string, Signature, std::less<>> t;
    for (const Entry& e : entries()) {
      std::vector<Param> params = parse_spec(e.spec);
      for (const char* c : e.callables) {
        if (!t.emplace(c, Signature{c, params}).second)
          throw std::logic_error(std::string("signature table: '") + c + "' is listed twice");
      }
    }
    return t;
  }();
  return kTable;
}

}  // namespace

const Signature* find_signature(std::string_view callable) {
  auto it = table().find(callable);
  return it == table().end() ? nullptr : &it->second;
}

size_t Bound::index(std::string_view name) const {
  for (size_t i = 0; i < signature->params.size(); ++i)
    if (signature->params[i].name == name) return i;
  throw std::logic_error("signature of " + signature->callable + " has no parameter '" + std::string(name) + "'");
}

const Arg& Bound::operator[](std::string_view name) const { return args[index(name)]; }
bool Bound::was_given(std::string_view name) const { return given[index(name)]; }

std::optional<Bound> bind(const ir::Node& node) {
  const Signature* sig = find_signature(node.callable());
  if (!sig) return std::nullopt;
  Bound b;
  b.signature = sig;
  b.args.resize(sig->params.size());
  b.given.assign(sig->params.size(), false);
  size_t next = 0;  // next positional parameter
  for (size_t i = 0; i < node.args.size(); ++i) {
    while (next < sig->params.size() && sig->params[next].keyword_only && !sig->params[next].varargs) ++next;
    if (next >= sig->params.size()) return std::nullopt;
    const Param& p = sig->params[next];
    if (p.varargs) {
      // One list argument, or the trailing ints as the list.
      size_t rest = node.args.size() - i;
      const Arg& first = node.args[i];
      if (rest == 1 && (first.kind == Arg::Kind::List || first.kind == Arg::Kind::Tuple)) {
        b.args[next] = Arg::list(first.items);
      } else {
        b.args[next] = Arg::list(std::vector<Arg>(node.args.begin() + i, node.args.end()));
      }
      b.given[next] = true;
      ++next;
      break;
    }
    b.args[next] = node.args[i];
    b.given[next] = true;
    ++next;
  }
  for (const auto& [name, value] : node.kwargs) {
    size_t k = 0;
    while (k < sig->params.size() && sig->params[k].name != name) ++k;
    if (k == sig->params.size() || b.given[k]) return std::nullopt;
    b.args[k] = sig->params[k].varargs && value.kind == Arg::Kind::Tuple ? Arg::list(value.items) : value;
    b.given[k] = true;
  }
  for (size_t k = 0; k < sig->params.size(); ++k) {
    if (b.given[k]) continue;
    if (!sig->params[k].default_value) return std::nullopt;
    b.args[k] = *sig->params[k].default_value;
  }
  return b;
}

}  // namespace ember::passes
