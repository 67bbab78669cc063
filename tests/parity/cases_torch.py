"""Parity cases for torch calls: torch.*, torch.nn.functional.*, Tensor methods and operators,
indexing and setitem, tensor attributes, factories, and dtypes other than float32. Every program
here must be captured in one graph (counters "strict").
"""
import torch
import torch.nn.functional as F

from ember.testing import randbool, randint, randn

from .registry import case


def x34(g):
    return (randn(g, 3, 4),)


def x34_y34(g):
    return (randn(g, 3, 4), randn(g, 3, 4))


def pos34(g):
    return (randn(g, 3, 4).abs() + 0.1,)


def img(g):
    return (randn(g, 2, 3, 8, 8),)


# ---------------------------------------------------------------------------------------------
# Operators

@case(inputs=x34_y34)
def op_arith_tensor_tensor(x, y):
    return x + y, x - y, x * y, x / (y.abs() + 1), -x, +x


@case(inputs=x34)
def op_arith_tensor_scalar(x):
    return x + 1, 2 - x, x * 0.5, 3 / (x.abs() + 1), x / 4, x + True


@case(inputs=x34)
def op_pow_floordiv_mod(x):
    return x ** 2, 2 ** x, x.abs() ** 0.5, x // 0.3, x % 0.7, torch.fmod(x, 0.7)


@case(inputs=lambda g: (randn(g, 3, 4), randn(g, 4, 5), randn(g, 2, 3, 4), randn(g, 4)))
def op_matmul(a, b, c, v):
    return a @ b, c @ b, a @ v, v @ b, v @ v


@case(inputs=x34_y34)
def op_comparisons(x, y):
    return x < y, x <= 0, x == y, x != 0.5, x > y, x >= -0.1


@case(inputs=lambda g: (randbool(g, 3, 4), randbool(g, 3, 4)))
def op_bool_logic(a, b):
    return a & b, a | b, a ^ b, ~a, a & True


@case(inputs=lambda g: (randint(g, -10, 10, 3, 4), randint(g, 1, 5, 3, 4)))
def op_int_tensor_arith(a, b):
    return a + b, a * 3, a // b, a % b, a & b, a | 1, a << 1, a >> 1, -a, a / b


@case(inputs=x34)
def op_inplace_operators_on_intermediate(x):
    y = x * 1
    y += 1
    y *= 2
    y -= x
    y /= 3
    y **= 2
    return y


@case(inputs=x34)
def op_reverse_with_python_numbers(x):
    n = x.shape[0]
    return n - x, n * x, n / (x.abs() + 1), n ** x.clamp(-1, 1), n + x


# ---------------------------------------------------------------------------------------------
# Elementwise torch.* and methods

@case(inputs=pos34)
def unary_math(x):
    return torch.exp(x), torch.log(x), torch.sqrt(x), torch.rsqrt(x), x.log1p(), x.expm1(), x.reciprocal()


@case(inputs=x34)
def unary_trig(x):
    return torch.sin(x), x.cos(), torch.tan(x * 0.1), torch.tanh(x), torch.atan(x), x.asinh()


@case(inputs=x34)
def unary_rounding(x):
    y = x * 3
    return y.floor(), y.ceil(), y.round(), y.trunc(), y.frac(), torch.round(y, decimals=1), y.sign(), y.abs()


@case(inputs=x34)
def unary_special(x):
    return torch.erf(x), torch.sigmoid(x), x.logit(eps=1e-3), torch.special.erfc(x), x.square(), x.neg()


@case(inputs=x34_y34)
def binary_min_max_where(x, y):
    return torch.maximum(x, y), torch.minimum(x, y), torch.where(x > y, x, y), torch.where(x > 0, x, 0.0)


@case(inputs=x34)
def clamp_variants(x):
    lo = torch.full((4,), -0.5)
    return x.clamp(-0.5, 0.5), torch.clamp(x, min=0.1), x.clamp_max(0.2), x.clamp(min=lo), x.clip(-1, 1)


