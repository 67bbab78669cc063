"""Scheduler and memory planner tests beyond the golden files (tests/golden/schedule_*.loop,
plan_*.loop), all through the built ember-opt:

- execution: every scheduled golden program computes what the unscheduled one computes, run by
  the loop IR reference interpreter (ember.testing.loop_interp, from the lowering branch; skipped
  where it is not present);
- the scheduled text parses and verifies again, scheduling is deterministic, and scheduling a
  scheduled program changes nothing;
- command-line and error handling of --schedule and --plan.
"""
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "golden"))
import golden  # noqa: E402

SCHEDULE_FILES = sorted(golden.GOLDEN_DIR.glob("schedule_*.loop"))
PLAN_FILES = sorted(golden.GOLDEN_DIR.glob("plan_*.loop"))
INPUT = re.compile(r"^\s*buffer %b\d+ : (\w+)\[(.*?)\]\{(.*?)\} input (\d+)$", re.M)


def ember_opt(*args, stdin=None):
    if not golden.BINARY.exists():
        raise FileNotFoundError(f"{golden.BINARY} is missing: run `make build` first")
    return subprocess.run([str(golden.BINARY), *args], input=stdin, capture_output=True, text=True, timeout=60)


def program_text(path):
    """The program of a golden file, without its comment lines."""
    return "\n".join(l for l in Path(path).read_text().splitlines() if not l.lstrip().startswith("//")) + "\n"


def schedule_args(path):
    args, _, _ = golden.load(path)
    return [a for a in " ".join(args).replace("--pass plan", "").split()]


def scheduled(path):
    result = ember_opt(*schedule_args(path), str(path))
    assert result.returncode == 0, result.stderr
    return result.stdout


def without_comments(text):
    return "\n".join(l for l in text.splitlines() if not l.startswith("//")) + "\n"


SYMBOL = re.compile(r"^\s*symbol (\w+) hint=(\d+)", re.M)


def hints(text):
    """{name: hint} of a program's shape symbols: the sizes its test inputs take."""
    return {name: int(hint) for name, hint in SYMBOL.findall(text)}


def make_inputs(text, seed):
    import torch
    gen = torch.Generator().manual_seed(seed)
    inputs = {}
    floats = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32, "f64": torch.float64}
    for dtype, sizes, strides, index in INPUT.findall(text):
        shape = [eval(s, {}, hints(text)) for s in sizes.split(",")] if sizes.strip() else []
        if dtype in floats:
            t = torch.randn(shape, generator=gen).to(floats[dtype])
        elif dtype == "b8":
            t = torch.randint(0, 2, shape, generator=gen).bool()
        else:  # indices: the golden programs index dimensions of at least 4
            t = torch.randint(0, 4, shape, generator=gen, dtype=torch.int64)
        inputs[int(index)] = t
    return [inputs[k] for k in sorted(inputs)]


@pytest.mark.parametrize("path", SCHEDULE_FILES, ids=[f.stem for f in SCHEDULE_FILES])
def test_scheduled_program_computes_the_same(path):
    loop_interp = pytest.importorskip("ember.testing.loop_interp")
    import torch
    before = program_text(path)
    after = without_comments(scheduled(path))
    for seed in range(2):
        inputs = make_inputs(before, seed)
        expected = loop_interp.run(before, [t.clone() for t in inputs], hints(before))
        actual = loop_interp.run(after, [t.clone() for t in inputs], hints(before))
        assert len(expected) == len(actual)
        # bf16 arithmetic that the scheduler forwards is no longer rounded in between (values stay
        # f32 inside a fused kernel): the two differ by that one rounding, relative 2^-8, no more.
        tol = 2.0 ** -8 if path.stem.startswith("schedule_bf16") else 1e-5
        for e, a in zip(expected, actual):
            torch.testing.assert_close(a, e, rtol=tol, atol=1e-6 if tol == 1e-5 else tol)


