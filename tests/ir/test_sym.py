"""Symbolic integer expressions: canonical forms after simplification, Python semantics, errors."""
import pytest

CASES = [
    # constant folding, Python floor semantics
    ("2 + 3*4", "14"),
    ("7 // 2", "3"),
    ("-7 // 2", "-4"),
    ("7 // -2", "-4"),
    ("-7 // -2", "3"),
    ("-7 % 3", "2"),
    ("7 % -3", "-2"),
    ("-7 % -3", "-1"),
    ("max(3, -5)", "3"),
    ("min(3, -5)", "-5"),
    ("-9223372036854775808", "-9223372036854775808"),
    ("9223372036854775807", "9223372036854775807"),
    # identities
    ("s0 + 0", "s0"),
    ("s0*1", "s0"),
    ("0*s0 + s1*0", "0"),
    ("s0 // 1", "s0"),
    ("s0 % 1", "0"),
    ("0 // s0", "0"),
    ("0 % s0", "0"),
    ("max(s0, s0)", "s0"),
    ("min(s1 + 1, 1 + s1)", "s1 + 1"),
    # flattening, sorting, coefficient collection
    ("s1 + s0", "s0 + s1"),
    ("s1*s0", "s0*s1"),
    ("s0 + s0 + s0", "3*s0"),
    ("s0 - s0", "0"),
    ("(s0 + 1) + (s1 + 2)", "s0 + s1 + 3"),
    ("2*s0*3", "6*s0"),
    ("s1*s0 + 2*s0*s1", "3*s0*s1"),
    ("s0 - 2*s1 - 3", "s0 + -2*s1 + -3"),
    ("-(s0 - s1)", "-1*s0 + s1"),
    ("2*(s0 + 1)", "2*s0 + 2"),
    ("batch*seq + seq*batch", "2*batch*seq"),
    ("min(s1, s0)", "min(s0, s1)"),
    ("max(s0, 4)", "max(4, s0)"),
    # exact division, nested floordiv
    ("(4*s0) // 4", "s0"),
    ("(4*s0 + 8) // 2", "2*s0 + 4"),
    ("(4*s0 + 8) % 2", "0"),
    ("(2*s0 + 3) // 2", "(2*s0 + 3) // 2"),
    ("(s0 // 2) // 3", "s0 // 6"),
    ("s0 // -1", "-1*s0"),
    ("s0 % -1", "0"),
    # printing keeps non-atomic operands parenthesized
    ("2*s0 // 3", "(2*s0) // 3"),
    ("(s0 + 1)*(s1 + 1)", "(s0 + 1)*(s1 + 1)"),
    ("(s0 % 4)*2", "2*(s0 % 4)"),
    ("max(s0 + 1, s1) // 2", "max(s1, s0 + 1) // 2"),
]


@pytest.mark.parametrize("text,canonical", CASES, ids=[c[0] for c in CASES])
def test_simplify(ir, text, canonical):
    assert ir.simplify_expr(text) == canonical
    assert ir.simplify_expr(canonical) == canonical  # the canonical form is a fixed point


