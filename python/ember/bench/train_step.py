"""One training step as the `train` suite and its fresh-process probe run it, for eager PyTorch and a compiler alike.

Needs: a model from train_workloads.build (train mode, on its device) and the step's arguments.
Guarantees: `make_runner` compiles what a user compiles — the model with `compiler.compile(model)` and, with
AdamW, the optimizer's step with `compiler.compile(opt.step)` (`ember.compile(opt.step)` /
`torch.compile(opt.step)`) — over an optimizer made exactly as eager's (torch's default flags: a for-loop step
on the CPU, foreach on CUDA); `phases` runs one step from gradients set to None, seeded, each phase finished
before the next starts (on CUDA: synchronized), and returns the seconds of each.
Why phases are timed inside one step rather than as separate callables: a backward needs its own forward, and
timing the step whole and its forward alone would give the backward only as a difference of two noisy medians.
"""
import dataclasses
import time

from . import train_workloads

ADAMW = {"lr": 1e-3, "weight_decay": 0.1}
PHASES = ("forward", "backward", "optimizer")


@dataclasses.dataclass
class Runner:
    model: object       # the module whose parameters the step updates (for clearing gradients)
    forward: object     # the callable the step calls: the model itself or its compiled form
    args: tuple
    opt_step: object    # None without --adamw
    sync: object        # waits for queued device work (a no-op on the CPU)


def _sync(device):
    if device == "cuda":
        import torch
        return torch.cuda.synchronize
    return lambda: None


def make_runner(compiler, model, args, adamw, device):
    """A Runner for eager PyTorch (compiler None) or for `compiler` over `model` (which it then owns)."""
    opt_step = None
    if adamw:
        import torch
        opt_step = torch.optim.AdamW(model.parameters(), **ADAMW).step
    if compiler is None:
        return Runner(model, model, args, opt_step, _sync(device))
    return Runner(model, compiler.compile(model), args, opt_step and compiler.compile(opt_step), _sync(device))


def phases(runner, seed=0):
    """(forward s, backward s, optimizer s) of one step; the forward includes the loss, the optimizer is 0 without
    one. The loss is returned too: (seconds, loss)."""
    import torch
    for p in runner.model.parameters():
        p.grad = None
    torch.manual_seed(seed)
    start = time.perf_counter()
    loss = train_workloads.loss(runner.forward(*runner.args))
    runner.sync()
    forward_end = time.perf_counter()
    loss.backward()
    runner.sync()
    backward_end = time.perf_counter()
    if runner.opt_step is not None:
        runner.opt_step()
        runner.sync()
    return (forward_end - start, backward_end - forward_end, time.perf_counter() - backward_end), loss.detach()


def first_steps(adamw):
    """How many steps a compiler's first compile spans: with AdamW two, since the optimizer's first step creates
    its state (Ember runs that one eagerly and compiles the second; torch.compile compiles a graph per case)."""
    return 2 if adamw else 1
