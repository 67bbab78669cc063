"""`ember.compile(opt.step)` for torch.optim's SGD, Adam and AdamW (docs/autograd.md, "Optimizers").

torch.optim's `step()` lives in torch's files, which the frame hook never traces, and its code reads
per-parameter state from a dict keyed by tensors, branches on `torch.compiler.is_compiling()`, wraps
itself in a profiler scope and calls `_foreach_*` kernels. Ember does not trace that code: it traces
its own update (`_UPDATE_SOURCE`, the arithmetic of torch's non-capturable single-tensor step, op for
op) over the lists `step()` would build. One graph computes every group's new parameters and state
tensors and writes them back with one `torch._foreach_copy_`, which the scheduler turns into the
kernels' own stores into the optimizer's tensors (one pass over memory per tensor, as torch's fused
step); the step counters advance in the same graph (`step + 1` written back like the state: one grouped
kernel for all of them on the C++ target, where a `torch._foreach_add_` over 76 one-element tensors cost
about 0.15 ms of every call), or, for the counters torch keeps on the CPU for CUDA parameters, in a
compiled CPU graph of their own (`advance`) just before.

Guards and recompiles: the lists are read whole (their lengths and each tensor's metadata are
guarded); the per-parameter scalars that depend on lr and the step count are a small tensor made on
each call, so a scheduler changing lr does not recompile; the other hyperparameters are Python values
guarded by equality (changing `betas` or `weight_decay` recompiles).

What runs eagerly (torch's own `step()`, with the reason in `CompiledStep.eager_reason`, in
`ember.explain` and on the `fallbacks` log channel): the first step of a parameter (torch creates its
state lazily), a `closure`, step hooks, an optimizer class other than exactly SGD / Adam / AdamW, and
the options the traced update does not model (differentiable, capturable, sparse or complex gradients,
tensor betas, a group on several devices).
"""
import torch

# Traced by Ember's interpreter: its code must live outside Ember's and torch's files (the hook and
# the interpreter skip those), hence source text compiled under a file name of its own. The
# arithmetic follows torch's `_single_tensor_adam` / `_single_tensor_sgd` with non-capturable state.
# The factors torch computes in Python floats from lr and the step count (bias corrections, step size,
# decay) come in `scalars`, computed the same way by CompiledStep; `.to(dtype)` gives the value torch's
# kernels use for a Python-float factor.
_UPDATE_SOURCE = '''
def adam_update(groups):
    writes = []
    for (params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, scalars, beta1, beta2, eps, weight_decay,
         decoupled, amsgrad, maximize) in groups:
        for i in range(len(params)):
            if steps:
                writes.append((steps[i], steps[i] + 1))
            param = params[i]
            dtype = param.dtype
            grad = -grads[i] if maximize else grads[i]
            new_param = param
            if weight_decay != 0:
                if decoupled:
                    new_param = param * scalars[i, 2].to(dtype)
                else:
                    grad = grad.add(param, alpha=weight_decay)
            exp_avg = lerp(exp_avgs[i], grad, 1 - beta1)
            exp_avg_sq = exp_avg_sqs[i] * beta2 + grad * (1 - beta2) * grad
            denom_sq = exp_avg_sq
            if amsgrad:
                denom_sq = torch.maximum(max_exp_avg_sqs[i], exp_avg_sq)
                writes.append((max_exp_avg_sqs[i], denom_sq))
            denom = denom_sq.sqrt() / scalars[i, 0].to(dtype) + eps
            writes += [(exp_avgs[i], exp_avg), (exp_avg_sqs[i], exp_avg_sq),
                       (param, new_param + exp_avg / denom * scalars[i, 1].to(dtype))]
    write_back(writes)


def lerp(start, end, weight):
    # torch's CPU lerp with a scalar weight, in its two halves.
    if abs(weight) < 0.5:
        return start + (end - start) * weight
    return end - (end - start) * (1 - weight)


def sgd_update(groups):
    writes = []
    for params, grads, bufs, scalars, weight_decay, momentum, dampening, nesterov, maximize in groups:
        for i in range(len(params)):
            param = params[i]
            grad = -grads[i] if maximize else grads[i]
            if weight_decay != 0:
                grad = grad.add(param, alpha=weight_decay)
            if momentum != 0:
                buf = bufs[i] * momentum + grad * (1 - dampening)
                writes.append((bufs[i], buf))
                grad = grad.add(buf, alpha=momentum) if nesterov else buf
            writes.append((param, param + grad * scalars[0].to(param.dtype)))
    write_back(writes)


def advance(steps):
    # The step counters torch keeps on the CPU for CUDA parameters (neither fused nor capturable): a
    # graph of their own on the CPU, one grouped kernel.
    write_back([(step, step + 1) for step in steps])


def write_back(writes):
    # After every new value is computed, so that no in-place node sits between two kernels (it would stop
    # their fusion); one node, not one per tensor (the scheduler's hazard checks grow with in-place
    # nodes). The scheduler makes each pair a store of the kernel computing the value into the tensor
    # (docs/scheduler.md, "Stores into inputs"): no temporary, no copy.
    torch._foreach_copy_([w[0] for w in writes], [w[1] for w in writes])
'''
_namespace = {"torch": torch}
exec(compile(_UPDATE_SOURCE, "<ember optimizer step>", "exec"), _namespace)


