"""The symbolic engine's range facts (src/sym): bound, range-aware simplify, relations, statically_known,
RelProgram. Goldens for each rule, then property tests: random expressions over 1-3 symbols with random
ranges and divisors, checked at random values inside those ranges (seeded; EMBER_SYM_SEED=N replays)."""
import os
import random

import pytest

INF = 2**63 - 1
NEG_INF = -(2**63)

S0_2 = ["symbol s0 hint=2"]                                   # s0 in [2, inf]
S0_16 = ["symbol s0 hint=32 range=[16, 4096] divisor=16"]
S01 = ["symbol s0 hint=8 range=[2, 64]", "symbol s1 hint=4 range=[1, 8]"]

BOUNDS = [
    ("s0", S0_2, (2, INF)),
    ("s0", [], (NEG_INF, INF)),                               # an unlisted symbol is unbounded
    ("s0", ["symbol s0 hint=16 range=[3, 30] divisor=8"], (8, 24)),  # rounded inward to multiples
    ("-2*s0 + 5", S01, (-123, 1)),
    ("s0*s1", S01, (2, 512)),
    ("(s0 + -10)*(s1 + -4)", S01, (-162, 216)),
    ("s0 // 4", S01, (0, 16)),
    ("-1*s0 // 4", S01, (-16, -1)),
    ("s0 // s1", S01, (0, 64)),
    ("s0 // (-1*s1)", S01, (-64, -1)),
    ("s0 % 5", S01, (0, 4)),
    ("(s0 + 10) % 100", S01, (12, 74)),                       # one period: exact
    ("s0 % -5", S01, (-4, 0)),
    ("s0 % s1", S01, (0, 7)),
    ("s1 % s0", S01, (0, 8)),                                 # s1 >= 0 and s1 < 9
    ("max(s0, 10) - min(s1, 3)", S01, (7, 63)),
    ("s0 + -5", S0_2, (-3, INF)),                             # +inf stays infinite
    ("-1*s0", S0_2, (NEG_INF, -2)),
    ("s0*s0*s0*s0*s0", S0_2, (32, INF)),
    ("s0 // s1", ["symbol s1 hint=2 range=[-3, 3]"], (NEG_INF, INF)),
]


@pytest.mark.parametrize("text,symbols,want", BOUNDS, ids=[b[0] for b in BOUNDS])
def test_bound(ir, text, symbols, want):
    assert ir.sym_bound(text, symbols) == want


SIMPLIFY = [
    ("max(s0, 0)", S0_2, "s0"),
    ("min(s0, 1)", S0_2, "1"),
    ("max(s0, s0 + 1)", [], "s0 + 1"),                        # no facts needed: a - b is constant
    ("max(s0, 3)", S0_2, "max(3, s0)"),                       # undecided: kept
    ("s0 // s0", [], "1"),
    ("(4*s0) // s0", [], "4"),
    ("(s0*s1 + 2*s0) // s0", [], "s1 + 2"),
    ("(s0*s1 + s1 + -1) // s0", S01, "s1 + (s1 + -1) // s0"),
    ("(s1 + -1) // s0", ["symbol s0 hint=9 range=[9, 64]", "symbol s1 hint=4 range=[1, 8]"], "0"),
    ("(s1 + -1) % s0", ["symbol s0 hint=9 range=[9, 64]", "symbol s1 hint=4 range=[1, 8]"], "s1 + -1"),
    ("(s0 + -1) % s0", S0_2, "s0 + -1"),                      # b = s0 - 1 < s0 by the difference
    ("(s0 + -1) // s0", S0_2, "0"),
    ("(s1 + 20) // 8", S01, "(s1 + 4) // 8 + 2"),            # the exact part comes out
    ("(s0 + 20) % 100", S01, "s0 + 20"),
    ("(s1 + 10) // 8", S01, "(s1 + 2) // 8 + 1"),            # crosses a multiple of 8: kept
    ("(s1 + 8) // 8", S01, "s1 // 8 + 1"),
    ("(s0 + 40) // 16", S0_16, "s0 // 16 + 2"),                # s0 // 16 is exact
    ("(s1 + 7) // 8", ["symbol s1 hint=4 range=[1, 8]"], "1"),
    ("s0 % 16", S0_16, "0"),
    ("(s0 + 8) % 16", S0_16, "8"),
    ("s0 % 32", S0_16, "s0 % 32"),
    ("max(s0 // s0, s1)", S01, "s1"),
]


