"""The per-code cache: hits, misses, recompiles, the cache limit, eager entries, clearing."""
import gc

from ember._C import eval_frame as E
from conftest import Recorder

executed = []


def target(x):
    executed.append(x)
    return x + 1000


def calls_target(x):
    return target(x)


def equals(value):
    def guard(args):
        return args[0] == value
    guard.__name__ = f"x == {value}"
    return guard


def by_value(code, args):
    """One entry per argument value; it answers x * 10."""
    return (lambda a: a[0] * 10, equals(args[0]))


def test_miss_then_hit():
    rec = Recorder({"target": by_value})
    executed.clear()
    assert rec.call(target, 1) == 10
    assert rec.call(target, 1) == 10
    assert rec.call(target, 1) == 10
    assert executed == []
    assert rec.compiler.compiles == 1
    assert rec.compiler.hits == 2
    assert rec.compiler.recompiles == []
    assert E.cache_entry_count(target.__code__, rec.compiler) == 1


def test_recompile_reports_the_failing_guard_of_the_most_recent_entry():
    rec = Recorder({"target": by_value})
    assert [rec.call(target, v) for v in (1, 2, 3, 2, 1)] == [10, 20, 30, 20, 10]
    assert rec.compiler.compiles == 3
    assert rec.compiler.hits == 2
    assert rec.compiler.recompiles == [(target.__code__, "x == 1"), (target.__code__, "x == 2")]
    assert E.cache_entry_count(target.__code__, rec.compiler) == 3


def test_cache_limit_reports_once_then_runs_eagerly():
    rec = Recorder({"target": by_value}, cache_limit=3)
    executed.clear()
    assert [rec.call(target, v) for v in (1, 2, 3)] == [10, 20, 30]
    assert rec.call(target, 4) == 1004  # limit reached: evaluated normally
    assert rec.compiler.limit_events == [(target.__code__, "x == 3")]
    assert rec.compiler.compiles == 3
    # From now on the code runs eagerly for this compiler, even for values it had entries for.
    assert [rec.call(target, v) for v in (1, 5, 4)] == [1001, 1005, 1004]
    assert rec.compiler.limit_events == [(target.__code__, "x == 3")]
    assert rec.compiler.compiles == 3
    assert executed == [4, 1, 5, 4]
    assert E.cache_entry_count(target.__code__, rec.compiler) == 0
    # Frames called from an over-the-limit frame still reach the compiler.
    rec.seen.clear()
    assert rec.call(calls_target, 6) == 1006
    assert rec.seen == ["calls_target"]


def test_clear_all_caches_resets_entries_and_the_limit():
    rec = Recorder({"target": by_value}, cache_limit=1)
    assert rec.call(target, 1) == 10
    assert rec.call(target, 2) == 1002
    assert len(rec.compiler.limit_events) == 1
    E.clear_all_caches()
    assert E.cache_entry_count(target.__code__, rec.compiler) == 0
    assert rec.call(target, 2) == 20
    assert rec.compiler.compiles == 2


def test_declined_frames_are_asked_again_every_time():
    rec = Recorder()
    executed.clear()
    for _ in range(3):
        assert rec.call(target, 7) == 1007
    assert rec.compiler.compiles == 3
    assert rec.compiler.declines == 3
    assert executed == [7, 7, 7]
    assert E.cache_entry_count(target.__code__, rec.compiler) == 0


def test_eager_entry_is_cached_and_evaluates_the_frame():
    rec = Recorder({"target": lambda code, args: (None, equals(args[0]))})
    executed.clear()
    assert rec.call(calls_target, 1) == 1001
    assert rec.call(calls_target, 1) == 1001
    assert executed == [1, 1]
    assert rec.compiler.compiles == 3  # calls_target declined twice, target compiled once
    assert rec.compiler.hits == 1
    assert rec.seen == ["calls_target", "target", "calls_target"]


def test_eager_entry_keeps_the_region_for_nested_frames():
    rec = Recorder({
        "calls_target": lambda code, args: (None, lambda a: True),
        "target": by_value,
    })
    assert rec.call(calls_target, 2) == 20
    assert rec.call(calls_target, 3) == 30
    assert rec.compiler.hits == 1


def test_compilers_have_separate_caches_and_forget_drops_only_one():
    first = Recorder({"target": by_value})
    second = Recorder({"target": lambda code, args: (lambda a: -a[0], equals(args[0]))})
    assert first.call(target, 1) == 10
    assert second.call(target, 1) == -1
    assert first.call(target, 1) == 10
    assert second.call(target, 1) == -1
    assert first.compiler.hits == 1 and second.compiler.hits == 1
    E.forget_compiler(first.compiler)
    assert E.cache_entry_count(target.__code__, first.compiler) == 0
    assert E.cache_entry_count(target.__code__, second.compiler) == 1


def test_a_compiler_that_dies_forgets_its_entries():
    rec = Recorder({"target": by_value})
    rec.call(target, 1)
    probe = Recorder()
    del rec
    gc.collect()
    # A new compiler may reuse the address; it must start empty either way.
    for _ in range(4):
        fresh = Recorder({"target": by_value})
        assert E.cache_entry_count(target.__code__, fresh.compiler) == 0
    assert probe.compiler.compiles == 0


def test_cache_freed_with_its_code_object():
    namespace = {}
    exec("def temporary(x):\n    return x\n", namespace)
    rec = Recorder({"temporary": by_value})
    before = E.cached_code_count()
    assert rec.call(namespace["temporary"], 4) == 40
    assert E.cached_code_count() == before + 1
    namespace.clear()
    gc.collect()
    assert E.cached_code_count() == before


def test_guard_results_are_checked_on_the_new_entry():
    rec = Recorder({"target": lambda code, args: (lambda a: 0, lambda a: False, "never")})
    try:
        rec.call(target, 1)
    except RuntimeError as e:
        assert "never" in str(e) and "target" in str(e)
    else:
        raise AssertionError("an entry whose guards reject its own frame must be an error")


def test_an_entry_that_passes_twice_in_a_row_moves_to_the_front():
    checked = []

    def logged_equals(value):
        def guard(args):
            checked.append(value)
            return args[0] == value
        return guard

    rec = Recorder({"target": lambda code, args: (lambda a: a[0], logged_equals(args[0]))})
    for v in (0, 1, 2):
        rec.call(target, v)
    checked.clear()
    rec.call(target, 0)  # newest first: 2, 1, then 0 passes
    assert checked == [2, 1, 0]
    checked.clear()
    rec.call(target, 1)  # alternating hits leave the order alone
    rec.call(target, 0)
    assert checked == [2, 1, 2, 1, 0]
    checked.clear()
    rec.call(target, 0)  # second hit in a row: moves to the front
    rec.call(target, 0)
    assert checked == [2, 1, 0, 0]
    checked.clear()
    rec.call(target, 1)
    assert checked == [0, 2, 1]
