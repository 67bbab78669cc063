"""Runs one fuzz program eagerly and through Ember, and says how they differ.

Variants (each after ember.reset(), with options {"strict": True} so that a backend bug raises
instead of quietly running eagerly):
  eager-backend   backend="eager": capture, guards and graph breaks, each node run by torch;
  ember           backend="ember";
  ember-no-grad   backend="ember" with eager and compiled calls under torch.no_grad();
  ember-triton    ember-no-grad through the GPU backend's Triton kernels in Triton's interpreter
                  (options={"triton_interpret": True}); only when TRITON_INTERPRET=1 was set at start;
  ember-cuda      ember-no-grad on CUDA: the inputs moved to the GPU and torch's default device CUDA
                  (factories in the program), eager on CUDA the reference; only when asked for (it
                  compiles Triton kernels: seconds a program), and a program eager rejects on CUDA is
                  skipped.
Each variant calls the program twice, with inputs from seeds 0 and 1 (same shapes, new values: a
graph that baked in a value or a guard that missed a branch shows on the second call), and compares
with eager: outputs, the inputs after the call (mutations, appends to an input list), and how
outputs alias the inputs and each other.

Values are compared under the fp64-reference rule (DESIGN.md, Testing): a tensor that differs from
eager's beyond torch.testing.assert_close's defaults is still right when its distance to a float64
reference (the same program on inputs cast to float64) is at most 2x eager's + 1e-6, plus one unit
in the last place of the output's dtype for float16/bfloat16 (the Triton interpreter truncates when
it rounds). A program with float16/bfloat16 values may also differ from the reference by one more unit in the last place
of the largest such value it makes (a float32 difference upstream moves a rounding: _low_precision_slack), or
meet the rule against a second reference where only explicit casts round and the arithmetic after them is float64 (_exact_low_precision:
a compiler may compute low-precision arithmetic in float32 and round only where a value is stored, as
Inductor's kernels do by default, where eager rounds after every op). Integer and bool tensors are right where they equal eager's or the reference's value
(a comparison of two floats may flip when the floats are computed more exactly).

Failure kinds: "wrong-result", "aliasing", "crash" (the compiled call raised where eager did not),
"internal-error" (ember.InternalError: a backend stage failed), "backend-error" (stats() counted a
codegen failure or backend error without raising).
"""
import contextlib
import dataclasses
import os

from .generator import _generator, _on_device, generate, load

VARIANTS = ("eager-backend", "ember", "ember-no-grad", "ember-triton", "ember-cuda")
N_CALLS = 2


@dataclasses.dataclass
class Failure:
    kind: str
    variant: str
    message: str

    def same_as(self, other):
        return other is not None and self.kind == other.kind and self.variant == other.variant


def default_variants():
    """Every variant this process can run (ember-triton needs TRITON_INTERPRET=1 from the start), but
    ember-cuda, which runs only when named."""
    return [v for v in VARIANTS if v != "ember-cuda" and (v != "ember-triton" or os.environ.get("TRITON_INTERPRET") == "1")]


def _float64(tree, memo=None):
    """The inputs with every floating tensor in float64 (the others cloned); a tensor passed twice stays one."""
    import torch
    memo = {} if memo is None else memo
    if isinstance(tree, torch.Tensor):
        if id(tree) not in memo:
            memo[id(tree)] = tree.double() if tree.is_floating_point() else tree.clone()
        return memo[id(tree)]
    if isinstance(tree, (list, tuple)):
        return type(tree)(_float64(v, memo) for v in tree)
    if isinstance(tree, dict):
        return {k: _float64(v, memo) for k, v in tree.items()}
    return tree


@dataclasses.dataclass
class _Call:
    out: object
    inputs: tuple
    error: Exception = None
    # The recording runs (the reference's and eager's): one unit in the last place of the largest
    # float16/bfloat16 value the program made (0 without such values), and whether it made float32 values
    # (read of the reference run only); see _low_precision_slack.
    low_precision_slack: float = 0.0
    made_float32: bool = False