FIRST_STEP_REASONS = ("the first step of a parameter creates its state",
                      "the first step creates the momentum buffers")


def is_optimizer_step(fn):
    """Whether `fn` is the bound `step` of a torch.optim optimizer (any class)."""
    owner = getattr(fn, "__self__", None)
    return isinstance(owner, torch.optim.Optimizer) and getattr(fn, "__name__", "") == "step"


def _on_device(rows, dtype, device):
    """A small tensor of per-step factors on the parameters' device. On CUDA it goes through pinned memory
    with a non-blocking copy: `torch.tensor(rows, device=cuda)` copies from pageable memory, which
    synchronizes the stream, so each step waited for the GPU to finish the work queued before it (the
    backward's kernels, in a training loop) instead of queueing its own behind them, as torch's fused step
    does."""
    if device.type != "cuda":
        return torch.tensor(rows, dtype=dtype, device=device)
    return torch.tensor(rows, dtype=dtype, pin_memory=True).to(device, non_blocking=True)


def _scalar_dtype(params):
    # torch's kernels take a Python-float factor as float32 for float32, bfloat16 and float16 tensors
    # (their compute type) and as a double for float64 ones; float32 factors also keep the kernels
    # vectorized (a float64 value makes the C++ backend's loop scalar).
    return torch.float64 if any(p.dtype == torch.float64 for p in params) else torch.float32


