"""Training graphs at run time: the torch.autograd.Function that joins a compiled forward and a
compiled backward (src/runtime/training_runner.h), and the backward of autograd islands.

The C++ driver builds one `TrainingGraph` per compiled training graph and calls
`CompiledFunction.apply(graph, *inputs)` on every call. The Function's forward runs the forward
executable, which returns the user's outputs and then the values the backward needs; the backward
runs the backward executable on those values, the primals it reads, and the incoming gradients
(docs/autograd.md).
"""
import torch

from .python_table import resolve_path


class TrainingGraph:
    """The two executables of a training graph and how their inputs and outputs line up."""

    __slots__ = ("forward", "backward", "forward_outputs", "tangent_of_output", "grad_of_primal",
                 "saved_primals", "kept", "tangents_of_gradient", "saved_strides")

    def __init__(self, forward, backward, forward_outputs, tangent_of_output, grad_of_primal, saved_primals,
                 passthrough, tangents_of_gradient, saved_strides):
        self.forward = forward                      # f(primals) -> user outputs + saved values
        self.backward = backward                    # f(saved + saved primals + tangents) -> gradients
        self.forward_outputs = forward_outputs      # how many of the forward's outputs are the user's
        self.tangent_of_output = tangent_of_output  # per user output: its tangent index, -1 if none
        self.grad_of_primal = grad_of_primal        # per primal: index among the gradients, -1 if none
        self.saved_primals = saved_primals          # primals the backward reads
        # The user outputs the Function returns: not those that are inputs themselves, which the
        # runner returns as they are (a Function returning its input would make it a non-leaf).
        self.kept = [i for i in range(forward_outputs) if i not in passthrough]
        # Per gradient: the tangents it depends on; a gradient none of whose tangents flows is None.
        self.tangents_of_gradient = tangents_of_gradient
        # Per saved value: the strides the backward reads it with (None: symbolic, not checked).
        self.saved_strides = saved_strides


class CompiledFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, graph, *primals):
        outs = graph.forward(primals)
        user = _unviewed(tuple(outs[i] for i in graph.kept), primals)
        ctx.graph = graph
        ctx.ints = len(primals) - len(graph.grad_of_primal)
        ctx.set_materialize_grads(False)  # an output no gradient reaches arrives as None (see backward)
        ctx.save_for_backward(*outs[graph.forward_outputs:], *(primals[i] for i in graph.saved_primals))
        # Shapes of the differentiable outputs, for a zero gradient where none flows.
        ctx.tangent_meta = [(o.shape, o.dtype, o.device) for o, t in zip(outs, graph.tangent_of_output) if t >= 0]
        fixed = [o for i, o in zip(graph.kept, user) if graph.tangent_of_output[i] < 0 and o.is_floating_point()]
        if fixed:
            ctx.mark_non_differentiable(*fixed)
        return user

    @staticmethod
    def backward(ctx, *grads):
        graph = ctx.graph
        if torch.is_grad_enabled():
            raise RuntimeError(
                "ember: double backward (create_graph=True) through a compiled training graph is not supported; "
                "compute higher-order gradients with the function run eagerly (ember.disable)")
        given = dict(zip(graph.kept, grads))
        tangents, flows = [], []
        for i, t in enumerate(graph.tangent_of_output):
            if t < 0:
                continue
            g = given.get(i)
            flows.append(g is not None)
            if g is None:  # none flows, or the output is an input returned as it is (torch routes its grad)
                shape, dtype, device = ctx.tangent_meta[len(tangents)]
                g = torch.zeros(shape, dtype=dtype, device=device)
            tangents.append(g.contiguous())
        args = list(ctx.saved_tensors)
        # The backward executable frees each saved tensor after its last use (it empties `args`, which
        # then holds the only references): ctx's are dropped first, unless retain_graph keeps them.
        ctx.maybe_clear_saved_tensors()
        for i, want in enumerate(graph.saved_strides):
            if want is not None and any(n > 1 and s != w for n, s, w in zip(args[i].shape, args[i].stride(), want)):
                # An extern call's result laid out otherwise than its meta kernel said: copied to that layout.
                args[i] = torch.empty_strided(args[i].shape, want, dtype=args[i].dtype,
                                              device=args[i].device).copy_(args[i])
        args += tangents
        del tangents
        results = graph.backward(args)
        # A gradient that only unused outputs would carry stays None, as eager leaves it. The ints after
        # the primals (the values of int symbols) get None.
        grads = tuple(results[j] if j >= 0 and any(flows[t] for t in graph.tangents_of_gradient[j]) else None
                      for j in graph.grad_of_primal)
        return (None, *grads, *(None,) * ctx.ints)