@pytest.mark.parametrize("text,symbols,want", SIMPLIFY, ids=[c[0] for c in SIMPLIFY])
def test_simplify_with_ranges(ir, text, symbols, want):
    assert ir.sym_simplify(text, symbols) == want


RELATIONS = [
    ("s0 <= 4096", "s0 <= 4096"),
    ("64*s1 == s2", "64*s1 == s2"),
    ("s0 > 4", "4 < s0"),
    ("s0 >= s1 + 1", "s1 + 1 <= s0"),
    ("s0 != 2*s1", "s0 != 2*s1"),
    ("max(s0,2)<s1", "max(2, s0) < s1"),
]


@pytest.mark.parametrize("text,canonical", RELATIONS, ids=[r[0] for r in RELATIONS])
def test_relation_text(ir, text, canonical):
    assert ir.sym_rel(text) == canonical
    assert ir.sym_rel(canonical) == canonical


@pytest.mark.parametrize("text,column,words", [
    ("s0", 3, "expected a relation"),
    ("s0 = 2", 4, "expected a relation"),
    ("s0 == 2 3", 9, "unexpected text after the relation"),
    ("s0 <= ", 7, "expected an integer, a symbol"),
])
def test_relation_errors(ir, text, column, words):
    with pytest.raises(ValueError) as info:
        ir.sym_rel(text)
    assert str(info.value).startswith(f"column {column}: ") and words in str(info.value), str(info.value)


KNOWN = [
    ("s0 >= 2", S0_2, True),
    ("s0 < 2", S0_2, False),
    ("s0 <= 4096", S0_2, None),
    ("s0 <= 4096", S0_16, True),
    ("s0 == s0", [], True),
    ("s0 != s0", [], False),
    ("s0 < s0 + 1", [], True),
    ("2*s0 == 7", [], False),                                  # parity, no range needed
    ("2*s0 != 7", [], True),
    ("4*s0 + 6*s1 == 9", [], False),                           # gcd 2
    ("s0 + 4 == 24", S0_16, False),                            # s0 is a multiple of 16
    ("s0 + 4 == 20", S0_16, None),                             # s0 == 16
    ("s0 % 16 == 0", S0_16, True),
    ("s0 % 16 == 0", S0_2, None),
    ("s0 % 32 == 0", S0_16, None),
    ("s0 // s0 == 1", [], True),
    ("max(s0, 0) == s0", S0_2, True),
    ("s0*s1 <= 512", S01, True),
    ("s0*s1 < 512", S01, None),
    ("s1 < s0", S01, None),
    ("s0 // 4 <= 16", S01, True),
    ("s1 == 0", S01, False),
    ("s0 < s0*s0", S0_2, True),                                # shared symbols cancel: 1 < s0
    ("s0*s0 == s0", S0_2, False),
    ("s0*s1 <= s0", S01, None),                                # s1 <= 1: s1 may be 1
    ("2*s0*s1 > s0*s1", S01, True),
    ("s0*s1 < s0*s1*s1", S01, None),
    ("s0 // 5 + 2 < 8*(s0 // 5 + 2)", S0_2, True),              # a compound factor >= 1 cancels too
    ("s0 // 5 + -1 < 8*(s0 // 5 + -1)", S0_2, None),           # it may be 0 or below: kept
]


@pytest.mark.parametrize("text,symbols,want", KNOWN, ids=[k[0] + " " + str(len(k[1])) for k in KNOWN])
def test_statically_known(ir, text, symbols, want):
    assert ir.sym_statically_known(text, symbols) is want


def test_multiple_of(ir):
    assert ir.sym_multiple_of("64*s0 + 32", 32, [])
    assert not ir.sym_multiple_of("64*s0 + 32", 64, [])
    assert ir.sym_multiple_of("s0*s1", 64, ["symbol s0 hint=16 divisor=8", "symbol s1 hint=8 divisor=8"])
    assert ir.sym_multiple_of("s0 // 2", 8, S0_16)
    assert not ir.sym_multiple_of("s0", 32, S0_16)
    assert ir.sym_multiple_of("0", 7, [])


