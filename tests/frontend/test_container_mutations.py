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
