"""simplify against brute force: random affine / floordiv / mod index expressions are
simplified by `ember-opt --loop --pass simplify`, then the original and the simplified
expression are evaluated (Python's // and % are the IR's) at every point of the iteration space.
A mismatch is a wrong simplification. The seed is printed; EMBER_SIMPLIFY_SEED=N replays one."""
import itertools
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "golden"))
import golden  # noqa: E402

VARS = ["i0", "i1", "r0"]


def affine(rng, symbolic):
    terms = []
    for v in rng.sample(VARS, rng.randint(1, 3)):
        c = rng.choice([1, 1, 2, 3, 4, 8, 16, -1, -2])
        if symbolic and rng.random() < 0.4:
            terms.append(f"{c}*s0*{v}")
        else:
            terms.append(f"{c}*{v}")
    if rng.random() < 0.6:
        terms.append(str(rng.randint(-9, 9)))
    rng.shuffle(terms)
    return " + ".join(terms)


def expression(rng, symbolic, depth=0):
    x = affine(rng, symbolic)
    if depth < 2 and rng.random() < 0.4:
        x = f"{x} + {rng.choice([1, 2, 4])}*({expression(rng, symbolic, depth + 1)})"
    divisor = rng.choice(["1", "2", "3", "4", "8", "16"] + (["s0", "2*s0"] if symbolic else []))
    op = rng.choice(["//", "%"])
    x = f"({x}) {op} {divisor}"
    if rng.random() < 0.5:
        x = f"({x}) {rng.choice(['//', '%'])} {rng.choice(['1', '2', '4', '8'])}"
    if rng.random() < 0.3:
        x = f"{x} + ({affine(rng, symbolic)}) % {rng.choice(['2', '5', '8'])}"
    return x


def make_program(rng, cases):
    # s0 takes 1 too below (the simplifier must not assume more than its declared range).
    lines = ["program @random {", "  symbol s0 hint=2 range=[1, inf]", "  buffer %b0 : f32[1]{1} input 0"]
    for k, (extents, exprs) in enumerate(cases):
        lines.append(f"  kernel @k{k} [i0 < {extents[0]}, i1 < {extents[1]}] {{")
        lines.append(f"    loop [r0 < {extents[2]}] {{")
        for n, e in enumerate(exprs):
            lines.append(f"      %t{n} = index {e} : i64")
        lines += ["    }", "  }"]
    lines += ["  return ()", "}"]
    return "\n".join(lines) + "\n"


INDEX = re.compile(r"^\s*%t(\d+) = index (.*) : i64$")


def simplified(program):
    result = subprocess.run([str(golden.BINARY), "--loop", "--verify", "--pass", "simplify", "-"],
                            input=program, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    out, kernel = [], -1
    for line in result.stdout.splitlines():
        if line.strip().startswith("kernel @"):
            kernel += 1
            out.append([])
        elif m := INDEX.match(line):
            out[kernel].append(m.group(2))
    return out


def test_simplify_matches_brute_force():
    seed = int(os.environ.get("EMBER_SIMPLIFY_SEED", time.time_ns() % 1_000_000))
    print(f"simplify brute-force seed: {seed}")
    rng = random.Random(seed)
    cases = []
    for k in range(60):
        symbolic = k % 3 == 0
        extents = [rng.randint(1, 5), "s0" if symbolic else rng.randint(1, 9), rng.randint(1, 6)]
        cases.append((extents, [expression(rng, symbolic) for _ in range(6)]))
    after = simplified(make_program(rng, cases))
    changed = 0
    for (extents, exprs), new_exprs in zip(cases, after):
        assert len(new_exprs) == len(exprs)
        for old, new in zip(exprs, new_exprs):
            changed += old.replace(" ", "") != new.replace(" ", "")
            f_old, f_new = compile(old, "old", "eval"), compile(new, "new", "eval")
            for s0 in ([1, 2, 3, 5] if extents[1] == "s0" else [None]):
                sizes = [s0 if e == "s0" else e for e in extents]
                for i0, i1, r0 in itertools.product(*(range(n) for n in sizes)):
                    env = {"i0": i0, "i1": i1, "r0": r0, "s0": s0}
                    want, got = eval(f_old, {}, env), eval(f_new, {}, env)
                    assert want == got, (f"seed {seed}: {old} -> {new} is wrong at {env} "
                                         f"(extents {extents}): {want} != {got}")
    assert changed > 0, f"seed {seed}: nothing was simplified"


def test_division_and_remainder_by_a_symbol_recombine():
    # c*k*(x // k) + c*(x % k) -> c*x and c*k*((x // k) % m) + c*(x % k) -> c*(x % (k*m)) with a
    # symbolic k (the collapse pass over symbolic extents relies on it); a near miss (the wrong
    # coefficient, another divisor) must stay what it was, and every result must keep the values.
    folds = {
        "s0*(i0 // s0) + i0 % s0": "i0",
        "3*s0*((r0 // s0) % 2) + 3*(r0 % s0)": "3*(r0 % (2*s0))",
        "s0*((i1 + 4*i0) // s0) + (i1 + 4*i0) % s0": "4*i0 + i1",
        "2*s0*s0*(r0 // (s0*s0)) + 2*s0*((r0 // s0) % s0) + 2*(r0 % s0)": "2*r0",
    }
    near_misses = ["2*s0*(r0 // s0) + r0 % s0", "s0*(r0 // s0) + r0 % 3", "s0*(r0 // 2) + r0 % s0"]
    exprs = list(folds) + near_misses
    (after,) = simplified(make_program(random.Random(0), [((3, "s0", 7), exprs)]))
    for old, new in zip(exprs, after):
        if old in folds:
            assert new.replace(" ", "") == folds[old].replace(" ", ""), (old, new)
        else:
            assert "//" in new or "%" in new, (old, new)
        f_old, f_new = compile(old, "old", "eval"), compile(new, "new", "eval")
        for s0 in (1, 2, 3, 5):
            for i0, i1, r0 in itertools.product(range(3), range(s0), range(7)):
                env = {"i0": i0, "i1": i1, "r0": r0, "s0": s0}
                assert eval(f_old, {}, env) == eval(f_new, {}, env), (old, new, env)