def test_rel_program(ir):
    rels = ["s0 <= 4096", "s0 % 16 == 0", "64*s1 == s2", "s1 < s0"]
    order = ["s0", "s1", "s2"]
    assert ir.sym_rel_program(rels, order, [32, 4, 256]) is None
    assert ir.sym_rel_program(rels, order, [8192, 4, 256]) == 0
    assert ir.sym_rel_program(rels, order, [40, 4, 256]) == 1
    assert ir.sym_rel_program(rels, order, [32, 4, 255]) == 2
    assert ir.sym_rel_program(rels, order, [32, 40, 2560]) == 3
    # Overflow and division by zero make a relation fail, never crash or wrap.
    assert ir.sym_rel_program(["s0*s0 >= 0"], ["s0"], [2**40]) == 0
    assert ir.sym_rel_program(["s0 + 1 > s0"], ["s0"], [2**63 - 1]) == 0
    assert ir.sym_rel_program(["7 // s0 == 0"], ["s0"], [0]) == 0
    assert ir.sym_rel_program(["s0 // -1 > 0"], ["s0"], [-(2**63)]) == 0
    assert ir.sym_rel_program([], [], []) is None
    with pytest.raises(ValueError, match="s3 is not among the program's symbols"):
        ir.sym_rel_program(["s3 == 1"], order, [1, 2, 3])
    with pytest.raises(ValueError, match="nested deeper"):
        ir.sym_rel_program(["max(" * 70 + "s0" + ", 1)" * 70 + " == 0"], ["s0"], [1])


# ---- Property tests.

SEED = int(os.environ.get("EMBER_SYM_SEED", "2024"))
NAMES = ["s0", "s1", "s2"]


def _random_symbols(rng, count):
    """Lines for `count` symbols, and for each the values to try (multiples of the divisor in range)."""
    lines, values = [], {}
    for name in NAMES[:count]:
        divisor = rng.choice([1, 1, 1, 2, 4, 16])
        lo = rng.choice([-9, -1, 0, 1, 2, 2, 3, 8, 16])
        hi = rng.choice([lo + 1, lo + 7, lo + 40, lo + 300, INF])
        top = min(hi, lo + 400)
        vals = [v for v in range(lo, top + 1) if v % divisor == 0]
        if not vals:
            divisor, vals = 1, list(range(lo, top + 1))
        lines.append(f"symbol {name} hint={vals[0]} range=[{lo}, {'inf' if hi == INF else hi}] divisor={divisor}")
        values[name] = vals
    return lines, values


def _random_expr(rng, names, depth):
    if depth == 0 or rng.random() < 0.3:
        return rng.choice(names + [str(rng.randint(-8, 8))])
    op = rng.choice(["+", "-", "*", "//", "%", "max", "min", "lin"])
    a = _random_expr(rng, names, depth - 1)
    if op == "lin":  # linear forms with coefficients: what the divisibility rules see
        return f"{rng.choice([2, 3, 4, 16, -2])}*{rng.choice(names)} + ({a})"
    if op in ("//", "%"):
        b = rng.choice(names + [str(rng.choice([-4, -3, 2, 3, 4, 8, 16]))])
        return f"({a}) {op} ({b})"
    b = _random_expr(rng, names, depth - 1)
    if op in ("max", "min"):
        return f"{op}({a}, {b})"
    return f"({a}) {op} ({b})"


def _random_rel(rng, names):
    shape = rng.randrange(5)
    if shape == 0:  # symbol vs constant, often decidable by range
        lhs, rhs = rng.choice(names), str(rng.choice([-3, 0, 1, 2, 8, 16, 40, 4096]))
    elif shape == 1:  # divisibility
        lhs, rhs = f"({_random_expr(rng, names, 1)}) % {rng.choice([2, 4, 8, 16, 32])}", "0"
    elif shape == 2:  # linear form vs constant
        lhs = f"{rng.choice([2, 4, 16, -3])}*{rng.choice(names)} + {rng.choice(names)}"
        rhs = str(rng.randint(-20, 20))
    elif shape == 3:
        lhs, rhs = _random_expr(rng, names, 2), _random_expr(rng, names, 2)
    else:  # products sharing symbols (the strides of a dense layout): what cancelling decides
        def product():
            return "*".join([str(rng.choice([1, 2, 3, -2]))] + [rng.choice(names) for _ in range(rng.randint(0, 3))])
        lhs, rhs = product(), product()
    return f"{lhs} {rng.choice(['==', '!=', '<', '<=', '>', '>='])} {rhs}"


def _points(rng, values, n):
    return [{name: rng.choice(vals) for name, vals in values.items()} for _ in range(n)]


def _value(text, env):
    try:
        return eval(text, {}, dict(env))
    except ZeroDivisionError:
        return None