@case(inputs=lambda g: (randn(g, 3, 4), randn(g, 3, 4), randn(g, 3, 4)))
def ternary_elementwise(a, b, c):
    return torch.lerp(a, b, 0.3), torch.addcmul(a, b, c, value=0.5), torch.addcdiv(a, b, c.abs() + 1), a.lerp(b, c)


@case(inputs=x34)
def nan_handling(x):
    y = torch.where(x > 0.5, torch.full_like(x, float("nan")), x)
    return torch.nan_to_num(y, nan=0.0), y.isnan(), torch.isfinite(y), y.nansum()


# ---------------------------------------------------------------------------------------------
# Reductions

@case(inputs=lambda g: (randn(g, 3, 4, 5),))
def reduce_sum_mean(x):
    return x.sum(), x.sum(dim=1), x.sum((0, 2), keepdim=True), x.mean(-1), torch.mean(x, dim=(1, 2))


@case(inputs=lambda g: (randn(g, 3, 4, 5),))
def reduce_max_min_structs(x):
    m = x.max(dim=1)
    n = torch.min(x, -1, keepdim=True)
    return m, m.values, m.indices, n[0], x.max(), x.amax(dim=(0, 1)), x.amin(1)


@case(inputs=lambda g: (randn(g, 3, 4, 5),))
def reduce_arg_topk_sort(x):
    return x.argmax(dim=2), torch.argmin(x, dim=0), x.topk(2, dim=-1), torch.sort(x, dim=1, descending=True)


@case(inputs=lambda g: (randn(g, 3, 4, 5),))
def reduce_var_std(x):
    return x.var(dim=1), x.var(dim=1, unbiased=False), x.std(-1, correction=0), torch.var_mean(x, dim=2)


@case(inputs=lambda g: (randn(g, 3, 4, 5),))
def reduce_prod_norm_logsumexp(x):
    return x.prod(dim=1), x.norm(dim=-1), torch.linalg.vector_norm(x, ord=2, dim=0), x.logsumexp(-1)


@case(inputs=lambda g: (randn(g, 3, 4),))
def reduce_cumulative(x):
    return x.cumsum(dim=1), torch.cumprod(x, 0), x.cummax(dim=1), torch.logcumsumexp(x, dim=1)


@case(inputs=lambda g: (randbool(g, 3, 4),))
def reduce_all_any_count(m):
    return m.all(), m.any(dim=1), m.sum(dim=0), torch.count_nonzero(m, dim=1)


# ---------------------------------------------------------------------------------------------
# Shape and layout

@case(inputs=lambda g: (randn(g, 2, 3, 4),))
def shape_view_reshape(x):
    return x.view(6, 4), x.reshape(2, -1), x.view(-1), x.reshape(x.shape[0], 12), x.view(2, 3, 2, 2)


@case(inputs=lambda g: (randn(g, 2, 3, 4),))
def shape_permute_transpose(x):
    return x.permute(2, 0, 1), x.transpose(0, 2), x.transpose(-1, -2).contiguous(), x.mT, x[0].T, x.movedim(0, -1)


@case(inputs=lambda g: (randn(g, 2, 3, 4),))
def shape_flatten_unflatten(x):
    return x.flatten(), x.flatten(1), torch.flatten(x, 0, 1), x.unflatten(-1, (2, 2)), x.flatten(1).view(2, 3, 4)


@case(inputs=lambda g: (randn(g, 1, 3, 1, 4),))
def shape_squeeze_unsqueeze(x):
    return x.squeeze(), x.squeeze(0), x.squeeze(2).unsqueeze(-1), torch.unsqueeze(x, 1), x[0].unsqueeze(0)


@case(inputs=lambda g: (randn(g, 3, 1),))
def shape_expand_repeat(x):
    return x.expand(3, 4), x.expand(2, -1, 5), x.repeat(2, 3), x.expand_as(torch.empty(3, 6)), x.repeat_interleave(2, 0)