def _unviewed(user, primals):
    """The Function's outputs with each view that shares its storage with no other output and no primal (a
    view of an intermediate: a 3-d linear's result reshaped from its matmul) replaced by a detached alias of
    it: the same storage and version counter, but not a view to autograd. Why: torch refuses an in-place
    write to a view that a custom Function returns ("... is the output of a function that returns multiple
    views"), and eager code after a graph break writes into such outputs (transformers' wav2vec2:
    `hidden_states[mask] = embed`). Nothing else can see that storage but the values saved for the backward,
    whose shared version counter makes a write to them an error at backward, as in eager. A view that
    aliases another output or a primal stays a view: a write through it must reach what autograd sees
    through the other name, and torch refuses it loudly."""
    def storage(t):
        return t.untyped_storage().data_ptr() if isinstance(t, torch.Tensor) and t.layout == torch.strided else None
    shared = {}
    for t in (*user, *primals):
        key = storage(t)
        if key:
            shared[key] = shared.get(key, 0) + 1
    return tuple(o.detach() if isinstance(o, torch.Tensor) and o._is_view() and shared.get(storage(o)) == 1 else o
                 for o in user)


def _tensors(value, out):
    if isinstance(value, torch.Tensor):
        out.append(value)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _tensors(item, out)


def _with_leaves(value, needs, leaves, position):
    """`value` with each tensor it holds replaced, in order, by a detached leaf that requires grad
    where `needs` says so (collected into `leaves`)."""
    if isinstance(value, torch.Tensor):
        i = position[0]
        position[0] += 1
        if not needs[i]:
            return value.detach()
        leaf = value.detach().requires_grad_(True)
        leaves.append(leaf)
        return leaf
    if isinstance(value, (list, tuple)):
        return type(value)(_with_leaves(item, needs, leaves, position) for item in value)
    return value


def island_backward(callable_name, needs, grads, /, *args, **kwargs):
    """The backward of an autograd island: recomputes `callable_name(*args, **kwargs)` with grad
    enabled on fresh leaves and returns the gradients of the tensor arguments that need one (in
    argument order, keywords last), given the gradients `grads` of its results (None: none flows)."""
    fn = resolve_path(callable_name)
    leaves, position = [], [0]
    args = _with_leaves(args, needs, leaves, position)
    kwargs = {k: _with_leaves(v, needs, leaves, position) for k, v in kwargs.items()}
    with torch.enable_grad():
        result = fn(*args, **kwargs)
    outs = []
    _tensors(result, outs)
    pairs = [(o, g) for o, g in zip(outs, grads) if g is not None and o.requires_grad]
    if not pairs:
        return tuple(torch.zeros_like(leaf) for leaf in leaves)
    got = torch.autograd.grad([o for o, _ in pairs], leaves, [g for _, g in pairs], allow_unused=True)
    return tuple(torch.zeros_like(leaf) if g is None else g for leaf, g in zip(leaves, got))


def conv_grads(dims, grad_output, input, weight, stride=1, padding=0, dilation=1, groups=1):
    """(input's gradient, weight's gradient) of torch.convNd (dims = N) from one aten.convolution_backward
    call, as torch autograd asks for them: two calls, one per gradient (torch.nn.grad's convNd_input and
    convNd_weight), redo the work they share (oneDNN's reorders of grad_output), 1.6x the conv backward's
    time on the bench's conv net (docs/autograd.md)."""
    n = torch.nn.modules.utils._ntuple(dims)
    grad_input, grad_weight, _ = torch.ops.aten.convolution_backward(
        grad_output, input, weight, None, n(stride), n(padding), n(dilation), False, n(0), groups, [True, True, False])
    return grad_input, grad_weight


# Attention's training form on CUDA (src/autograd/training_forms.cpp): the output and the logsumexp of the
# scaled scores ([B, H, L], float32 for the half types), from the kernel scaled_dot_product_attention runs on
# these inputs (torch's own choice: cuDNN, flash or memory-efficient attention, else the math form, which also
# serves tensors off CUDA), and the gradients from the kernel it runs at the backward. Every kernel's logsumexp
# is the same quantity, so the two halves need not agree on a kernel (a backward outside the forward's
# `sdpa_kernel` context chooses afresh). Dropout is not modelled here (a call with dropout takes the math form
# in C++): the kernels' random-number state is unused at p = 0, and a placeholder stands for it.
_NO_RNG = {}  # device -> placeholder (cuDNN's backward wants it on the tensors' device)


def _no_rng(device):
    if device not in _NO_RNG:
        _NO_RNG[device] = torch.zeros((), dtype=torch.int64, device=device)
    return _NO_RNG[device]
_KERNELS = {1: "flash", 2: "efficient", 3: "cudnn"}  # torch._fused_sdp_choice's codes (SDPBackend)


def _attention_kernel(q, k, v, mask, is_causal, scale):
    if not q.is_cuda:
        return "math"
    return _KERNELS.get(torch._fused_sdp_choice(q, k, v, mask, 0.0, is_causal, scale=scale), "math")