def test_statically_known_is_never_wrong(ir):
    rng = random.Random(SEED)
    decided = 0
    for case in range(3000):
        lines, values = _random_symbols(rng, rng.randint(1, 3))
        names = list(values)
        rel = _random_rel(rng, names)
        known = ir.sym_statically_known(rel, lines)
        if known is None:
            continue
        decided += 1
        for env in _points(rng, values, 8):
            got = _value(rel, env)
            assert got is None or got == known, (
                f"EMBER_SYM_SEED={SEED} case {case}: {rel!r} over {lines} said {known}, but at {env} it is {got}")
    assert decided > 600, decided  # the generator must exercise the deciding rules


def test_bound_and_simplify_hold_at_every_allowed_value(ir):
    rng = random.Random(SEED + 1)
    for case in range(1500):
        lines, values = _random_symbols(rng, rng.randint(1, 3))
        text = _random_expr(rng, list(values), 4)
        try:
            canonical = ir.simplify_expr(text)
        except ValueError:  # a division by a constant 0 or similar: not an expression
            continue
        lo, hi = ir.sym_bound(canonical, lines)
        simple = ir.sym_simplify(canonical, lines)
        for env in _points(rng, values, 6):
            v = _value(canonical, env)
            if v is None or not NEG_INF <= v <= INF:  # no value in int64 here
                continue
            where = f"EMBER_SYM_SEED={SEED} case {case}: {canonical!r} over {lines} at {env}"
            assert lo <= v <= hi, f"{where}: {v} outside [{lo}, {hi}]"
            assert _value(simple, env) == v, f"{where}: simplified to {simple!r}"


def test_rel_program_agrees_with_evaluation(ir):
    rng = random.Random(SEED + 2)
    for case in range(300):
        lines, values = _random_symbols(rng, 3)
        rels = [ir.sym_rel(_random_rel(rng, NAMES)) for _ in range(rng.randint(1, 5))]
        for env in _points(rng, values, 4):
            want = next((i for i, r in enumerate(rels) if not _value(r, env)), None)
            got = ir.sym_rel_program(rels, NAMES, [env[n] for n in NAMES])
            assert got == want, f"EMBER_SYM_SEED={SEED} case {case}: {rels} at {env}"


NARROW = [
    ("3 <= (s1 + -10) // 5 + 1", "symbol s1 hint=900", "symbol s1 hint=900 range=[20, inf]"),  # a conv's length
    ("10 <= s1", "symbol s1 hint=900", "symbol s1 hint=900 range=[10, inf]"),
    ("s1 <= 4096", "symbol s1 hint=16", "symbol s1 hint=16 range=[2, 4096]"),
    ("2*s1 + 1 < 100", "symbol s1 hint=16", "symbol s1 hint=16 range=[2, 49]"),
    ("s1 % 4 < 3", "symbol s1 hint=16", "symbol s1 hint=16"),                  # not monotone: unchanged
    ("s1*s1 <= 100", "symbol s1 hint=4", "symbol s1 hint=4"),                  # a product of the symbol: not known monotone
]


@pytest.mark.parametrize("rel,symbol,want", NARROW, ids=[n[0] for n in NARROW])
def test_narrow_range(ir, rel, symbol, want):
    assert ir.sym_narrow_range(rel, symbol) == ir.sym_symbol(want)


def test_narrow_range_keeps_every_value_the_relation_admits(ir):
    """Soundness: a value where the relation holds is never outside the narrowed range."""
    rng = random.Random(SEED)
    narrowed = 0
    for case in range(2000):
        a, c = rng.choice([1, 2, 3, -1, -2]), rng.randint(-20, 20)
        inner = f"{a}*s0 + {c}"
        for _ in range(rng.randint(0, 2)):
            inner = f"({inner}) // {rng.choice([2, 3, 5])} + {rng.randint(-3, 3)}"
        op = rng.choice(["<", "<=", ">", ">="])
        k = rng.randint(-30, 30)
        rel = f"{inner} {op} {k}"
        hint = rng.randint(2, 200)
        if not _value(rel, {"s0": hint}):
            continue
        line = ir.sym_narrow_range(rel, f"symbol s0 hint={hint}")
        lo, hi = ir.sym_bound("s0", [line])
        narrowed += (lo, hi) != (2, INF)
        for v in range(2, 400):
            if _value(rel, {"s0": v}):
                assert lo <= v <= hi, f"EMBER_SYM_SEED={SEED} case {case}: {rel!r} at s0={v} but narrowed to {line}"
    assert narrowed > 200, narrowed
