"""Regenerates the erf and exp polynomial coefficients of src/codegen/cpp/include/ember/vec_math.h.

Not a test: run by hand (`python vec_fit_coeffs.py`) when a fit changes. Both run in float, and each
fit is minimax for the error it adds to the function's result (Lawson's iteratively reweighted least
squares on Chebyshev nodes, against mpmath at 50 digits), then rounded to float coefficients and
re-checked with mpmath with those coefficients.

erf has two pieces. Below 1, erf(t) = t (c0 + z P(z)) with z = t * t: P of degree 5 fitted to
(erf(t) / t - c0) / z, weighted by z / (erf(t) / t) (the error relative to erf). From 1 to 4,
erf(t) = 1 - exp(-t^2) Q(u) with u = (2t - 5) / 3: Q of degree 8 fitted to erfc(t) exp(t^2), weighted
by exp(-t^2) / 2^-24 (the error in ulps of a result just below 1).

exp runs in float: exp(r) = 1 + (r + r^2 P(r)) on |r| <= ln2/2 (plus a margin for the fma-rounded
reduction), P of degree 4 fitted to (exp(r) - 1 - r) / r^2 so that the error of the whole, relative
to exp(r), is minimax (Lawson's iteratively reweighted least squares on Chebyshev nodes), then
rounded to float and re-checked with mpmath with the float coefficients.
"""
import mpmath
import numpy as np

mpmath.mp.dps = 50


def lawson(x, g, weight, degree, iterations=3000):
    """Coefficients (x^0 first) of the polynomial minimizing max |(P(x) - g) * weight| over the nodes x."""
    V = np.vander(x, degree + 1, increasing=True)
    lw = np.ones(len(x)) / len(x)
    for _ in range(iterations):
        w = np.sqrt(lw) * weight
        coeffs, *_ = np.linalg.lstsq(V * w[:, None], g * w, rcond=None)
        err = np.abs((V @ coeffs - g) * weight)
        lw = lw * err
        lw /= lw.sum()
    return [float(np.float32(c)) for c in coeffs]


def chebyshev_nodes(lo, hi, n=3000):
    return lo + (hi - lo) * (np.cos(np.pi * (np.arange(n) + 0.5) / n) + 1) / 2


def polyval_mp(coeffs, x):
    return sum(mpmath.mpf(c) * x ** k for k, c in enumerate(coeffs))


C0 = 2 / mpmath.sqrt(mpmath.pi)


def fit_erf_small(degree=5):
    z = chebyshev_nodes(0, 1)
    ratio = [mpmath.erf(mpmath.sqrt(v)) / mpmath.sqrt(v) for v in z]
    g = np.array([float((r - C0) / v) for r, v in zip(ratio, z)])
    coeffs = lawson(z, g, z / np.array([float(r) for r in ratio]), degree)
    worst = 0.0
    for v in np.linspace(1e-6, 1, 4001):
        zm = mpmath.mpf(float(v))
        exact = mpmath.erf(mpmath.sqrt(zm)) / mpmath.sqrt(zm)
        worst = max(worst, abs(float((C0 + zm * polyval_mp(coeffs, zm) - exact) / exact)))
    return coeffs, worst


def fit_erf_big(degree=8):
    u = chebyshev_nodes(-1, 1)
    t = (3 * u + 5) / 2
    g = np.array([float(mpmath.erfc(v) * mpmath.exp(v * v)) for v in t])
    weight = np.array([float(mpmath.exp(-v * v)) for v in t]) / 2.0 ** -24
    coeffs = lawson(u, g, weight, degree)
    worst = 0.0
    for v in np.linspace(-1, 1, 4001):
        tm = (3 * mpmath.mpf(float(v)) + 5) / 2
        err = (polyval_mp(coeffs, mpmath.mpf(float(v))) - mpmath.erfc(tm) * mpmath.exp(tm * tm)) * mpmath.exp(-tm * tm)
        worst = max(worst, abs(float(err)) / 2.0 ** -24)
    return coeffs, worst


def fit_exp(degree=4, half_width=0.34657359027997264 + 2e-5):
    r = chebyshev_nodes(-half_width, half_width, 4000)
    g = np.array([float((mpmath.exp(mpmath.mpf(x)) - 1 - x) / mpmath.mpf(x) ** 2) for x in r])
    as_float = lawson(r, g, r ** 2 / np.exp(r), degree)  # the error of r^2 P(r) relative to exp(r)
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
    hi = np.float32(float(C0))
    lo = np.float32(float(C0 - mpmath.mpf(float(hi))))
    print(f"// erf: c0 = 2 / sqrt(pi) as float hi + lo: {float(hi).hex()}, {float(lo).hex()}")
    coeffs, worst = fit_erf_small()
    print(f"// erf below 1: P(z), z^0 first, max rel error {worst:.2e} (relative to erf(t) / t)")
    print("  " + ", ".join(float(c).hex() for c in coeffs))
    coeffs, worst = fit_erf_big()
    print(f"// erf from 1 to 4: Q(u), u^0 first, max error {worst:.3f} ulp of a result below 1")
    print("  " + ", ".join(float(c).hex() for c in coeffs))