@case(inputs=x34_y34)
def shape_cat_stack(x, y):
    return torch.cat([x, y]), torch.cat((x, y), dim=1), torch.stack([x, y]), torch.stack((x, y), -1), \
        torch.hstack([x, y]), torch.vstack([x, y])


@case(inputs=lambda g: (randn(g, 6, 4),))
def shape_split_chunk_unbind(x):
    return x.split(2), torch.split(x, [1, 2, 3]), x.chunk(3, dim=0), x.unbind(1), torch.tensor_split(x, 2, dim=1)


@case(inputs=lambda g: (randn(g, 6, 4),))
def shape_narrow_flip_roll(x):
    return x.narrow(0, 1, 3), x.flip(0), torch.flip(x, [0, 1]), x.roll(1, 0), torch.roll(x, (1, -1), (0, 1))


@case(inputs=lambda g: (randn(g, 5, 5),))
def shape_tril_triu_diag(x):
    return x.tril(), torch.triu(x, diagonal=1), x.diagonal(), torch.diag(x[0]), x.diag_embed()[0]


@case(inputs=lambda g: (randn(g, 4, 3), randint(g, 0, 4, 5), randint(g, 0, 3, 4, 2)))
def gather_index_select(x, idx, gidx):
    return x.index_select(0, idx), torch.gather(x, 1, gidx), x.take_along_dim(gidx, dim=1)


@case(inputs=lambda g: (randn(g, 4, 3), randint(g, 0, 4, 2, 3)))
def scatter_ops(x, idx):
    src = torch.ones(2, 3)
    return torch.zeros(4, 3).scatter(0, idx, src), x.scatter_add(0, idx, src), x.index_add(0, idx[0, :2], x[:2])


@case(inputs=lambda g: (randn(g, 3, 4), randbool(g, 3, 4)))
def masked_fill_and_where(x, m):
    return x.masked_fill(m, 0.0), x.masked_fill(~m, float("-inf")).softmax(-1).nan_to_num(), torch.where(m, x, -x)


@case(inputs=lambda g: (randn(g, 3, 4),))
def contiguous_and_clone(x):
    t = x.t()
    return t.contiguous(), t.clone(), t.is_contiguous(), t.contiguous().is_contiguous(), x.detach().clone()


@case(inputs=lambda g: (randn(g, 3, 4), randn(g, 2, 6)))
def view_as_reshape_as_type_as(x, y):
    return y.view_as(x), y.reshape_as(x), x.type_as(torch.zeros(1, dtype=torch.int64)), x.new_tensor([1.0, 2.0])


# ---------------------------------------------------------------------------------------------
# Linear algebra

@case(inputs=lambda g: (randn(g, 2, 3, 4), randn(g, 2, 4, 5), randn(g, 3, 5), randn(g, 4, 5)))
def linalg_mm_family(a, b, c, w):
    return torch.bmm(a, b), torch.matmul(a, b), torch.mm(a[0], w), torch.addmm(c, a[0], w), \
        torch.baddbmm(c, a, b, alpha=0.5, beta=2.0)


@case(inputs=lambda g: (randn(g, 2, 3, 4), randn(g, 4, 5), randn(g, 3), randn(g, 4)))
def linalg_einsum_outer(a, w, u, v):
    return torch.einsum("bij,jk->bik", a, w), torch.einsum("i,j->ij", u, v), torch.outer(u, v), \
        torch.einsum("bij->bj", a), torch.dot(v, v)


@case(inputs=lambda g: (randn(g, 5, 4), randn(g, 3, 4), randn(g, 3)))
def functional_linear(x, w, b):
    return F.linear(x, w, b), F.linear(x, w), torch.nn.functional.bilinear(x, x, w.unsqueeze(1).expand(3, 4, 4))


# ---------------------------------------------------------------------------------------------
# torch.nn.functional

