"""Runs generated Triton kernels through Triton's interpreter on CPU tensors (a script: the parent
test starts it with TRITON_INTERPRET=1, which must be set before triton's decorators run, and which
no other test process may see). Prints one JSON line per case: {"case", "ok", "message", "kernels"}.

A case is a torch function and its inputs. Ember captures it (ember.explain), runs the graph passes
and lowering, then simplify, schedule, plan and Triton emission (codegen.emit_triton); this runner
allocates the program's buffers and its arena as CPU tensors and launches each kernel with its first
config. The C++ runtime does the same on the GPU; this stays small on purpose. Results are compared
with eager torch under the fp64-reference rule (DESIGN.md: Ember's error <= 2x eager's + 1e-6).
"""
import json
import math
import os
import sys

assert os.environ.get("TRITON_INTERPRET") == "1", "run with TRITON_INTERPRET=1"

import torch  # noqa: E402

from ember._C import codegen  # noqa: E402
from ember._triton import interpret  # noqa: E402
from ember.testing import loop_interp  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from interp_cases import CASES, LOOP_CASES, lower  # noqa: E402

GOLDEN = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "golden")

DTYPES = {"b8": torch.bool, "u8": torch.uint8, "i8": torch.int8, "i16": torch.int16, "i32": torch.int32,
          "i64": torch.int64, "f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32,
          "f64": torch.float64}


def ints(exprs):
    return [int(e) for e in exprs]


def buffers(emitted, args):
    """(the parsed program, a function giving each buffer's CPU tensor: the graph's inputs, the
    arena's slices for temporaries, new tensors for outputs)."""
    prog = loop_interp.parse(emitted["program"])
    arena = torch.zeros(max(emitted["arena_bytes"], 1), dtype=torch.uint8)
    roots = {}

    def tensor(bid):
        b = prog.buffers[bid]
        dtype = DTYPES[b.dtype]
        if b.kind == "input":
            return args[b.index]
        if b.kind == "view":
            base = tensor(b.base)
            return base.as_strided(ints(b.sizes), ints(b.strides), base.storage_offset() + int(b.offset))
        if bid not in roots:
            sizes, strides = ints(b.sizes), ints(b.strides)
            span = 1 + sum((s - 1) * st for s, st in zip(sizes, strides)) if all(sizes) else 0
            if b.kind == "temp":
                at = emitted["offsets"][bid]
                flat = arena[at:at + span * torch.empty((), dtype=dtype).element_size()].view(dtype)
                roots[bid] = flat.as_strided(sizes, strides)
            else:
                roots[bid] = torch.empty_strided(sizes, strides, dtype=dtype)
        return roots[bid]

    return prog, tensor


def run_program(emitted, args):
    prog, tensor = buffers(emitted, args)
    assert not any(kind == "extern" for kind, _ in prog.steps), "programs with extern calls are not run here"
    # Without extern calls the kernels run in the order the program lists them.
    for kernel in emitted["kernels"]:
        fn = interpret.load(kernel["source"], kernel["name"])
        config = kernel["configs"][0]
        launch = [tensor(p["buffer"]) if "buffer" in p else p["value"] for p in kernel["params"]]
        grid = (math.ceil(kernel["xnumel"] / config["blocks"]["XBLOCK"]),)
        fn[grid](*launch, **config["blocks"])
    return [tensor(b) for b in prog.outputs]


