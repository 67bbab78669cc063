"""Mutations of the caller's lists and dicts: traced on the trace's model of the container and
replayed in place after the graph (identity kept), with the identities the trace relied on guarded.
The graph-break corpus (tests/graph_breaks/corpus_mutations.py) compares such programs with eager;
these tests check what a comparison of values cannot see: object identity, calls whose inputs change
between calls (aliasing that appears or disappears, items guarded by their type only), and the
mutations that still break."""
import pytest
import torch

import ember


@pytest.fixture(autouse=True)
def fresh():
    ember.reset()
    yield
    ember.reset()


def appends_and_returns(x, xs):
    xs.append(x * 2)
    return xs


def test_a_mutated_and_returned_list_is_the_callers_object():
    f = ember.compile(appends_and_returns, fullgraph=True)
    for _ in range(2):
        xs = ["keep"]
        x = torch.randn(3)
        out = f(x, xs)
        assert out is xs
        assert out[0] == "keep" and len(out) == 2
        torch.testing.assert_close(out[1], x * 2)


def moves_key(d):
    d["a"] = d.pop("a") + 1
    d.setdefault("z", 0)
    return len(d)


def test_a_dict_keeps_its_identity_and_eager_key_order():
    f = ember.compile(moves_key, fullgraph=True)
    for _ in range(2):
        d = {"a": 1, "b": 2}
        view = d.keys()
        assert f(d) == 3
        assert list(view) == ["b", "a", "z"] and d == {"b": 2, "a": 2, "z": 0}
    assert ember.stats()["frames_compiled"] == 1


def appends_to_both(x, xs, ys):
    xs.append(1)
    ys.append(len(xs))
    return x + len(ys)


def eager_result(fn, *args):
    return fn(*args), args


@pytest.mark.parametrize("first_aliased", [False, True])
def test_aliasing_that_appears_or_disappears_recompiles(first_aliased):
    f = ember.compile(appends_to_both, fullgraph=True)
    x = torch.randn(3)

    def inputs(aliased):
        a = [0]
        return (a, a) if aliased else (a, [0])

    for aliased in (first_aliased, not first_aliased, first_aliased):
        expected_lists = inputs(aliased)
        expected = appends_to_both(x, *expected_lists)
        lists = inputs(aliased)
        torch.testing.assert_close(f(x, *lists), expected)
        assert lists == expected_lists
        assert (lists[0] is lists[1]) == aliased
    # One entry per aliasing; the third call is a hit.
    assert ember.stats()["frames_compiled"] == 2


class Token:
    """Guarded by its type only: a new one on every call."""


def appends_count(xs):
    xs.append(len(xs))
    return xs[-1]


def test_items_guarded_by_type_only_are_the_new_calls_items():
    f = ember.compile(appends_count, fullgraph=True)
    for _ in range(3):
        tokens = [Token(), Token()]
        xs = list(tokens)
        assert f(xs) == 2
        assert xs[0] is tokens[0] and xs[1] is tokens[1] and xs[2] == 2
    assert ember.stats()["frames_compiled"] == 1


def doubles_first(xs):
    xs.insert(0, xs[0] * 2)
    return len(xs)


def test_tensor_items_are_read_again_on_each_call():
    f = ember.compile(doubles_first, fullgraph=True)
    for _ in range(2):
        a, b = torch.randn(2), torch.randn(2)
        xs = [a, b]
        assert f(xs) == 3
        assert xs[1] is a and xs[2] is b
        torch.testing.assert_close(xs[0], a * 2)
    assert ember.stats()["frames_compiled"] == 1


def stores_a_grad_mode(x, xs):
    xs.append(torch.no_grad())
    return x + 1


def test_a_value_that_cannot_be_rebuilt_is_still_a_break():
    out = ember.explain(stores_a_grad_mode)(torch.randn(2), [])
    assert out.graph_break_count == 1
    assert "cannot be rebuilt after the graph" in out.break_reasons[0].reason
    xs = []
    torch.testing.assert_close(ember.compile(stores_a_grad_mode)(torch.ones(2), xs), torch.ones(2) + 1)
    assert len(xs) == 1 and isinstance(xs[0], torch.no_grad)


def stores_a_lambda(x, xs):
    k = 2
    xs.append(lambda: k)
    return x + 1


def test_a_lambda_stored_into_a_caller_list_is_rebuilt():
    # A function made in the trace is rebuilt after the graph (code, cells): no break.
    out = ember.explain(stores_a_lambda)(torch.randn(2), [])
    assert out.graph_break_count == 0
    xs = []
    torch.testing.assert_close(ember.compile(stores_a_lambda)(torch.ones(2), xs), torch.ones(2) + 1)
    assert len(xs) == 1 and xs[0]() == 2 and xs[0].__name__ == "<lambda>"


def writes_into(x, d):
    d["_ember_mutation_test_flag"] = 1
    return x + 1


def test_the_globals_dict_itself_is_not_replayed():
    out = ember.explain(writes_into)(torch.randn(2), globals())
    assert out.graph_break_count == 1
    assert "globals or builtins dict" in out.break_reasons[0].reason
    globals().pop("_ember_mutation_test_flag", None)
    ember.compile(writes_into)(torch.randn(2), globals())
    assert globals().pop("_ember_mutation_test_flag") == 1


