"""Device functions that Ember's generated Triton kernels call as ``eh.<name>`` (docs/codegen-triton.md).

They cover math that ``triton.language`` lacks or gets wrong for torch's semantics:
- ``maximum``/``minimum`` and the ``reduce_max``/``reduce_min`` reductions propagate NaN like torch
  (``tl.maximum`` and ``tl.max`` drop it on the GPU);
- ``floordiv_*``/``mod_*`` round toward -inf like Python and torch (Triton's ``//`` and ``%`` truncate);
- transcendentals go through libdevice on the GPU (``tl.exp``, ``tl.sin``... are approximate there).

Triton's interpreter (``TRITON_INTERPRET=1``, read once at import) cannot run libdevice (triton#8825),
so there each libdevice function has a ``tl``-level shim instead: numpy-backed, computed in float64
where float32 would lose accuracy, accurate to float32 rounding (not to float64's).

The bytes of this file are part of the cubin cache key: a change here recompiles every kernel.
"""
import os

import triton
import triton.language as tl

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"


# ---- torch semantics on top of tl (the same on the GPU and in the interpreter)

@triton.jit
def maximum(a, b):
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def minimum(a, b):
    return tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def div(a, b):
    # IEEE division: a plain float32 `/` is div.full.f32 on the GPU (2 ulp); div_rn is float32-only.
    if a.dtype == tl.float32:
        return tl.div_rn(a, b)
    else:
        return a / b


@triton.jit
def reciprocal(x):
    return div(tl.full(x.shape, 1, x.dtype), x)


@triton.jit
def sqrt(x):
    if x.dtype == tl.float32:
        return tl.sqrt_rn(x)
    else:
        return tl.sqrt(x)


if not INTERPRET:
    # One cross-lane reduction whose combine keeps NaN (max.NaN.f32 on sm_80+): a reduction of a
    # row across warps costs a shared-memory round and a barrier, so a second one for a NaN flag
    # (the interpreter's form below) is a real cost in softmax's three.
    @triton.jit
    def reduce_max(x, axis: tl.constexpr):
        return tl.reduce(x, axis, maximum)

    @triton.jit
    def reduce_min(x, axis: tl.constexpr):
        return tl.reduce(x, axis, minimum)
else:
    # tl.max plus a NaN flag: a custom-combine tl.reduce runs ~1000x slower in the interpreter.
    @triton.jit
    def _nan_if_any(m, x, axis: tl.constexpr):
        if x.dtype.is_floating():
            m = tl.where(tl.max((x != x).to(tl.int32), axis) > 0, float("nan"), m).to(x.dtype)
        return m

    @triton.jit
    def reduce_max(x, axis: tl.constexpr):
        return _nan_if_any(tl.max(x, axis), x, axis)

    @triton.jit
    def reduce_min(x, axis: tl.constexpr):
        return _nan_if_any(tl.min(x, axis), x, axis)


if not INTERPRET:
    # A matmul template's tl.dot operand, as loaded (bf16/f16 go to the tensor cores as they are).
    @triton.jit
    def dot_operand(x):
        return x
else:
    # The interpreter's tl.dot multiplies bf16 operands' raw bits (Triton 3.6): upcast first. A
    # bf16 or f16 product is exact in float32, as on the GPU's tensor cores.
    @triton.jit
    def dot_operand(x):
        return x.to(tl.float32)


@triton.jit
def _mul(a, b):
    return a * b


@triton.jit
def reduce_prod(x, axis: tl.constexpr):
    return tl.reduce(x, axis, _mul)


@triton.jit
def floordiv_int(a, b):
    # Correct whether the backend's // truncates (the GPU) or not: the remainder's sign decides.
    q = a // b
    r = a - q * b
    return tl.where((r != 0) & ((r < 0) != (b < 0)), q - 1, q)


@triton.jit
def mod_int(a, b):
    r = a - (a // b) * b
    return tl.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)


@triton.jit
def floordiv_float(a, b):
    # torch's div_floor_floating: from fmod, so floor(a / b) is not off by one when a / b rounds.
    q = div(a, b)
    m = fmod(a, b)
    d = div(a - m, b)
    d = tl.where((m != 0) & ((b < 0) != (m < 0)), d - 1, d)
    f = tl.floor(d)
    f = tl.where(d - f > 0.5, f + 1, f)
    f = tl.where(d == 0, tl.where(q < 0, -0.0, 0.0), f)
    return tl.where(b == 0, q, f).to(a.dtype)


@triton.jit
def mod_float(a, b):
    m = fmod(a, b)
    return tl.where((m != 0) & ((b < 0) != (m < 0)), m + b, m)


