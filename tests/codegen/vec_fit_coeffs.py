"""Regenerates the erf polynomial coefficients of src/codegen/cpp/include/ember/vec_math.h.

Not a test: run by hand (`python vec_fit_coeffs.py`) when a fit changes. Each piece is a Chebyshev
interpolant of a smooth function computed with mpmath at 50 digits, converted to monomials in the
interval variable u in [-1, 1] (well conditioned for these degrees), and checked on a dense grid
against mpmath. The header evaluates these in double precision, so a relative error near 1e-12 is
far below the float32 rounding that follows.
"""
import mpmath
import numpy as np
from numpy.polynomial import chebyshev as C

mpmath.mp.dps = 50


def fit(f, lo, hi, degree):
    nodes = np.cos(np.pi * (np.arange(degree + 1) + 0.5) / (degree + 1))
    xs = [mpmath.mpf(lo) + (mpmath.mpf(hi) - lo) * (mpmath.mpf(float(u)) + 1) / 2 for u in nodes]
    ys = np.array([float(f(x)) for x in xs])
    cheb = C.chebfit(nodes, ys, degree)
    mono = C.cheb2poly(cheb)
    grid = np.linspace(-1, 1, 4001)
    worst = 0.0
    for u in grid:
        x = mpmath.mpf(lo) + (mpmath.mpf(hi) - lo) * (mpmath.mpf(float(u)) + 1) / 2
        approx = np.polynomial.polynomial.polyval(u, mono)
        exact = f(x)
        worst = max(worst, abs(float((approx - exact) / exact)))
    return mono, worst


def show(name, mono, worst, lo, hi):
    print(f"// {name}: u = (2 * v - ({lo} + {hi})) / ({hi} - {lo}), max rel error {worst:.2e}")
    print("  " + ", ".join(repr(float(c)) for c in mono))


if __name__ == "__main__":
    # erf(t) / t as a function of z = t * t on [0, 1].
    f_small = lambda z: mpmath.erf(mpmath.sqrt(z)) / mpmath.sqrt(z) if z != 0 else 2 / mpmath.sqrt(mpmath.pi)
    show("kErfSmall: erf(t) / t, v = t * t", *fit(f_small, 0, 1, 8), 0, 1)
    # erfc(t) * exp(t * t) on [1, 4]; beyond 4, erf rounds to 1 in float32.
    f_big = lambda t: mpmath.erfc(t) * mpmath.exp(t * t)
    show("kErfBig: erfc(t) * exp(t * t), v = t", *fit(f_big, 1, 4, 14), 1, 4)
