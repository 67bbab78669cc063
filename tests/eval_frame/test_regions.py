"""Regions: when the hook is installed, which compiler applies, pausing, chaining, threads."""
import sys
import threading

import pytest

from ember._C import eval_frame as E
from conftest import Recorder


def leaf(x):
    return x + 1


def middle(x):
    return leaf(x) * 2


def outer(x):
    return middle(x) + leaf(x)


def report_hook(x):
    return E.hook_installed()


def test_hook_installed_only_inside_regions():
    rec = Recorder()
    assert not E.hook_installed()
    assert rec.call(report_hook, 0) is True
    assert not E.hook_installed()


def test_hook_removed_after_an_exception():
    def boom():
        raise KeyError("boom")

    rec = Recorder()
    with pytest.raises(KeyError):
        rec.call(boom)
    assert not E.hook_installed()


def test_nested_regions_keep_the_hook_and_use_the_innermost_compiler():
    outer_rec = Recorder()
    inner_rec = Recorder()

    def inner_region(x):
        installed = E.call_in_region(inner_rec.compiler, middle, (x,))
        assert E.hook_installed()
        return installed + leaf(x)

    assert outer_rec.call(inner_region, 1) == 4 + 2
    # The outer compiler sees its own frames before and after the inner region, never the
    # inner region's frames.
    assert outer_rec.seen == ["inner_region", "leaf"]
    assert inner_rec.seen == ["middle", "leaf"]


def test_nested_calls_reach_the_compiler():
    rec = Recorder()
    assert rec.call(outer, 3) == (4 * 2) + 4
    assert rec.seen == ["outer", "middle", "leaf", "leaf"]
    assert rec.compiler.declines == 4


def test_region_pause_hides_frames_on_this_thread():
    rec = Recorder()

    def paused_then_not(x):
        a = E.testing_call_paused(middle, (x,))
        return a + leaf(x)

    assert rec.call(paused_then_not, 1) == 4 + 2
    assert rec.seen == ["paused_then_not", "leaf"]


def test_chains_to_the_previous_hook_for_frames_it_evaluates():
    def replace(code, args):
        return (lambda a: -1, lambda a: True)

    rec = Recorder({"leaf": replace})
    assert E.testing_install_counting_hook()
    try:
        assert rec.call(outer, 3) == (-1 * 2) + -1
        names = [code.co_name for code in E.testing_counted_codes()]
        # outer and middle were evaluated through the previous hook; both leaf frames were
        # answered by the entry and never evaluated. (The compiler's own frames, run paused,
        # are evaluated through it too.)
        assert names.count("outer") == 1
        assert names.count("middle") == 1
        assert names.count("leaf") == 0
        assert "_decide" in names
        assert E.testing_counting_hook_installed()
        assert not E.hook_installed()
        before = E.testing_counting_hook_calls()
        outer(3)
        assert E.testing_counting_hook_calls() - before == 4
    finally:
        assert E.testing_remove_counting_hook()


def test_a_hook_installed_over_embers_stays_when_the_region_ends():
    rec = Recorder()

    def install_inside(x):
        assert E.testing_install_counting_hook() is False  # Ember's hook is current
        return x

    assert rec.call(install_inside, 1) == 1

    def replace_ours(x):
        # Simulates a debugger installing its hook while the region is open.
        E.testing_remove_counting_hook()
        assert E.hook_installed()
        return x

    rec.call(replace_ours, 1)
    assert not E.hook_installed()


def test_threads_each_get_correct_results():
    square = lambda a: a[0] * a[0]
    is_int = lambda a: type(a[0]) is int

    def is_float(a):
        return type(a[0]) is float

    def twice(a):
        return a[0] * 2.0

    rules = {"leaf": lambda code, args: (square, is_int) if type(args[0]) is int
             else (twice, is_float)}
    rec = Recorder(rules)
    errors = []
    outside_seen = []

    def worker(index):
        try:
            for i in range(1000):
                value = i if index % 2 == 0 else float(i)
                expected = (i * i if index % 2 == 0 else 2.0 * i) * 2 + value + 1
                got = rec.call(lambda v: middle(v) + value + 1, value)
                if got != expected:
                    errors.append((index, i, got, expected))
                    return
        except BaseException as e:  # reported below, with the thread index
            errors.append((index, repr(e)))

    def outsider():
        # Runs concurrently without a region: none of its frames may reach the compiler.
        for i in range(2000):
            outside_seen.append(leaf(i))

    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often, also inside guards and compiles
    try:
        threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
        threads.append(threading.Thread(target=outsider))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old_interval)
    assert errors == []
    assert len(outside_seen) == 2000
    assert set(rec.seen) <= {"<lambda>", "middle", "leaf"}
    # Two entries for leaf (int and float), maybe a few more if two threads compiled at once.
    assert rec.compiler.compiles - rec.compiler.declines >= 2
    assert rec.compiler.hits >= 8 * 1000 - rec.compiler.compiles
    assert not E.hook_installed()


def test_call_in_region_rejects_bad_arguments():
    rec = Recorder()
    with pytest.raises(TypeError):
        E.call_in_region(rec.compiler, leaf, [1])
    with pytest.raises(TypeError):
        E.call_in_region(None, leaf, (1,))
    assert not E.hook_installed()


def test_threads_while_another_thread_clears_the_caches():
    def slow_guard(a):
        # Python code inside the guard lets other threads run (and clear) mid-lookup.
        return sum(range(20)) == 190 and type(a[0]) is int

    rec = Recorder({"leaf": lambda code, args: (lambda a: a[0] * 3, slow_guard)})
    errors = []
    stop = threading.Event()

    def worker():
        try:
            for i in range(500):
                got = rec.call(middle, i)
                if got != i * 3 * 2:
                    errors.append((i, got))
                    return
        except BaseException as e:
            errors.append(repr(e))

    def clearer():
        while not stop.is_set():
            E.clear_all_caches()

    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        workers = [threading.Thread(target=worker) for _ in range(4)]
        clearing = threading.Thread(target=clearer)
        clearing.start()
        for t in workers:
            t.start()
        for t in workers:
            t.join()
        stop.set()
        clearing.join()
    finally:
        sys.setswitchinterval(old_interval)
    assert errors == []
    assert rec.compiler.compiles - rec.compiler.declines >= 1