@triton.jit
def pow_int(a, b):
    # Square and multiply over the exponent's low 32 bits (torch: exponents are >= 0).
    result = a * 0 + 1
    base = a
    for i in tl.static_range(32):
        result = tl.where(((b >> i) & 1) != 0, result * base, result)
        base = base * base
    return result


@triton.jit
def sigmoid(x):
    return reciprocal(1.0 + exp(-x))


if not INTERPRET:
    # Plain aliases of the CUDA backend's libdevice builtins (Ember's GPU target is NVIDIA only).
    # Not of `triton.language.extra.libdevice`: its functions are stubs that Triton swaps for the
    # backend's only when reached as an attribute of that module (`libdevice.exp` in a kernel), so an
    # alias of a stub compiles to None. These aliases give the same sm_90 PTX as one-line
    # @triton.jit wrappers (checked instruction for instruction; only line info differs). One table
    # of names, not thirteen assignments: only `round` differs from its libdevice name.
    from triton.language.extra.cuda import libdevice

    _LIBDEVICE = {"exp": "exp", "log": "log", "log1p": "log1p", "expm1": "expm1", "rsqrt": "rsqrt", "sin": "sin",
                  "cos": "cos", "tanh": "tanh", "erf": "erf", "pow": "pow", "trunc": "trunc", "round": "nearbyint",
                  "fmod": "fmod"}
    globals().update({name: getattr(libdevice, fn) for name, fn in _LIBDEVICE.items()})

else:
    # Shims: the interpreter runs tl.exp/log/sin/cos/sqrt/erf as numpy on the operand's dtype,
    # whose float32 loops are a few ulp off: the shims compute in float64 and round once.

    @triton.jit
    def exp(x):
        return tl.exp(x.to(tl.float64)).to(x.dtype)

    @triton.jit
    def log(x):
        return tl.log(x.to(tl.float64)).to(x.dtype)

    @triton.jit
    def log1p(x):
        y = x.to(tl.float64)
        small = tl.abs(y) < 1e-4
        return tl.where(small, y * (1.0 - y * (0.5 - y / 3.0)), tl.log(1.0 + y)).to(x.dtype)

    @triton.jit
    def expm1(x):
        y = x.to(tl.float64)
        small = tl.abs(y) < 1e-5
        return tl.where(small, y * (1.0 + 0.5 * y), tl.exp(y) - 1.0).to(x.dtype)

    @triton.jit
    def rsqrt(x):
        return (1.0 / tl.sqrt(x.to(tl.float64))).to(x.dtype)

    @triton.jit
    def sin(x):
        return tl.sin(x.to(tl.float64)).to(x.dtype)

    @triton.jit
    def cos(x):
        return tl.cos(x.to(tl.float64)).to(x.dtype)

    @triton.jit
    def tanh(x):
        y = x.to(tl.float64)
        e = tl.exp(-2.0 * tl.abs(y))
        t = (1.0 - e) / (1.0 + e)
        small = tl.abs(y) < 1e-4
        t = tl.where(small, tl.abs(y) * (1.0 - y * y / 3.0), t)
        return tl.where(y < 0, -t, t).to(x.dtype)

    @triton.jit
    def erf(x):
        return tl.erf(x.to(tl.float64)).to(x.dtype)

    @triton.jit
    def pow(a, b):
        # exp(b log|a|) with torch's (C's) special cases: x**0 = 1, 1**y = 1, a negative base with
        # an integral exponent keeps its sign by parity, otherwise NaN.
        af = a.to(tl.float64)
        bf = b.to(tl.float64)
        mag = tl.exp(bf * tl.log(tl.abs(af)))
        integral = tl.floor(bf) == bf
        odd = integral & (tl.abs(bf - 2.0 * tl.floor(bf / 2.0)) == 1.0)
        r = tl.where(af < 0, tl.where(integral, tl.where(odd, -mag, mag), float("nan")), mag)
        r = tl.where((bf == 0) | (af == 1), 1.0, r)
        return r.to(a.dtype)

    @triton.jit
    def trunc(x):
        return tl.where(x < 0, tl.ceil(x), tl.floor(x))

    @triton.jit
    def round(x):
        f = tl.floor(x)
        d = x - f
        half_even = tl.where(f - 2.0 * tl.floor(f * 0.5) == 0, f, f + 1.0)
        return tl.where(d > 0.5, f + 1.0, tl.where(d < 0.5, f, half_even)).to(x.dtype)

    @triton.jit
    def fmod(a, b):
        # Exact: fmod's result is representable, and float64 holds a float32 quotient's integer part.
        af = a.to(tl.float64)
        bf = b.to(tl.float64)
        q = af / bf
        q = tl.where(q < 0, tl.ceil(q), tl.floor(q))
        return (af - q * bf).to(a.dtype)