@case(inputs=x34)
def functional_activations(x):
    return F.relu(x), F.gelu(x), F.gelu(x, approximate="tanh"), F.silu(x), F.leaky_relu(x, 0.1), F.elu(x), \
        F.softplus(x), F.hardtanh(x), F.relu6(x * 4), F.mish(x), F.selu(x), F.hardswish(x)


@case(inputs=lambda g: (randn(g, 2, 3, 5),))
def functional_softmax_family(x):
    return F.softmax(x, dim=-1), F.log_softmax(x, dim=1), x.softmax(0), torch.softmax(x, -1, dtype=torch.float64), \
        F.softmin(x, dim=2)


@case(inputs=lambda g: (randn(g, 2, 6),))
def functional_glu_normalize(x):
    return F.glu(x, dim=-1), F.normalize(x, dim=-1), F.cosine_similarity(x[:, :3], x[:, 3:], dim=-1)


@case(inputs=lambda g: (randn(g, 2, 3, 8), randn(g, 8), randn(g, 8)))
def functional_layer_norm(x, w, b):
    return F.layer_norm(x, (8,), w, b), F.layer_norm(x, x.shape[-1:]), F.layer_norm(x, (3, 8), eps=1e-3)


@case(inputs=lambda g: (randn(g, 2, 3, 8), randn(g, 8)))
def functional_rms_norm(x, w):
    return F.rms_norm(x, (8,), w, eps=1e-6), F.rms_norm(x, (8,))


@case(inputs=lambda g: (randn(g, 2, 6, 5), randn(g, 6), randn(g, 6)))
def functional_group_norm(x, w, b):
    return F.group_norm(x, 3, w, b), F.group_norm(x, 2)


@case(inputs=lambda g: (randn(g, 4, 3, 5), randn(g, 3).abs(), randn(g, 3).abs() + 0.5))
def functional_batch_norm_eval(x, mean, var):
    return F.batch_norm(x, mean, var, training=False), F.batch_norm(x, mean, var, torch.ones(3), torch.zeros(3))


@case(inputs=lambda g: (randn(g, 3, 4),))
def functional_dropout_off(x):
    return F.dropout(x, p=0.5, training=False), F.dropout(x, 0.0), torch.dropout(x, 0.3, False)


@case(inputs=lambda g: (randn(g, 4, 8),))
def functional_dropout_train_seeded(x):
    return F.dropout(x, p=0.5, training=True)


@case(inputs=lambda g: (randint(g, 0, 10, 2, 5), randn(g, 10, 4)))
def functional_embedding(idx, weight):
    return F.embedding(idx, weight), F.embedding(idx, weight, padding_idx=0), weight[idx]


@case(inputs=lambda g: (randint(g, 0, 5, 6),))
def functional_one_hot(idx):
    return F.one_hot(idx, num_classes=5), F.one_hot(idx, 6).float().sum(0)


@case(inputs=lambda g: (randn(g, 2, 3, 16), randn(g, 4, 3, 3), randn(g, 4)))
def functional_conv1d(x, w, b):
    return F.conv1d(x, w, b), F.conv1d(x, w, padding=1, stride=2), F.conv1d(x, w, dilation=2, padding="same")


@case(inputs=lambda g: (randn(g, 2, 4, 8, 8), randn(g, 6, 2, 3, 3), randn(g, 6)))
def functional_conv2d(x, w, b):
    return F.conv2d(x, w, b, padding=1, groups=2), F.conv2d(x, w, stride=2, groups=2)


@case(inputs=img)
def functional_pooling(x):
    return F.max_pool2d(x, 2), F.avg_pool2d(x, 3, stride=2, padding=1), F.adaptive_avg_pool2d(x, (1, 1)), \
        F.adaptive_max_pool2d(x, 2), F.max_pool1d(x.flatten(2), 4)