def _low_precision_slack():
    """A torch function mode that records, in `.slack`, one unit in the last place (of its dtype) of the largest
    finite float16/bfloat16 value any op makes. A program that rounds values to float16/bfloat16 computes its
    later values from them: a float32 difference upstream that eager and a compiler may both have (a sum in
    another order, a transcendental one float32 ulp apart) moves a rounding by one unit of those values, and
    every value computed from it by as much, whatever the dtype or size of the outputs (a sum of bfloat16
    values near 1 that cancels to 0.01 moves by 0.004). Eager's own error then says nothing about what the
    compiler may do, so the rule allows that much more (run_variant). It runs in the reference run, where
    such values come from the program's explicit casts, and in eager's run, where they are every
    float16/bfloat16 value the program makes (from low-precision inputs too): an op may round differently
    there, not only a sum (seed 1507410: torch's CPU `rsqrt` of a bfloat16 2.75 rounds the square root to
    bfloat16 first, 1 / bf16(sqrt(x)), and gives 0.60546875 where the correctly rounded value, Ember's, is
    0.6015625; divided by 2.75 into a float32 output, one unit moved the result 0.0014 against a bound of
    1e-4).

    It also records, in `.made_float32`, whether any op made a float32 value. The reference run has every
    input in float64, so such a value is one the program makes float32 (a cast, a dtype argument, a default
    dtype); its float32 arithmetic is the reference's own, which eager repeats op for op: eager matches the
    reference by construction there, and the rule's bound of twice eager's error says nothing about a compiler
    that sums in another order (seed 52381: `x.float().mean().item()` times a float64 tensor, 1 float32 unit off
    the reference where eager was exact, against a bound of 1e-6). Float64 outputs of such a program are
    compared with eager's at float32's tolerances instead (run_variant)."""
    import torch
    from torch.overrides import TorchFunctionMode

    ulp = {torch.bfloat16: 2.0 ** -7, torch.float16: 2.0 ** -10}

    class Record(TorchFunctionMode):
        slack = 0.0
        made_float32 = False

        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in (out if isinstance(out, (list, tuple)) else (out,)):
                Record.made_float32 |= isinstance(t, torch.Tensor) and t.dtype == torch.float32
                if isinstance(t, torch.Tensor) and t.dtype in ulp and t.numel():
                    largest = t.detach().abs().nan_to_num(0.0, 0.0, 0.0).amax().item()
                    Record.slack = max(Record.slack, ulp[t.dtype] * largest)
            return out

    return Record()


