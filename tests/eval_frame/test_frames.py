"""Frames: what the compiler receives, replaced frames (values, references, deep recursion,
errors), and the frames the hook passes through."""
import asyncio
import os
import sys
import sysconfig
import textwrap

import pytest

import ember
from ember._C import eval_frame as E
from conftest import Recorder


def always(args):
    return True


def replace_with(run):
    return lambda code, args: (run, always)


def f(x):
    return ("evaluated", x)


def test_replaced_frame_returns_the_entry_result_without_running():
    rec = Recorder({"f": replace_with(lambda a: ("replaced", a[0]))})
    assert rec.call(f, 5) == ("replaced", 5)


def test_arguments_arrive_in_slot_order():
    received = []

    def layout(a, b=2, *rest, c, d=4, **extra):
        return None

    def capture(code, args):
        received.append(args)
        return None

    rec = Recorder({"layout": capture})
    rec.call(layout, 1, 9, 8, c=3, e=5)
    rec.call(layout, 1, c=3)
    assert received == [(1, 9, 3, 4, (8,), {"e": 5}), (1, 2, 3, 4, (), {})]


def test_argument_that_is_a_cell_arrives_as_its_value():
    received = []

    def make_getter(x):
        return lambda: x

    def capture(code, args):
        received.append(args)
        return None

    rec = Recorder({"make_getter": capture})
    assert rec.call(make_getter, 11)() == 11
    assert received == [(11,)]


def test_no_reference_leaks_over_many_calls():
    token = object()
    other = object()
    results = []

    def keep(a):
        return a[0]

    def maybe(code, args):
        if args[0] is token:
            return (keep, lambda a: a[0] is token)
        return (None, lambda a: a[0] is other)  # an eager entry

    rec = Recorder({"f": maybe})

    def loop(n):
        for _ in range(n):
            results.append(f(token))
            f(other)
            results.clear()

    rec.call(loop, 10)
    base = (sys.getrefcount(token), sys.getrefcount(other), sys.getrefcount(f),
            sys.getrefcount(f.__code__))
    rec.call(loop, 10_000)
    assert (sys.getrefcount(token), sys.getrefcount(other), sys.getrefcount(f),
            sys.getrefcount(f.__code__)) == base
    assert rec.compiler.hits == 2 * 10_010 - 2


def test_no_reference_leaks_when_the_entry_raises():
    token = object()

    def fail(a):
        raise ValueError("from run")

    rec = Recorder({"f": replace_with(fail)})

    def loop(n):
        for _ in range(n):
            try:
                f(token)
            except ValueError:
                pass

    rec.call(loop, 10)
    base = sys.getrefcount(token)
    rec.call(loop, 10_000)
    assert sys.getrefcount(token) == base


def test_exception_from_run_propagates():
    def fail(a):
        raise ValueError(f"bad {a[0]}")

    def caller(x):
        try:
            return f(x)
        except ValueError as e:
            return ("caught", str(e))

    rec = Recorder({"f": replace_with(fail)})
    with pytest.raises(ValueError, match="bad 3"):
        rec.call(f, 3)
    assert rec.call(caller, 4) == ("caught", "bad 4")
    assert not E.hook_installed()


def test_exception_from_the_compiler_propagates():
    def broken(code, args):
        raise LookupError("compiler failed")

    rec = Recorder({"f": broken})
    with pytest.raises(LookupError, match="compiler failed"):
        rec.call(f, 1)


def test_exception_from_a_guard_propagates():
    def guard(args):
        if args[0] == 2:
            raise OverflowError("guard failed")
        return args[0] == 1

    rec = Recorder({"f": lambda code, args: (lambda a: "one", guard)})
    assert rec.call(f, 1) == "one"
    with pytest.raises(OverflowError, match="guard failed"):
        rec.call(f, 2)


def test_bad_decision_is_a_clear_error():
    rec = Recorder({"f": lambda code, args: "yes"})
    with pytest.raises(TypeError, match="decide"):
        rec.call(f, 1)


def recurse(n):
    return 0 if n == 0 else recurse(n - 1) + 1


# Deepest recursion that works with the hook installed on every version (3.12 stops at 748
# levels, notes in docs/frame-hook.md); deep enough to span several 16 KiB data-stack chunks.
DEPTH = 700


def test_deep_recursion_through_replaced_frames_crosses_datastack_chunks():
    deepest_chunks = []
    holder = []

    def run(args):
        n = args[0]
        if n == 0:
            deepest_chunks.append(E.testing_datastack_chunk_count())
            return 0
        return E.call_in_region(holder[0].compiler, recurse, (n - 1,)) + 1

    rec = Recorder({"recurse": replace_with(run)})
    holder.append(rec)
    token_chunks = E.testing_datastack_chunk_count()
    stats = E.hook_stats()
    for _ in range(3):
        assert rec.call(recurse, DEPTH) == DEPTH
    after = E.hook_stats()
    assert after["frames_replaced"] - stats["frames_replaced"] == 3 * (DEPTH + 1)
    # Several chunks were in use at the deepest point, and frames that opened a chunk were
    # released by Ember (on 3.12 through its own clear-and-pop).
    assert min(deepest_chunks) > token_chunks + 2
    assert after["chunk_opening_frames_replaced"] > stats["chunk_opening_frames_replaced"]
    assert E.testing_datastack_chunk_count() == token_chunks
    holder.clear()


