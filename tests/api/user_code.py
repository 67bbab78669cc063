"""User functions for the error tests, in a module pytest does not rewrite (its assert rewriting
would replace a plain `assert` with calls into pytest)."""


def assert_fails(x):
    assert x.shape[0] == 3, f"got {x.shape[0]} rows"  # assert-line
    return x + 1