class CompiledStep:
    """`ember.compile(opt.step)`: calls the compiled update, or torch's own step when it must."""

    def __init__(self, step, compile_fn, report, unsupported=None):
        # report(info): a "fallback" event for explain() and EMBER_LOGS=fallbacks, as the C++ side sends.
        self._report = report
        # fullgraph=True: the exception class raised for a step that cannot run compiled (the lazy
        # creation of state on a parameter's first step is expected, never raised).
        self._unsupported_error = unsupported
        self._eager_step = step
        self.optimizer = step.__self__
        kind = {torch.optim.SGD: "sgd", torch.optim.Adam: "adam", torch.optim.AdamW: "adam"}.get(
            type(self.optimizer))
        self._kind = kind
        self._update = compile_fn(_namespace[f"{kind}_update"]) if kind else None
        self._advance = compile_fn(_namespace["advance"]) if kind == "adam" else None
        # Why the latest call ran torch's own step (None: it ran the compiled update).
        self.eager_reason = None if kind else (
            f"{type(self.optimizer).__qualname__}: only SGD, Adam and AdamW steps are compiled")

    def __call__(self, closure=None):
        reason = self._unsupported(closure)
        groups = outside = None
        if reason is None:
            groups, outside = self._groups()
            if isinstance(groups, str):
                reason = groups
        self.eager_reason = reason
        if reason is not None:
            if self._unsupported_error is not None and reason not in FIRST_STEP_REASONS:
                raise self._unsupported_error(f"{type(self.optimizer).__qualname__}.step: {reason}")
            code = getattr(type(self.optimizer).step, "__wrapped__", type(self.optimizer).step).__code__
            self._report({"code": f"{type(self.optimizer).__qualname__}.step", "reason": reason,
                          "filename": code.co_filename, "lineno": code.co_firstlineno, "internal_error": False})
            self.optimizer._opt_called = True  # see below
            return self._eager_step(closure)
        with torch.no_grad():
            if outside:
                # A compiled CPU graph: torch._foreach_add_ over 76 one-element tensors cost 1.4 us a
                # counter (torch's profiler on the H100 host).
                self._advance(outside)
            self._update(groups)
        # What LRScheduler's wrapper of step() records (it warns when scheduler.step() comes first), set
        # whether the scheduler wrapped step() before or after ember.compile took it.
        self.optimizer._opt_called = True
        return None

    def _unsupported(self, closure):
        from torch.optim import optimizer as optimizer_module
        if self._kind is None:
            return self.eager_reason
        if closure is not None:
            return "a closure (it runs the model under autograd)"
        opt = self.optimizer
        if (opt._optimizer_step_pre_hooks or opt._optimizer_step_post_hooks
                or optimizer_module._global_optimizer_pre_hooks or optimizer_module._global_optimizer_post_hooks):
            return "step hooks are registered"
        for group in opt.param_groups:
            if group.get("differentiable") or group.get("capturable"):
                return "a differentiable or capturable param group"
            if self._kind == "adam" and any(isinstance(b, torch.Tensor) for b in group["betas"]):
                return "tensor betas"
        return None

    def _groups(self):
        """(the traced update's argument, the step counters it does not advance), or (why this call runs
        eagerly, None). Counters on the parameters' device advance in the graph; torch keeps them on the CPU
        for CUDA parameters unless fused or capturable, and those advance outside it."""
        state = self.optimizer.state
        groups, outside = [], []
        for group in self.optimizer.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            grads = [p.grad for p in params]
            if any(g.is_sparse or p.is_complex() for p, g in zip(params, grads)):
                return "sparse gradients or complex parameters", None
            device = params[0].device if params else torch.device("cpu")
            if any(p.device != device for p in params):
                return "a param group on several devices", None
            states = [state.get(p) for p in params]
            lr = group["lr"]
            lr = lr.item() if isinstance(lr, torch.Tensor) else lr
            if self._kind == "sgd":
                momentum = group["momentum"]
                bufs = []
                if momentum != 0:
                    bufs = [s.get("momentum_buffer") if s else None for s in states]
                    if any(b is None for b in bufs):
                        return FIRST_STEP_REASONS[1], None
                scalars = _on_device([-lr], _scalar_dtype(params), device)
                groups.append((params, grads, bufs, scalars, group["weight_decay"], momentum, group["dampening"],
                               group["nesterov"], group["maximize"]))
                continue
            if any(not s for s in states):
                return FIRST_STEP_REASONS[0], None
            steps = [s["step"] for s in states]
            scalars = self._adam_scalars(group, lr, steps, _scalar_dtype(params), device)
            if any(t.device != device for t in steps):
                outside += steps
                steps = []
            decoupled = group.get("decoupled_weight_decay", isinstance(self.optimizer, torch.optim.AdamW))
            groups.append((params, grads, [s["exp_avg"] for s in states], [s["exp_avg_sq"] for s in states],
                           [s["max_exp_avg_sq"] for s in states] if group["amsgrad"] else [], steps, scalars,
                           *group["betas"], group["eps"], group["weight_decay"], decoupled, group["amsgrad"],
                           group["maximize"]))
        return groups, outside

    @staticmethod
    def _adam_scalars(group, lr, steps, dtype, device):
        """Per parameter: bias_correction2 ** 0.5, -step_size, 1 - lr * weight_decay, computed as torch's
        non-capturable step computes them, in Python floats from the step count after this step. When
        every parameter has the same count (the usual case), one row expanded: the traced update reads
        the same values, and the call builds and copies 3 numbers instead of 3 per parameter (a graph
        of its own: the expanded rows' strides are guarded)."""
        beta1, beta2 = group["betas"]
        decay = 1 - lr * group["weight_decay"]

        def row(step):
            step += 1
            return ((1 - beta2 ** step) ** 0.5, -(lr / (1 - beta1 ** step)), decay)

        counts = torch.stack(steps).tolist() if steps else []
        if counts and counts.count(counts[0]) == len(counts):
            return _on_device(row(counts[0]), dtype, device).expand(len(counts), 3)
        return _on_device([row(step) for step in counts], dtype, device).reshape(len(counts), 3)