@pytest.mark.parametrize("path", SCHEDULE_FILES, ids=[f.stem for f in SCHEDULE_FILES])
def test_scheduled_text_verifies_and_is_stable(path):
    first = scheduled(path)
    assert scheduled(path) == first, "scheduling is not deterministic"
    program = without_comments(first)
    reparsed = ember_opt("--loop", "-", stdin=program)
    assert reparsed.returncode == 0, reparsed.stderr
    assert reparsed.stdout == program
    again = ember_opt(*schedule_args(path), "-", stdin=program)
    assert again.returncode == 0, again.stderr
    assert without_comments(again.stdout) == program, "scheduling a scheduled program changed it"
    for line in again.stdout.splitlines():
        if line.startswith("// fusion:"):
            assert line.startswith("// fusion: refused"), line


def test_every_golden_program_has_fewer_or_equal_kernels():
    for path in SCHEDULE_FILES:
        before = program_text(path).count("kernel @")
        after = scheduled(path).count("kernel @")
        assert after <= before, path.name


@pytest.mark.parametrize("name, kernels", [("softmax", 1), ("layer_norm", 1), ("gelu_epilogue", 1),
                                           ("mean_var", 1), ("prologue", 1)])
def test_fused_kernel_counts(name, kernels):
    assert scheduled(golden.GOLDEN_DIR / f"schedule_{name}.loop").count("kernel @") == kernels


def test_mean_and_var_share_one_loop():
    out = scheduled(golden.GOLDEN_DIR / "schedule_mean_var.loop")
    assert out.count("loop [r0 < 32]") == 1
    assert out.count("load %b0") == 1


def test_schedule_needs_loop_input():
    result = ember_opt("--pass", "schedule", str(golden.GOLDEN_DIR / "dce_basic.ir"))
    assert result.returncode == 1 and "step schedule reads loop IR, but the current IR is graph" in result.stderr


def test_lower_then_schedule():
    # Graph IR in, through the compiler's pipeline up to the memory plan: softmax(x) is one kernel.
    text = """graph @g(%0: f32[4, 8]{8, 1} cpu "L['x']") {
  %1 = amax(%0, [1], True) : f32[4, 1]{1, 1} cpu
  %2 = sub(%0, %1) : f32[4, 8]{8, 1} cpu
  %3 = exp(%2) : f32[4, 8]{8, 1} cpu
  %4 = sum(%3, [1], True) : f32[4, 1]{1, 1} cpu
  %5 = div(%3, %4) : f32[4, 8]{8, 1} cpu
  return (%5)
}
"""
    result = ember_opt("--stop-after", "plan", "-", stdin=text)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("kernel @") == 1, result.stdout


def test_max_nodes_needs_a_number():
    result = ember_opt("--loop", "--pass", "schedule", "--max-nodes", "many", str(SCHEDULE_FILES[0]))
    assert result.returncode == 2 and "--max-nodes needs a number" in result.stderr


def test_schedule_then_plan():
    # After scheduling softmax no temporary is left: an empty arena, the output is the peak.
    result = ember_opt("--loop", "--pass", "schedule", "--pass", "plan", str(golden.GOLDEN_DIR / "schedule_softmax.loop"))
    assert result.returncode == 0, result.stderr
    assert "// memory: arena 0 bytes, peak 128 bytes" in result.stdout.splitlines()


def test_plan_places_live_temporaries_apart():
    for path in PLAN_FILES:
        result = ember_opt("--loop", "--pass", "plan", str(path))
        if result.returncode != 0:
            continue
        rows = re.findall(r"// memory: %b(\d+) @(\d+) size (\d+) live \[(\d+), (\d+)\]", result.stdout)
        rows = [tuple(int(x) for x in r) for r in rows]
        assert rows, path.name
        for k, (_, off, size, first, last) in enumerate(rows):
            assert off % 64 == 0
            for (_, off2, size2, first2, last2) in rows[k + 1:]:
                if first <= last2 and first2 <= last:
                    assert off + size <= off2 or off2 + size2 <= off, path.name
