"""Regenerates the erf and exp polynomial coefficients of src/codegen/cpp/include/ember/vec_math.h.

Not a test: run by hand (`python vec_fit_coeffs.py`) when a fit changes. Each erf piece is a
Chebyshev interpolant of a smooth function computed with mpmath at 50 digits, converted to monomials
in the interval variable u in [-1, 1] (well conditioned for these degrees), and checked on a dense
grid against mpmath. The header evaluates these in double precision, so a relative error near 1e-12
is far below the float32 rounding that follows.

exp runs in float: exp(r) = 1 + (r + r^2 P(r)) on |r| <= ln2/2 (plus a margin for the fma-rounded
reduction), P of degree 4 fitted to (exp(r) - 1 - r) / r^2 so that the error of the whole, relative
to exp(r), is minimax (Lawson's iteratively reweighted least squares on Chebyshev nodes), then
rounded to float and re-checked with mpmath with the float coefficients.
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


def fit_exp(degree=4, half_width=0.34657359027997264 + 2e-5, nodes=4000, iterations=3000):
    r = np.cos(np.pi * (np.arange(nodes) + 0.5) / nodes) * half_width
    g = np.array([float((mpmath.exp(mpmath.mpf(x)) - 1 - x) / mpmath.mpf(x) ** 2) for x in r])
    weight = r ** 2 / np.exp(r)  # the error of r^2 P(r) relative to exp(r)
    V = np.vander(r, degree + 1, increasing=True)
    lawson = np.ones(nodes) / nodes
    for _ in range(iterations):
        w = np.sqrt(lawson) * weight
        coeffs, *_ = np.linalg.lstsq(V * w[:, None], g * w, rcond=None)
        err = np.abs((V @ coeffs - g) * weight)
        lawson = lawson * err
        lawson /= lawson.sum()
    as_float = [float(np.float32(c)) for c in coeffs]
    worst = 0.0
    for x in np.linspace(-half_width, half_width, 20001):
        xm = mpmath.mpf(float(x))
        p = 1 + xm + xm ** 2 * sum(mpmath.mpf(c) * xm ** k for k, c in enumerate(as_float))
        worst = max(worst, abs(float((p - mpmath.exp(xm)) / mpmath.exp(xm))))
    return as_float, worst


if __name__ == "__main__":
    coeffs, worst = fit_exp()
    print(f"// exp: P(r), r^0 first, float coefficients, max rel error {worst:.2e} ({worst / 2 ** -23:.3f} ulp of 1)")
    print("  " + ", ".join(float(c).hex() for c in coeffs))
    # erf(t) / t as a function of z = t * t on [0, 1].
    f_small = lambda z: mpmath.erf(mpmath.sqrt(z)) / mpmath.sqrt(z) if z != 0 else 2 / mpmath.sqrt(mpmath.pi)
    show("kErfSmall: erf(t) / t, v = t * t", *fit(f_small, 0, 1, 8), 0, 1)
    # erfc(t) * exp(t * t) on [1, 4]; beyond 4, erf rounds to 1 in float32.
    f_big = lambda t: mpmath.erfc(t) * mpmath.exp(t * t)
    show("kErfBig: erfc(t) * exp(t * t), v = t", *fit(f_big, 1, 4, 14), 1, 4)