@case(inputs=img)
def functional_pad_interpolate(x):
    return F.pad(x, (1, 2)), F.pad(x, (1, 1, 2, 0), value=0.5), F.pad(x, (1, 1, 1, 1), mode="reflect"), \
        F.interpolate(x, scale_factor=2, mode="nearest"), F.interpolate(x, size=(4, 4), mode="bilinear")


@case(inputs=lambda g: (randn(g, 6, 5), randint(g, 0, 5, 6), randn(g, 6, 5)))
def functional_losses(logits, target, other):
    return F.cross_entropy(logits, target), F.mse_loss(logits, other), F.l1_loss(logits, other, reduction="sum"), \
        F.nll_loss(F.log_softmax(logits, -1), target), F.smooth_l1_loss(logits, other), \
        F.binary_cross_entropy_with_logits(logits, other.sigmoid()), F.kl_div(logits.log_softmax(-1),
                                                                               other.softmax(-1), reduction="batchmean")


@case(inputs=lambda g: (randn(g, 6, 5), randint(g, 0, 5, 6)))
def functional_cross_entropy_options(logits, target):
    t = target.clone()
    t[0] = -100
    return F.cross_entropy(logits, t, ignore_index=-100), F.cross_entropy(logits, target, label_smoothing=0.1), \
        F.cross_entropy(logits, target, reduction="none")


@case(inputs=lambda g: (randn(g, 2, 2, 5, 4), randn(g, 2, 2, 5, 4), randn(g, 2, 2, 5, 4)))
def functional_sdpa(q, k, v):
    mask = torch.ones(5, 5, dtype=torch.bool).tril()
    return F.scaled_dot_product_attention(q, k, v), F.scaled_dot_product_attention(q, k, v, is_causal=True), \
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask), F.scaled_dot_product_attention(q, k, v, scale=0.3)


@case(inputs=lambda g: (randn(g, 1, 4, 6, 6),))
def functional_unfold_fold_shuffle(x):
    cols = F.unfold(x, kernel_size=2, stride=2)
    return cols, F.fold(cols, (6, 6), kernel_size=2, stride=2), F.pixel_shuffle(x, 2), F.pixel_unshuffle(x, 2)


# ---------------------------------------------------------------------------------------------
# Indexing and setitem

@case(inputs=lambda g: (randn(g, 4, 5, 6),))
def index_int_slice(x):
    return x[0], x[-1], x[1:3], x[:, 2], x[::2], x[1:, :-1, ::3], x[0, 1, 2], x[-2:, 1]


@case(inputs=lambda g: (randn(g, 4, 5, 6),))
def index_none_ellipsis(x):
    return x[None], x[:, None], x[..., -1], x[None, ..., 1:], x[..., None, :2], x[0, ..., None], x[...]


@case(inputs=lambda g: (randn(g, 4, 5), randint(g, 0, 4, 3), randint(g, 0, 5, 3)))
def index_long_tensors(x, i, j):
    return x[i], x[:, j], x[i, j], x[i, 1:], x[torch.tensor([0, 2])], x[[1, 3]]


@case(inputs=lambda g: (randn(g, 4, 5), randbool(g, 4, 5), randbool(g, 4)), counters="eager", fallback_marker="bool-mask",
      note="boolean-mask indexing: the result's shape depends on the mask's values (data-dependent)")
def index_bool_mask(x, m, rows):
    return x[m], x[rows], x[x > 0]  # FALLBACK bool-mask


@case(inputs=lambda g: (randn(g, 4, 5), randn(g, 5)))
def setitem_on_intermediate(x, row):
    y = x.clone()
    y[0] = row
    y[1, 2] = 7.0
    y[:, -1] = 0.0
    y[2:, :2] = y[:2, :2] * 10
    y[..., 1] += 1
    y[None, 3] = -1.0
    return y


@case(inputs=lambda g: (randn(g, 4, 5), randint(g, 0, 4, 2), randbool(g, 4, 5)))
def setitem_with_tensor_indices(x, idx, m):
    y = x * 1
    y[idx] = 3.0
    z = x * 2
    z[m] = 0.0
    w = x.clone()
    w[torch.arange(2), torch.tensor([1, 3])] = torch.tensor([9.0, 8.0])
    return y, z, w