def test_deep_recursion_through_evaluated_frames():
    rec = Recorder({"recurse": lambda code, args: (None, always)})
    assert rec.call(recurse, DEPTH) == DEPTH
    assert rec.compiler.compiles == 1
    assert rec.compiler.hits == DEPTH


def test_recursion_error_surfaces_as_recursion_error():
    rec = Recorder({"recurse": lambda code, args: (None, always)})
    with pytest.raises(RecursionError):
        rec.call(recurse, 100_000)
    assert rec.call(recurse, 10) == 10


# --- frames the hook passes through -------------------------------------------------------------

def uses_stdlib(text):
    return textwrap.dedent(text) + os.path.join("a", "b")


def test_stdlib_frames_are_not_offered():
    rec = Recorder()
    assert rec.call(uses_stdlib, "  x") == "x" + os.path.join("a", "b")
    assert rec.seen == ["uses_stdlib"]
    assert E.skip_reason(textwrap.dedent.__code__) == "stdlib_file"
    assert E.skip_reason(os.path.join.__code__) == "stdlib_file"
    assert E.skip_reason(uses_stdlib.__code__) is None


def gen(n):
    for i in range(n):
        yield f(i)


def drives_generator(n):
    return list(gen(n))


def test_generator_frames_are_not_offered_but_their_callees_are():
    rec = Recorder({"f": replace_with(lambda a: a[0] * 2)})
    assert rec.call(drives_generator, 3) == [0, 2, 4]
    assert "gen" not in rec.seen
    assert rec.seen.count("f") == 1  # compiled once, then hits
    assert E.skip_reason(gen.__code__) == "generator"


async def coro(x):
    return f(x)


async def agen():
    yield 1


def drives_coroutine(x):
    return asyncio.run(coro(x))


def test_coroutine_frames_are_not_offered():
    rec = Recorder({"f": replace_with(lambda a: "replaced")})
    assert rec.call(drives_coroutine, 1) == "replaced"
    assert "coro" not in rec.seen
    assert E.skip_reason(coro.__code__) == "generator"
    assert E.skip_reason(agen.__code__) == "generator"


def function_in(directory, name):
    """A function whose code claims to live in `directory`."""
    namespace = {}
    code = compile(f"def {name}(x):\n    return x * 3\n", os.path.join(directory, name + ".py"),
                   "exec")
    exec(code, namespace)
    return namespace[name]


def test_ember_package_frames_are_not_offered():
    fn = function_in(os.path.dirname(ember.__file__), "inside_ember")
    rec = Recorder()
    assert rec.call(fn, 2) == 6
    assert rec.seen == []
    assert E.skip_reason(fn.__code__) == "ember_file"


def test_site_packages_frames_are_offered_even_inside_a_virtualenv():
    # In a virtualenv 'platstdlib' is the directory holding site-packages.
    fn = function_in(sysconfig.get_paths()["purelib"], "inside_site_packages")
    rec = Recorder()
    assert rec.call(fn, 2) == 6
    assert rec.seen == ["inside_site_packages"]
    assert E.skip_reason(fn.__code__) is None


def test_stdlib_directory_frames_are_not_offered():
    fn = function_in(sysconfig.get_paths()["stdlib"], "inside_stdlib")
    rec = Recorder()
    assert rec.call(fn, 2) == 6
    assert rec.seen == []


def test_module_and_class_bodies_are_not_offered():
    rec = Recorder()

    def run_module_code(x):
        namespace = {"x": x}
        exec("class K:\n    y = x + 1\nresult = K.y\n", namespace)
        return namespace["result"]

    assert rec.call(run_module_code, 1) == 2
    # Only these names: other frames may run meanwhile (a library's gc or fork callbacks).
    assert rec.seen[0] == "run_module_code"
    assert "K" not in rec.seen and "<module>" not in rec.seen, rec.seen


def test_finalizers_run_when_a_replaced_frame_releases_the_last_reference():
    finalized = []

    class Noisy:
        def __init__(self, n):
            self.n = n

        def __del__(self):
            # Runs while the frame is being released; calls through the hook again.
            finalized.append(f(self.n))

    def only_noisy(code, args):
        if type(args[0]) is Noisy:
            return (lambda a: "replaced", lambda a: type(a[0]) is Noisy)
        return None

    rec = Recorder({"f": only_noisy})

    def make_and_call(count):
        for i in range(count):
            f(Noisy(i))  # the frame's argument slot holds the last reference
        return len(finalized)

    assert rec.call(make_and_call, 500) == 500
    assert finalized[:2] == [("evaluated", 0), ("evaluated", 1)]