def test_python_floor_semantics_exhaustive(ir):
    for a in range(-9, 10):
        for b in [-4, -3, -2, -1, 1, 2, 3, 4]:
            assert ir.simplify_expr(f"{a} // {b}") == str(a // b), (a, b)
            assert ir.simplify_expr(f"{a} % {b}") == str(a % b), (a, b)


ERRORS = [
    ("", 1, "expected an integer, a symbol"),
    ("s0 +", 5, "expected an integer, a symbol"),
    ("s0 s1", 4, "unexpected 's' after the expression"),
    ("(s0 + 1", 8, "expected ')' to close '('"),
    ("max(s0)", 7, "expected ',' between the two arguments of max"),
    ("max(s0, s1, s2)", 11, "it takes two"),
    ("s0 / 2", 4, "use '//'"),
    ("s0 // 0", 4, "floordiv by zero"),
    ("s0 % (2 - 2)", 4, "mod by zero"),
    ("9223372036854775808", 1, "does not fit in int64"),
    ("9223372036854775807 + 1", 21, "overflow"),
    ("4000000000*4000000000*s0", 11, "overflow"),
    ("2x", 2, "in an integer literal"),
    ("s0 + $", 6, "found '$'"),
    ("(" * 100000 + "1" + ")" * 100000, 257, "nested deeper than 256 levels"),
    ("-" * 100000 + "s0", 257, "nested deeper than 256 levels"),
]


@pytest.mark.parametrize("text,column,words", ERRORS, ids=[e[0][:20] or "empty" for e in ERRORS])
def test_parse_errors_name_the_column(ir, text, column, words):
    with pytest.raises(ValueError) as info:
        ir.simplify_expr(text)
    assert str(info.value).startswith(f"column {column}: "), str(info.value)
    assert words in str(info.value)



def _random_expr(rng, depth):
    if depth == 0 or rng.random() < 0.25:
        return rng.choice(["s0", "s1", "s2", str(rng.randint(-6, 6))])
    op = rng.choice(["+", "-", "*", "//", "%", "max", "min", "neg"])
    a = _random_expr(rng, depth - 1)
    if op == "neg":
        return f"-({a})"
    if op in ("//", "%"):  # divisors: nonzero constants or symbols (never 0 below)
        b = rng.choice(["s0", "s1", str(rng.choice([-4, -3, -2, -1, 1, 2, 3, 4, 6, 8]))])
        return f"({a}) {op} ({b})"
    b = _random_expr(rng, depth - 1)
    if op in ("max", "min"):
        return f"{op}({a}, {b})"
    return f"({a}) {op} ({b})"


def test_simplification_preserves_value(ir):
    """Random expressions: the canonical form evaluates (as Python) to the same integer, and is a fixed point."""
    import random
    seed = 1234
    rng = random.Random(seed)
    for _ in range(400):
        text = _random_expr(rng, 4)
        canonical = ir.simplify_expr(text)
        assert ir.simplify_expr(canonical) == canonical, f"seed {seed}: {text!r}"
        for _ in range(5):
            env = {s: rng.choice([-7, -3, -2, -1, 1, 2, 3, 5, 8]) for s in ("s0", "s1", "s2")}
            assert eval(canonical, {}, env) == eval(text, {}, env), f"seed {seed}: {text!r} -> {canonical!r} at {env}"


def test_evaluate_agrees_with_python(ir):
    """sym::evaluate (no Expr built) gives Python's value on random expressions, both spellings."""
    import random
    seed = 4321
    rng = random.Random(seed)
    for _ in range(300):
        text = _random_expr(rng, 4)
        canonical = ir.simplify_expr(text)
        env = {s: rng.choice([-7, -3, -2, -1, 1, 2, 3, 5, 8]) for s in ("s0", "s1", "s2")}
        want = eval(text, {}, env)
        assert ir.sym_evaluate(text, env) == want, f"seed {seed}: {text!r} at {env}"
        assert ir.sym_evaluate(canonical, env) == want, f"seed {seed}: {canonical!r} at {env}"


def test_evaluate_errors(ir):
    with pytest.raises(ValueError, match="s1 has no value"):
        ir.sym_evaluate("s0 + s1", {"s0": 1})
    with pytest.raises(OverflowError):
        ir.sym_evaluate("s0*s0", {"s0": 2**40})
    with pytest.raises(ValueError, match="mod by zero"):
        ir.sym_evaluate("3 % s0", {"s0": 0})


SYMBOL_LINES = [
    # (text, canonical): defaults are omitted when printing
    ("symbol s0 hint=16", "symbol s0 hint=16"),
    ("symbol s0 hint=16 range=[2, inf] divisor=1", "symbol s0 hint=16"),
    ("symbol s1 hint=64 range=[16, 4096] divisor=16", "symbol s1 hint=64 range=[16, 4096] divisor=16"),
    ("symbol s2   hint=8  divisor=4", "symbol s2 hint=8 divisor=4"),
    ("symbol s3 hint=3 range=[0,9]", "symbol s3 hint=3 range=[0, 9]"),
]


@pytest.mark.parametrize("text,canonical", SYMBOL_LINES, ids=[c[0] for c in SYMBOL_LINES])
def test_symbol_lines(ir, text, canonical):
    assert ir.sym_symbol(text) == canonical
    assert ir.sym_symbol(canonical) == canonical


def test_symbol_line_errors_name_the_column(ir):
    with pytest.raises(ValueError, match=r"^column 16: hint 6 is not a multiple of divisor=4"):
        ir.sym_symbol("symbol s0 hint=6 divisor=4")