# ---------------------------------------------------------------------------------------------
# Tensor attributes and metadata queries

@case(inputs=lambda g: (randn(g, 2, 3, 4),))
def tensor_attributes(x):
    return x.shape, x.dtype, x.device, x.ndim, x[0].T.shape, x.size(), x.size(-1), x.dim(), x.numel()


@case(inputs=lambda g: (randn(g, 2, 3, 4),))
def tensor_stride_and_sizes(x):
    t = x.transpose(0, 2)
    return t.stride(), t.stride(1), x.element_size(), x.is_floating_point(), x.is_complex(), t.shape[::-1]


@case(inputs=lambda g: (randn(g, 2, 3, 4),))
def shape_arithmetic_into_ops(x):
    b, t, c = x.size()
    h = 2
    return x.view(b, t, h, c // h).transpose(1, 2).reshape(b * h, t, c // h), torch.Size([b, t]) + (c,)


# ---------------------------------------------------------------------------------------------
# Factories

@case(inputs=x34)
def factory_zeros_ones_full(x):
    z = torch.zeros(x.shape[0], 4, device=x.device)
    o = torch.ones(x.size(), dtype=x.dtype)
    f = torch.full((2, x.shape[1]), 3.5)
    e = torch.empty(3, 4).fill_(2.0)
    return x + z + o, f, e, torch.zeros((), dtype=torch.int64)


@case(inputs=x34)
def factory_like(x):
    return torch.zeros_like(x), torch.ones_like(x, dtype=torch.int64), torch.full_like(x, 7.0), \
        torch.empty_like(x).zero_(), x.new_zeros(2, 2), x.new_ones((3,)), x.new_full((2,), 1.5)


@case(inputs=lambda g: (randn(g, 5, 3),))
def factory_arange_linspace(x):
    n = x.shape[0]
    return torch.arange(n), torch.arange(1, n, 2), torch.arange(0, 1, 0.25), torch.arange(n, dtype=torch.float32) * x[:, 0], \
        torch.linspace(0, 1, steps=n), torch.eye(n), torch.eye(2, 3, dtype=torch.int64)


@case(inputs=x34)
def factory_tensor_literals(x):
    w = torch.tensor([1.0, 2.0, 3.0, 4.0])
    i = torch.tensor([[1, 2], [3, 4]])
    s = torch.tensor(2.5)
    return x * w, i * 2, x + s, torch.as_tensor([1, 0, 1], dtype=torch.bool)


@case(inputs=lambda g: (randn(g, 4, 6),))
def factory_causal_mask(x):
    t = x.shape[0]
    mask = torch.tril(torch.ones(t, t)).view(1, t, t)
    return mask, torch.ones(t, t, dtype=torch.bool).triu(1), x[:, :t].masked_fill(mask[0] == 0, float("-inf"))


@case(inputs=x34)
def factory_random_seeded(x):
    return x + torch.randn(3, 4), torch.rand_like(x), torch.randint(0, 10, (5,)), torch.randperm(4)


# ---------------------------------------------------------------------------------------------
# Dtypes: float16, bfloat16, int64, bool, conversions and promotion

@case(inputs=lambda g: (randn(g, 3, 4, dtype=torch.float16), randn(g, 3, 4, dtype=torch.float16)))
def dtype_float16_elementwise(x, y):
    return x + y, x * y, (x * 0.5).relu(), x.exp(), x.sum(dim=1), x.float().half()


@case(inputs=lambda g: (randn(g, 3, 4, dtype=torch.bfloat16), randn(g, 4, 5, dtype=torch.bfloat16)))
def dtype_bfloat16_matmul(x, w):
    return x @ w, torch.softmax(x, -1), F.gelu(x), x.mean(-1)


@case(inputs=lambda g: (randn(g, 3, 8, dtype=torch.bfloat16), randn(g, 8, dtype=torch.bfloat16)))
def dtype_bfloat16_norm(x, w):
    return F.layer_norm(x, (8,), w), F.rms_norm(x, (8,), w), F.silu(x) * x


@case(inputs=lambda g: (randint(g, 0, 100, 3, 4), randint(g, 1, 7, 4)))
def dtype_int64_arith(a, b):
    return a // b, a % b, a * b + 1, a.sum(dim=0), a.max(), (a > 50).long(), torch.div(a, b, rounding_mode="floor")


@case(inputs=lambda g: (randbool(g, 3, 4), randn(g, 3, 4)))
def dtype_bool_ops(m, x):
    return m.float() * x, m.sum(), m.logical_and(x > 0), torch.logical_not(m), m.int(), torch.logical_or(m, x < -1)


@case(inputs=lambda g: (randint(g, 0, 5, 3, 4), randn(g, 3, 4), randn(g, 3, 4, dtype=torch.float16)))
def dtype_promotion(i, f, h):
    return i + f, i * 0.5, i / 2, f + h, h * 2, h + i, (i > 2) + i, i.float() + torch.tensor(1, dtype=torch.float64)


@case(inputs=x34)
def dtype_conversions(x):
    return x.to(torch.bfloat16), x.to(dtype=torch.float16), x.double(), x.long(), x.int(), x.bool(), \
        x.half().float(), x.to(x.dtype), x.to("cpu"), x.type(torch.float64)


@case(inputs=lambda g: (randn(g, 3, 4), ), note="dtype chosen at trace time from a Python dict")
def dtype_from_python_table(x):
    table = {"half": torch.float16, "full": torch.float32}
    return x.to(table["half"]), torch.zeros(2, dtype=table["full"]), torch.finfo(x.dtype).eps * x, \
        torch.iinfo(torch.int32).max


@case(inputs=lambda g: (randn(g, 3, 4), randint(g, 0, 5, 3, 4)))
def dtype_int_true_division(f, i):
    return i / 2, torch.true_divide(i, 3), i.div(2, rounding_mode="trunc"), (i * f).dtype


# ---------------------------------------------------------------------------------------------
# The issue's own examples, one construct per case

@case(inputs=x34)
def factory_zeros_from_input_shape_and_device(x):
    z = torch.zeros(x.shape[0], 4, device=x.device)
    return x + z


@case(inputs=x34)
def factory_arange_used_with_input(x):
    return x + torch.arange(x.shape[1])


@case(inputs=x34)
def factory_ones_tril_mask(x):
    t = x.shape[0]
    mask = torch.ones(t, t).tril()
    return x[:, :t].masked_fill(mask == 0, 0.0)


@case(inputs=x34)
def factory_result_returned_only(x):
    return torch.zeros(2, 3), torch.arange(5), x + 1


@case(inputs=x34)
def tensor_T_attribute(x):
    return x.T, x.T.shape, x.T @ x


@case(inputs=x34)
def tensor_to_same_device(x):
    return x.to(x.device), x.to("cpu"), x.cpu(), x.to(device=x.device, dtype=torch.float64)


@case(inputs=lambda g: (randn(g, 2, 3),), note="tensor.layout is not named by the issue")
def tensor_layout_attribute(x):
    return x + (x.layout == torch.strided)


@case(inputs=lambda g: (randn(g, 2, 3, requires_grad=True),), counters="eager", fallback_marker="is-leaf",
      note="is_leaf of an input that requires grad is not guarded: the frame runs eagerly")
def tensor_is_leaf_attribute(x):
    y = x * 2
    return y, x.is_leaf, y.is_leaf  # FALLBACK is-leaf


@case(inputs=lambda g: (randn(g, 3, 4),))
def reduce_max_namedtuple_fields(x):
    m = x.max(dim=1)
    return m.values + 1, m.indices, x.sort(dim=0).values
