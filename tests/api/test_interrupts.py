"""A KeyboardInterrupt that lands during a compiled call -- raised by a callback the frame calls,
by a signal handler at any point, or inside a meta kernel while the frame is being traced --
reaches the caller as itself, and leaves Ember usable: the next calls are right, the eval-frame
hook is uninstalled, and nothing about the interrupt is cached (no graph break, no eager frame)."""
import signal
import sys
import time

import pytest
import torch

import ember
from ember import _C

hook_installed = _C.eval_frame.hook_installed


def _interrupt_on(n):
    """A callback that raises KeyboardInterrupt on its n-th call."""
    calls = [0]

    def callback():
        calls[0] += 1
        if calls[0] == n:
            raise KeyboardInterrupt

    return callback


@pytest.mark.parametrize("at_call", [1, 3])
def test_interrupt_from_a_callback(at_call):
    callback = _interrupt_on(at_call)

    def f(x):
        y = x.sin() * 2
        callback()  # traced inline; where it raises, the frame breaks here and CPython raises it
        return y.cos() + 1

    cf = ember.compile(f)
    x = torch.randn(8)
    want = (x.sin() * 2).cos() + 1
    for i in range(5):
        if i + 1 == at_call:
            with pytest.raises(KeyboardInterrupt):
                cf(x)
            assert not hook_installed()
        else:
            torch.testing.assert_close(cf(x), want)
    assert not hook_installed()
    assert ember.stats()["eager_frames"] == 0


def _interrupted_at(function_name, call):
    """Runs call() with a trace function that raises KeyboardInterrupt when a Python function named
    `function_name` starts (the first time), and checks that the interrupt reached the caller."""
    armed = [True]

    def interrupt(frame, event, arg):
        if armed[0] and event == "call" and frame.f_code.co_name == function_name:
            armed[0] = False
            raise KeyboardInterrupt
        return None

    sys.settrace(interrupt)
    try:
        with pytest.raises(KeyboardInterrupt):
            call()
    finally:
        sys.settrace(None)
    assert not armed[0] and not hook_installed()


# While Ember traces a frame it runs torch's meta kernels, many of them Python (torch.cdist's is
# meta_cdist_forward in torch/_meta_registrations.py): a Ctrl-C lands there as often as anywhere.


def calls_cdist(x):
    return torch.cdist(x.exp(), x) + 1


def test_interrupt_inside_a_meta_kernel_while_tracing():
    cf = ember.compile(calls_cdist)
    x = torch.randn(4, 3)
    _interrupted_at("meta_cdist_forward", lambda: cf(x))
    s = ember.stats()
    assert (s["frames_compiled"], s["graph_breaks"], s["eager_frames"]) == (0, 0, 0), s
    # The interrupt was not remembered as a reason to break the frame or run it eagerly.
    torch.testing.assert_close(cf(x), calls_cdist(x))
    s = ember.stats()
    assert (s["frames_compiled"], s["graph_breaks"], s["eager_frames"]) == (1, 0, 0), s


# torch.cdist is Python (torch/functional.py): a graph runs it as an extern call, so an interrupt
# can land inside a compiled graph while it runs.
def calls_cdist_between_kernels(x):
    return torch.cdist(x.sin(), x) + 1


def test_interrupt_inside_a_running_graph():
    cf = ember.compile(calls_cdist_between_kernels)
    x = torch.randn(3, 3)
    torch.testing.assert_close(cf(x), calls_cdist_between_kernels(x))
    _interrupted_at("cdist", lambda: cf(x))
    torch.testing.assert_close(cf(x), calls_cdist_between_kernels(x))
    s = ember.stats()
    assert (s["frames_compiled"], s["cache_hits"], s["graph_breaks"], s["eager_frames"]) == (1, 1, 0, 0), s


def _graphs(x):
    for _ in range(3):
        x = torch.tanh(x @ x.T)[:, :x.shape[1]] if x.shape[0] >= x.shape[1] else torch.tanh(x)
    return x.sum(0)


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs signal.setitimer")
def test_interrupts_from_a_signal_handler_at_random_points():
    """SIGALRM after 50 to 1,250 microseconds, again and again for a while, over calls that compile
    (four shapes, first calls included, compiled afresh every 8 rounds) and calls that hit the cache: wherever the interrupt lands, it
    reaches the caller, and afterwards every shape gives eager's result with no break or eager frame.
    The handler is signal.default_int_handler (C code, as for Ctrl-C): a Python handler's own frame
    would be traced in turn, and its `raise` would be a graph break of its own."""
    shapes = [(64, 32), (32, 32), (128, 16), (16, 16)]
    cf = ember.compile(_graphs)
    previous = signal.signal(signal.SIGALRM, signal.default_int_handler)
    interrupted = 0
    try:
        end = time.monotonic() + 3.0
        rounds = 0
        while time.monotonic() < end:
            rounds += 1
            if rounds % 8 == 0:
                # Compiling again from time to time: with warm kernel caches the four first calls
                # can all finish before the shortest alarm, and cache hits are shorter still.
                ember.reset()
            try:
                try:
                    signal.setitimer(signal.ITIMER_REAL, 0.00005 + (rounds % 7) * 0.0002)
                    for s in shapes:
                        a = torch.randn(*s)
                        torch.testing.assert_close(cf(a), _graphs(a))
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)  # one-shot: nothing fires after this
            except KeyboardInterrupt:
                interrupted += 1
            assert not hook_installed()
    finally:
        signal.signal(signal.SIGALRM, previous)
    assert interrupted > 0
    for s in shapes:
        a = torch.randn(*s)
        torch.testing.assert_close(cf(a), _graphs(a))
    stats = ember.stats()
    assert stats["graph_breaks"] == 0 and stats["eager_frames"] == 0, stats
    assert not hook_installed()
