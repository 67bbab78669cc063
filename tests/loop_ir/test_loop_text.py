"""Loop IR text form through ember-opt --loop: round trips and parse errors with line:column."""
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "golden"))
import golden  # noqa: E402


def ember_opt(*args, stdin):
    return subprocess.run([str(golden.BINARY), "--loop", *args, "-"], input=stdin, capture_output=True,
                          text=True, timeout=60)


def without_comments(text):
    return "".join(line + "\n" for line in text.splitlines() if not line.lstrip().startswith("//") and line.strip())


def test_canonical_text_round_trips():
    text = without_comments((golden.GOLDEN_DIR / "loop_print_all.loop").read_text())
    result = ember_opt(stdin=text)
    assert result.returncode == 0, result.stderr
    assert result.stdout == text


def test_printing_is_a_fixed_point_after_simplify():
    text = (golden.GOLDEN_DIR / "loop_simplify.loop").read_text()
    once = ember_opt("--pass", "simplify", stdin=text)
    assert once.returncode == 0, once.stderr
    again = ember_opt("--pass", "simplify", stdin=once.stdout)
    assert again.returncode == 0, again.stderr
    assert again.stdout == once.stdout


def test_non_canonical_spelling_prints_canonically():
    text = """program @p {
  buffer %b0 : f32[2 + 2]{1} input 0
  buffer %b1 : f32[4]{1} output 0
  kernel @k0 [ i0 < 2*2 ] {
    loop [] {
      %t0 = load %b0[0 + i0] : f32   // trailing comment
      %t1 = constant 1e0 : f32
      %t2 = add %t0,%t1 : f32
      store %b1[i0] = %t2
    }
  }
  return (%b1)
}
"""
    result = ember_opt(stdin=text)
    assert result.returncode == 0, result.stderr
    assert result.stdout == """program @p {
  buffer %b0 : f32[4]{1} input 0
  buffer %b1 : f32[4]{1} output 0
  kernel @k0 [i0 < 4] {
    loop {
      %t0 = load %b0[i0] : f32
      %t1 = constant 1.0 : f32
      %t2 = add %t0, %t1 : f32
      store %b1[i0] = %t2
    }
  }
  return (%b1)
}
"""


HEAD = "program @p {\n  buffer %b0 : f32[4]{1} input 0\n"
PARSE_ERRORS = [
    ("prog @p {", "1:1: expected 'program'"),
    (HEAD + "  buffer %b1 : f33[4]{1} temp\n", "3:16: unknown dtype 'f33'"),
    (HEAD + "  buffer %b0 : f32[4]{1} temp\n", "3:10: %b0 is already defined (at 2:10)"),
    (HEAD + "  buffer %b1 : f32[4]{1} scratch\n", "3:26: expected a buffer kind (input, output, temp, extern, view), found 'scratch'"),
    (HEAD + "  buffer %b1 : f32[4]{1} view %b0 4\n", "3:35: expected '+' after the view's base"),
    (HEAD + "  buffer %b1 : f32[4]{1} input 1.5\n", "3:32: expected the graph input's position after 'input', found a float"),
    (HEAD + "  kernel @k0 [r0 < 4] {\n", "3:15: expected the index variable i0"),
    (HEAD + "  kernel @k0 [i0 < 4] {\n    loop [r0 < ] {\n", "4:16: expected an integer, a symbol"),
    (HEAD + "  kernel @k0 {\n    loop {\n      %t0 = load %b0[i0] f32\n", "5:26: expected ':' before the node's dtype"),
    (HEAD + "  kernel @k0 {\n    loop {\n      %t0 = constant maybe : b8\n", "5:22: expected a constant"),
    (HEAD + "  kernel @k0 {\n    loop {\n      %t0 = store %b0[0] = %t0\n", "5:7: a store defines no value"),
    (HEAD + "  kernel @k0 {\n    loop {\n      %t0 = neg %x1 : f32\n", "5:17: expected a node (%tN)"),
    (HEAD + "  kernel @k0 {\n    loop {\n      %t0 = constant 1 : i64\n      %t0 = constant 2 : i64\n",
     "6:7: %t0 is already defined (at 5:7)"),
    (HEAD + "  kernel @k0 {\n    loop {\n      %t0 = load %b0[0] if %t1 : f32\n", "5:32: expected 'else' after the load's mask"),
    (HEAD + "  kernel @k0 {\n    %t0 = constant 1 : i64\n", "4:5: expected '}' to close the kernel"),
    (HEAD + "  extern (%b1) = torch.relu(%b0)\n", "3:18: expected a string"),
    (HEAD + "  extern (%b1) = \"torch.relu\"(%b0, x=1, x=2)\n", "3:41: keyword argument 'x' given twice"),
    (HEAD + "  extern (%b1) = \"torch.relu\"(%0)\n", "3:31: expected a buffer (%bN), found '%'"),
    (HEAD + "  return (%b0)\n}\nextra", "5:1: unexpected 'extra' after the end of the program"),
    (HEAD + "  frobnicate\n", "3:3: expected 'buffer', 'kernel', 'group', 'extern' or 'return'"),
    (HEAD + "  buffer %b99999999 : f32[4]{1} temp\n", "3:10: expected a buffer id from %b0 to %b16777215"),
    (HEAD + "  kernel @k0 [i0 < 4 // 0] {\n", "3:22: floordiv by zero"),
]


@pytest.mark.parametrize("text,message", PARSE_ERRORS, ids=[m.split(":", 2)[2].strip()[:40] for _, m in PARSE_ERRORS])
def test_parse_errors_carry_line_and_column(text, message):
    result = ember_opt(stdin=text)
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert result.stdout == ""
    line_col, _, rest = message.partition(": ")
    assert result.stderr.startswith(f"<stdin>:{line_col}: error: {rest}"), result.stderr


def test_unknown_step_lists_the_pipeline():
    result = ember_opt("--pass", "frobnicate", stdin=HEAD + "  return (%b0)\n}\n")
    assert result.returncode == 2
    assert "unknown step 'frobnicate' (known: canonicalize, functional_writes, joint, attention_math, decompose, dce, cse, channels_last, partition, lower, simplify" in result.stderr
    listed = subprocess.run([str(golden.BINARY), "--list-passes"], capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0
    assert [line.split("\t")[:2] for line in listed.stdout.splitlines()] == [
        ["canonicalize", "graph"], ["functional_writes", "graph"], ["joint", "graph"], ["attention_math", "graph"], ["decompose", "graph"], ["dce", "graph"], ["cse", "graph"],
        ["channels_last", "graph"], ["partition", "graph"], ["lower", "graph"],
        ["simplify", "loop"], ["schedule", "loop"], ["extern_outs", "loop"], ["plan", "loop"], ["collapse", "loop"], ["group", "loop"],
        ["emit", "loop"]]


def test_a_step_on_the_wrong_ir_is_an_error():
    result = ember_opt("--pass", "dce", stdin=HEAD + "  return (%b0)\n}\n")
    assert result.returncode == 1
    assert "step dce failed: step dce reads graph IR, but the current IR is loop" in result.stderr