def _attention_bias(mask, q, k):
    """The additive mask as memory-efficient attention reads it (what torch's sdpa passes it): broadcast to
    [B, H, L, S], its rows 16 elements aligned (a copy padded with zeros where they are not)."""
    size = (q.size(0), q.size(1), q.size(2), k.size(2))
    if mask.size(-1) % 16 == 0 and mask.stride(-1) == 1 and all(s % 16 == 0 for s in mask.stride()[:-1]):
        return mask.expand(size)
    padded = mask.new_zeros((*mask.shape[:-1], -(-mask.size(-1) // 16) * 16))[..., :mask.size(-1)]
    return padded.copy_(mask).expand(size)


def _attention_scores(q, k, mask, is_causal, scale):
    """The math form's scaled scores in the accumulation dtype (float32 for the half types)."""
    acc = torch.promote_types(q.dtype, torch.float32)
    scores = q.to(acc) @ k.to(acc).transpose(-2, -1) * (q.size(-1) ** -0.5 if scale is None else scale)
    if is_causal:
        keep = torch.ones(q.size(-2), k.size(-2), dtype=torch.bool, device=q.device).tril()
        return scores.masked_fill(keep.logical_not(), float("-inf"))
    return scores if mask is None else scores + mask


def cuda_attention(q, k, v, mask, is_causal, scale):
    kind = _attention_kernel(q, k, v, mask, is_causal, scale)
    aten = torch.ops.aten
    if kind == "cudnn":
        out, lse = aten._scaled_dot_product_cudnn_attention(q, k, v, mask, True, 0.0, is_causal, False, scale=scale)[:2]
        return out, lse.reshape(lse.shape[:3])  # [B, H, L, 1]
    if kind == "flash":
        return aten._scaled_dot_product_flash_attention(q, k, v, 0.0, is_causal, False, scale=scale)[:2]
    if kind == "efficient":
        bias = None if mask is None else _attention_bias(mask, q, k)
        out, lse = aten._scaled_dot_product_efficient_attention(q, k, v, bias, True, 0.0, is_causal, scale=scale)[:2]
        return out, lse[..., :q.size(-2)]  # its rows are padded to a multiple of 32
    scores = _attention_scores(q, k, mask, is_causal, scale)
    lse = torch.logsumexp(scores, -1)
    return (torch.exp(scores - lse.unsqueeze(-1)) @ v.to(scores.dtype)).to(q.dtype), lse


def _forward_layout(kind, q):
    """The strides of the output the fused kernel `kind` gives for this q: cuDNN and flash lay it out in q's
    dimension order, dense (torch's alloc_with_matching_layout, empty_like); memory-efficient attention as
    [B, L, H, D] transposed to [B, H, L, D]."""
    order = [0, 2, 1, 3] if kind == "efficient" else sorted(range(q.dim()), key=lambda d: -q.stride(d))
    strides, step = [0] * q.dim(), 1
    for d in reversed(order):
        strides[d] = step
        step *= q.size(d)
    return tuple(strides)


def _laid_out(t, strides):
    if t.stride() == strides:
        return t
    return torch.empty_strided(t.shape, strides, dtype=t.dtype, device=t.device).copy_(t)


def cuda_attention_backward(grad, q, k, v, mask, out, lse, is_causal, scale):
    """(q's, k's, v's gradient) of cuda_attention(q, k, v, mask, is_causal, scale) = (out, lse)."""
    kind = _attention_kernel(q, k, v, mask, is_causal, scale)
    aten = torch.ops.aten
    if kind != "math":
        # The backward kernels read the output, and its gradient, in the layout their forward gave it: in
        # another one, torch 2.11's cuDNN and memory-efficient backwards return wrong gradients (cuDNN when
        # its cached plan was built for the other layout; measured on the H200, 2026-12-03).
        out = _laid_out(out, _forward_layout(kind, q))
        grad = _laid_out(grad, out.stride())
    if kind == "cudnn":
        return aten._scaled_dot_product_cudnn_attention_backward(
            grad, q, k, v, out, lse.unsqueeze(-1), _no_rng(q.device), _no_rng(q.device), mask, None, None, q.size(2),
            k.size(2), 0.0,
            is_causal, scale=scale)
    if kind == "flash":
        return aten._scaled_dot_product_flash_attention_backward(
            grad, q, k, v, out, lse, None, None, q.size(2), k.size(2), 0.0, is_causal, _no_rng(q.device),
            _no_rng(q.device), scale=scale)
    if kind == "efficient":
        bias = None if mask is None else _attention_bias(mask, q, k)
        rows = -(-q.size(-2) // 32) * 32
        padded = torch.nn.functional.pad(lse, (0, rows - lse.size(-1)))
        return aten._scaled_dot_product_efficient_attention_backward(
            grad, q, k, v, bias, out, padded, _no_rng(q.device), _no_rng(q.device), 0.0, [True, True, True, False],
            is_causal,
            scale=scale)[:3]
    scores = _attention_scores(q, k, mask, is_causal, scale)
    probs = torch.exp(scores - lse.unsqueeze(-1))
    g = grad.to(probs.dtype)
    grad_v = probs.transpose(-2, -1) @ g
    dprobs = g @ v.to(probs.dtype).transpose(-2, -1)
    dscores = probs * (dprobs - (g * out.to(probs.dtype)).sum(-1, keepdim=True))
    factor = q.size(-1) ** -0.5 if scale is None else scale
    grad_q = dscores @ k.to(probs.dtype) * factor
    grad_k = dscores.transpose(-2, -1) @ q.to(probs.dtype) * factor
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype)