def _exact_low_precision():
    """A torch function mode under which every float16/bfloat16 value is float64: explicit casts
    (`x.to(torch.bfloat16)`) still round, the arithmetic after them does not. The reference of a compiler that
    computes low-precision arithmetic in float32 and rounds only where a value is stored, as Inductor's kernels
    do by default (Ember's did until session 24: they now round as eager does, after every op). Each value keeps the dtype it
    has in the program (`_ember_program_dtype`, from the inputs and, per op, the op run on meta tensors of those
    dtypes), so that a cast to the dtype a value already has is none, as in eager (which returns the tensor
    itself), rather than a rounding of the float64 value; and an in-place write into a tensor the program has
    in float16/bfloat16 rounds, as storing into that memory does."""
    import torch
    from torch.overrides import TorchFunctionMode

    low = (torch.float16, torch.bfloat16)
    casts = (torch.Tensor.to, torch.Tensor.type, torch.Tensor.type_as, torch.Tensor.half, torch.Tensor.bfloat16)

    def program_dtype(t):
        return getattr(t, "_ember_program_dtype", t.dtype)

    def as_meta(x):
        if isinstance(x, torch.Tensor):
            return torch.empty_strided(x.shape, x.stride(), dtype=program_dtype(x), device="meta")
        if isinstance(x, (list, tuple)):
            return type(x)(as_meta(v) for v in x)
        if isinstance(x, dict):
            return {k: as_meta(v) for k, v in x.items()}
        return x

    def widen(out, meta):
        """`out` in float64 where it is float16/bfloat16, each tensor marked with its dtype in the program."""
        if isinstance(out, torch.Tensor):
            dtype = meta.dtype if isinstance(meta, torch.Tensor) else out.dtype
            if out.dtype in low:
                out = out.double()
            if dtype in low and out.dtype == torch.float64:
                out._ember_program_dtype = dtype
            return out
        if isinstance(out, (list, tuple)):
            metas = meta if isinstance(meta, (list, tuple)) and len(meta) == len(out) else [None] * len(out)
            return type(out)(widen(v, m) for v, m in zip(out, metas))
        return out

    class Exact(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            try:
                meta = func(*as_meta(args), **as_meta(kwargs))
            except Exception:  # no meta kernel, data-dependent: the value's own dtype stands
                meta = None
            if (func in casts and args and isinstance(args[0], torch.Tensor) and isinstance(meta, torch.Tensor)
                    and meta.dtype == program_dtype(args[0]) and not kwargs.get("copy")):
                return args[0]
            if args and out is args[0] and isinstance(meta, torch.Tensor) and meta.dtype != program_dtype(args[0]):
                out = out.clone()  # a cast that copies in the program (`x.double()` of a bfloat16 x): unmarked
            name = getattr(func, "__name__", "")
            if (args and isinstance(args[0], torch.Tensor) and program_dtype(args[0]) in low
                    and (name == "__setitem__" or (name.endswith("_") and not name.startswith("__")))):
                # An in-place write stores into memory of the program's dtype: it rounds, in every compiler.
                args[0].copy_(args[0].to(program_dtype(args[0])).to(args[0].dtype))
            return widen(out, meta)

    return Exact()


def _mark_program_dtypes(wide, original):
    """Marks each float64 tensor of `wide` (_float64 of `original`) with its dtype in `original` where that is
    float16/bfloat16 (the program dtypes _exact_low_precision follows)."""
    import torch
    if isinstance(wide, torch.Tensor) and isinstance(original, torch.Tensor):
        if original.dtype in (torch.float16, torch.bfloat16):
            wide._ember_program_dtype = original.dtype
    elif isinstance(wide, (list, tuple)) and isinstance(original, (list, tuple)):
        for w, o in zip(wide, original):
            _mark_program_dtypes(w, o)
    elif isinstance(wide, dict) and isinstance(original, dict):
        for k in wide:
            _mark_program_dtypes(wide[k], original.get(k))
    return wide


def _call(fn, inputs_fn, i, cast=None, exact_low_precision=False, device=None, record=False):
    import torch
    args = inputs_fn(_generator(i))
    if device is not None:
        args = _on_device(args, device)
    if cast is not None:
        args = _mark_program_dtypes(cast(args), args) if exact_low_precision else cast(args)
    # The generators the program may draw from: the CPU's, and the device's (torch.manual_seed would also queue
    # a lazy CUDA seeding with a stack trace each call where CUDA is not initialized: 6% of a CPU run's time).
    torch.default_generator.manual_seed(2000 + i)
    if device is not None and torch.device(device).type == "cuda":
        torch.cuda.manual_seed(2000 + i)
    # `record`: eager's run records its low-precision values as the reference run does (_low_precision_slack).
    mode = (_exact_low_precision() if exact_low_precision else _low_precision_slack() if cast is not None or record
            else contextlib.nullcontext())
    try:
        with mode:
            result = _Call(fn(*args), args)
    except Exception as e:  # recorded: which side raised is the comparison's business
        return _Call(None, args, e)
    result.low_precision_slack = getattr(mode, "slack", 0.0)
    result.made_float32 = getattr(mode, "made_float32", False)
    return result


def _tensor_ok(got, want, ref, slack=0.0, float32=False):
    """Empty when `got` meets the fp64-reference rule against eager's `want` (the bound widened by `slack`;
    with `float32`, a float64 `got` close to `want` at float32's tolerances passes), else why not."""
    import torch
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"dtype/shape {got.dtype}{tuple(got.shape)} != eager's {want.dtype}{tuple(want.shape)}"
    precision = torch.float32 if float32 and got.dtype == torch.float64 else got.dtype
    try:
        torch.testing.assert_close(got.detach().to(precision), want.detach().to(precision), equal_nan=True)
        return ""
    except AssertionError as e:
        first = str(e).strip().splitlines()[0]
    usable = isinstance(ref, torch.Tensor) and ref.shape == got.shape
    if not usable:
        return first
    g, w, r = got.detach().double(), want.detach().double(), ref.detach().double()
    if not got.is_floating_point():
        bad = (g != w) & (g != r.to(got.dtype).double())
        return "" if not bad.any() else f"{first} (and not the float64 reference's value either)"
    nan_g, nan_w, nan_r = torch.isnan(g), torch.isnan(w), torch.isnan(r)
    if not (torch.equal(nan_g, nan_w) or torch.equal(nan_g, nan_r)):
        return f"{first} (NaN positions differ from eager's and the reference's)"
    finite = ~(nan_g | nan_r) & torch.isfinite(r)
    if not finite.any():
        return first
    err_g = (g - r)[finite].abs().max().item()
    err_w = (w - r)[finite].abs().max().item()
    ulp = {torch.bfloat16: 2.0 ** -7, torch.float16: 2.0 ** -10}.get(got.dtype, 0.0)
    bound = 2 * err_w + 1e-6 + ulp * r[finite].abs().max().item() + slack
    if err_g <= bound and torch.equal(torch.isinf(g) & ~torch.isinf(r), torch.isinf(w) & ~torch.isinf(r)):
        return ""
    return f"{first}; error vs float64 {err_g:.3g} > bound {bound:.3g} (eager's error {err_w:.3g})"


def _compare(path, got, want, ref, slack=0.0, float32=False):
    """The first difference between two result trees (structure, Python values, tensors), or ""."""
    import torch
    if isinstance(want, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            return f"{path}: expected a tensor, got {type(got).__name__}"
        why = _tensor_ok(got, want, ref, slack, float32)
        return f"{path}: {why}" if why else ""
    if type(got) is not type(want):
        return f"{path}: expected {type(want).__name__}, got {type(got).__name__}"
    if isinstance(want, (list, tuple)):
        if len(got) != len(want):
            return f"{path}: expected length {len(want)}, got {len(got)}"
        refs = ref if isinstance(ref, (list, tuple)) and len(ref) == len(want) else [None] * len(want)
        for i, (g, w, r) in enumerate(zip(got, want, refs)):
            if why := _compare(f"{path}[{i}]", g, w, r, slack, float32):
                return why
        return ""
    if isinstance(want, dict):
        if list(got) != list(want):
            return f"{path}: expected keys {list(want)}, got {list(got)}"
        for k in want:
            r = ref.get(k) if isinstance(ref, dict) else None
            if why := _compare(f"{path}[{k!r}]", got[k], want[k], r, slack, float32):
                return why
        return ""
    return "" if got == want else f"{path}: expected {want!r}, got {got!r}"


def _differences(i, got, want, ref, slack=0.0, float32=False):
    """The first difference of call i's outputs and inputs after it from eager's, under reference `ref` (the
    rule's bound widened by `slack`; `float32`: _tensor_ok's)."""
    ref_out, ref_in = (ref.out, ref.inputs) if ref.error is None else (None, None)
    return (_compare(f"call{i}.out", got.out, want.out, ref_out, slack, float32)
            or _compare(f"call{i}.inputs_after", got.inputs, want.inputs, ref_in, slack, float32))


def _variant_setup(variant):
    """(backend, options, context manager, device of the inputs) of a variant."""
    import torch
    no_grad = variant in ("ember-no-grad", "ember-triton", "ember-cuda")
    backend = "eager" if variant == "eager-backend" else "ember"
    options = {"strict": True, **({"triton_interpret": True} if variant == "ember-triton" else {})}
    device = "cuda" if variant == "ember-cuda" else None

    @contextlib.contextmanager
    def mode():
        with (torch.no_grad() if no_grad else contextlib.nullcontext()), \
                (torch.device(device) if device else contextlib.nullcontext()):
            yield

    return backend, options, mode, device


def run_variant(fn, inputs_fn, variant):
    """The first Failure of `fn` under one variant against eager, or None."""
    import ember
    from ember.testing import alias_map

    backend, options, mode, device = _variant_setup(variant)
    ember.reset()
    compiled = ember.compile(fn, backend=backend, options=options)
    for i in range(N_CALLS):
        with mode():
            want = _call(fn, inputs_fn, i, device=device, record=True)
            ref = _call(fn, inputs_fn, i, cast=_float64, device=device)
            got = _call(compiled, inputs_fn, i, device=device) if want.error is None else None
        if want.error is not None:
            if device is not None:  # a program valid on the CPU that torch rejects there: nothing to compare
                return None
            raise ValueError(f"the program raises eagerly on input seed {i}: {want.error!r}")
        if got.error is not None:
            kind = "internal-error" if isinstance(got.error, ember.InternalError) else "crash"
            return Failure(kind, variant, f"call {i}: {type(got.error).__name__}: {got.error}")
        why = _differences(i, got, want, ref)
        if why:
            # Low-precision arithmetic computed in float32 and rounded only where stored: right when it
            # meets the rule against that reference instead (float16/bfloat16 programs only).
            with mode():
                exact = _call(fn, inputs_fn, i, cast=_float64, exact_low_precision=True, device=device)
            if not _differences(i, got, want, exact):
                why = ""
        slack = max(ref.low_precision_slack, want.low_precision_slack)
        if why and slack and not _differences(i, got, want, ref, slack):
            # Values rounded to float16/bfloat16 by the program carry float32 differences upstream as one
            # unit of theirs (_low_precision_slack): a compiler that rounds as eager does moves by that much.
            why = ""
        if why and ref.made_float32 and not _differences(i, got, want, ref, slack, float32=True):
            # Float64 values computed from float32 ones the program made: float32's tolerances (_low_precision_slack).
            why = ""
        if why:
            return Failure("wrong-result", variant, why)
        if alias_map(want.out, want.inputs) != alias_map(got.out, got.inputs):
            return Failure("aliasing", variant, f"call {i}: outputs relate to inputs or each other differently "
                                                f"than in eager: {alias_map(want.out, want.inputs)} vs "
                                                f"{alias_map(got.out, got.inputs)}")
    s = ember.stats()
    if s["codegen_failures"] or s["backend_errors"]:
        return Failure("backend-error", variant, f"codegen_failures={s['codegen_failures']} "
                                                 f"backend_errors={s['backend_errors']}")
    return None


def check(fn, inputs_fn, variants=None):
    """Every Failure of `fn` (one per variant at most), in variant order."""
    found = []
    for variant in variants or default_variants():
        failure = run_variant(fn, inputs_fn, variant)
        if failure is not None:
            found.append(failure)
    return found


def check_seeds(start, stop, variants=None, skip=()):
    """Programs start..stop-1 (generator.generate), less the seeds in `skip`, through check(): one text
    per failure, naming the seed and holding the program. The unit of work of the CI-sized run
    (tests/fuzz/test_fuzz_run.py), which spreads ranges over processes."""
    problems = []
    for seed in (s for s in range(start, stop) if s not in skip):
        prog = generate(seed)
        ns = load(prog.source())
        for f in check(ns["program"], ns["inputs"], variants):
            problems.append(f"seed {seed}: {f.kind} under {f.variant}: {f.message}\n{prog.source()}")
    return problems


def background_worker(cache_dir):
    """Initializer of a process that runs check_seeds beside other work (tests/fuzz/test_fuzz_run.py): the
    lowest CPU priority, inherited by the compiler it spawns, and `cache_dir` as its code cache."""
    os.nice(19)
    os.environ["EMBER_CACHE_DIR"] = cache_dir


def check_or_skip(fn, inputs_fn, variants):
    """check() for a regression test: a variant this process cannot run skips the test (pytest)."""
    runnable = [v for v in variants if v in default_variants()]
    if not runnable:
        import pytest
        pytest.skip(f"variants {variants} need TRITON_INTERPRET=1 from the process's start")
    return check(fn, inputs_fn, runnable)


def check_source(source, variants=None):
    ns = load(source)
    return check(ns["program"], ns["inputs"], variants)