def test_identity_checks_are_listed_with_the_guards():
    out = ember.explain(appends_to_both)(torch.randn(2), [0], [0])
    guards = "\n".join(out.guards) if isinstance(out.guards, list) else str(out.guards)
    assert "L['xs'] is not L['ys']" in guards and "L['ys'] is not L['xs']" in guards


def appends_itself(x, xs):
    xs.append(xs)
    return x + len(xs)


def reads_first(x, xs):
    xs.append(xs[0])
    return x + len(xs)


def test_a_list_that_contains_itself_is_refused_not_traced():
    # Storing a list into itself is a break; reading one that already holds itself is refused
    # cleanly (the trace's walks over values assume no cycles).
    out = ember.explain(appends_itself)(torch.zeros(2), [1])
    assert "contains itself" in out.break_reasons[0].reason
    xs = [1]
    torch.testing.assert_close(ember.compile(appends_itself)(torch.zeros(2), xs), torch.full((2,), 2.0))
    assert xs[1] is xs
    ember.reset()
    ys = [1]
    ys.append(ys)
    torch.testing.assert_close(ember.compile(reads_first)(torch.zeros(2), ys), torch.full((2,), 3.0))
    assert ys[1] is ys and ys[2] == 1


class Plain:
    def __init__(self):
        self.v = 1


def writes_dict_reads_attribute(x, d, o):
    d["v"] = 2
    return x + o.v


def test_a_dict_that_is_an_objects_dict_is_not_modelled_apart_from_it():
    # The attribute read must see the item assignment (eager: o.v == 2): the read is a break.
    o = Plain()
    out = ember.explain(writes_dict_reads_attribute)(torch.zeros(2), o.__dict__, o)
    assert any("is the __dict__ of L['o']" in r.reason for r in out.break_reasons), out.break_reasons
    o = Plain()
    torch.testing.assert_close(ember.compile(writes_dict_reads_attribute)(torch.zeros(2), o.__dict__, o),
                               torch.full((2,), 2.0))
    assert o.v == 2


# ---------------------------------------------------------------------------------------------
# Lists and dicts of globals and attributes that the trace only adds to (issue 15): guarded by
# their type, not their contents, so the next call, which sees more items, is a cache hit.

LOG = []
CACHE = {}


def logs_sum(x):
    LOG.append(x.sum())
    return x + 1


def caches_by_name(x, name):
    CACHE[name] = x * 2
    CACHE["last"] = name
    return x - 1


class CountsCalls(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = []
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        self.calls.append(1)
        return self.lin(x)




def test_appending_to_a_global_list_does_not_recompile():
    xs = [torch.randn(3) for _ in range(20)]
    LOG.clear()
    expected = [logs_sum(x) for x in xs]
    expected_log = list(LOG)
    LOG.clear()
    log = LOG
    f = ember.compile(logs_sum)
    for x, e in zip(xs, expected):
        torch.testing.assert_close(f(x), e)
    assert LOG is log and len(LOG) == 20
    torch.testing.assert_close(LOG, expected_log)
    assert ember.stats()["frames_compiled"] <= 2 and ember.stats()["recompiles"] <= 1
    assert ember.stats()["eager_frames"] == 0


def test_appending_to_an_attribute_list_does_not_recompile():
    torch.manual_seed(0)
    m = CountsCalls()
    compiled = ember.compile(m)
    x = torch.randn(2, 4)
    for _ in range(20):
        torch.testing.assert_close(compiled(x), m.lin(x))
    assert m.calls == [1] * 20
    assert ember.stats()["frames_compiled"] <= 2 and ember.stats()["eager_frames"] == 0


def test_setting_keys_of_a_global_dict_does_not_recompile():
    names = ["a", "b", "a", "c", "last", "b"] * 3
    xs = [torch.randn(2) for _ in names]
    CACHE.clear()
    CACHE["z"] = 0
    expected = [caches_by_name(x, n) for x, n in zip(xs, names)]
    expected_cache = dict(CACHE)
    CACHE.clear()
    CACHE["z"] = 0
    f = ember.compile(caches_by_name)
    for x, n, e in zip(xs, names, expected):
        torch.testing.assert_close(f(x, n), e)
    assert list(CACHE) == list(expected_cache)  # eager's key order
    assert CACHE["last"] == expected_cache["last"] and CACHE["z"] == 0
    torch.testing.assert_close({k: v for k, v in CACHE.items() if k not in ("last", "z")},
                               {k: v for k, v in expected_cache.items() if k not in ("last", "z")})
    # One entry per name (a str argument is guarded by value), none for the dict's growth.
    assert ember.stats()["frames_compiled"] <= len(set(names)) + 1


def appends_then_reads(x):
    LOG.append(x)
    return len(LOG), LOG[0] + x


def test_a_list_read_after_appending_sees_its_old_items():
    LOG.clear()
    LOG.append(torch.ones(2))
    expected = appends_then_reads(torch.full((2,), 3.0))
    expected_log = list(LOG)
    LOG.clear()
    LOG.append(torch.ones(2))
    got = ember.compile(appends_then_reads, fullgraph=True)(torch.full((2,), 3.0))
    assert got[0] == expected[0]
    torch.testing.assert_close(got[1], expected[1])
    torch.testing.assert_close(LOG, expected_log)