def flat(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def compare(got, eager, ref):
    """Empty when `got` meets the fp64-reference rule against `eager`, else why not."""
    if got.dtype != eager.dtype or got.shape != eager.shape:
        return f"dtype/shape {got.dtype}{tuple(got.shape)} != eager {eager.dtype}{tuple(eager.shape)}"
    if not got.dtype.is_floating_point:
        return "" if torch.equal(got, eager) else f"integer results differ:\n{got}\n{eager}"
    g, e, r = got.double(), eager.double(), ref.double()
    if not torch.equal(torch.isnan(g), torch.isnan(r)):
        return f"NaN positions differ:\n{got}\n{ref}"
    finite = ~torch.isnan(r)
    err_g = (g - r)[finite].abs().max().item() if finite.any() else 0.0
    err_e = (e - r)[finite].abs().max().item() if finite.any() else 0.0
    # The interpreter rounds fp32 -> bf16/f16 by truncation (note triton_backend §4): one more ulp.
    ulp = {torch.bfloat16: 2.0 ** -7, torch.float16: 2.0 ** -10}.get(got.dtype, 0.0)
    bound = 2 * err_e + 1e-6 + ulp * (r[finite].abs().max().item() if finite.any() else 0.0)
    return "" if err_g <= bound else f"error {err_g:.3g} > {bound:.3g} (eager's {err_e:.3g})"


def compare_reference(got, want):
    """Empty when `got` matches the C++ backend's `want`, else why not."""
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"dtype/shape {got.dtype}{tuple(got.shape)} != {want.dtype}{tuple(want.shape)}"
    if not got.dtype.is_floating_point:
        return "" if torch.equal(got, want) else f"integer results differ:\n{got}\n{want}"
    tol = {torch.bfloat16: 2.0 ** -7, torch.float16: 2.0 ** -10, torch.float64: 1e-12}.get(got.dtype, 2e-6)
    try:
        torch.testing.assert_close(got, want, rtol=tol, atol=tol, equal_nan=True)
    except AssertionError as e:
        return str(e)
    return ""


def cpp_reference(text, args):
    """The C++ backend's outputs for the same loop IR (its spelling of every op is tested against torch)."""
    import shutil
    import tempfile

    include = os.path.join(os.path.dirname(GOLDEN), "..", "src", "codegen", "cpp", "include")
    with tempfile.TemporaryDirectory() as cache:
        program = codegen.compile_program(text, [], [include], cache, compiler=shutil.which("g++"))
        return program.run(args)


def run_loop_case(name):
    path, make_args = LOOP_CASES[name]
    with open(os.path.join(GOLDEN, path)) as f:
        text = f.read()
    args = make_args()
    emitted = codegen.emit_triton(text)
    outs = run_program(emitted, [a.clone() for a in args])
    want = cpp_reference(text, [a.clone() for a in args])
    problems = [f"output {k}: {why}" for k, (o, w) in enumerate(zip(outs, want)) if (why := compare_reference(o, w))]
    if len(outs) != len(want):
        problems.append(f"{len(outs)} outputs, the C++ backend has {len(want)}")
    return {"case": name, "ok": not problems, "message": "\n".join(problems),
            "kernels": [k["kind"] for k in emitted["kernels"]]}


def run_case(name):
    if name in LOOP_CASES:
        return run_loop_case(name)
    fn, make_args, options = CASES[name]
    args = make_args()
    emitted = codegen.emit_triton(lower(fn, args), schedule=True, **options)
    outs = run_program(emitted, [a.clone() for a in args])
    eager = flat(fn(*[a.clone() for a in args]))
    ref = flat(fn(*[a.double() if a.dtype.is_floating_point else a for a in args]))
    problems = [f"output {k}: {why}" for k, (o, e, r) in enumerate(zip(outs, eager, ref)) if (why := compare(o, e, r))]
    if len(outs) != len(eager):
        problems.append(f"{len(outs)} outputs, eager has {len(eager)}")
    kinds = [k["kind"] for k in emitted["kernels"]]
    return {"case": name, "ok": not problems, "message": "\n".join(problems), "kernels": kinds}


def main(names):
    for name in names:
        try:
            result = run_case(name)
        except Exception as e:  # reported to the parent test, which fails the case
            result = {"case": name, "ok": False, "message": f"{type(e).__name__}: {e}", "kernels": []}
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or [*CASES, *LOOP_CASES])
