"""Malformed graph IR text raises ParseError (a ValueError) naming line:column and the problem."""
import pytest

T4 = "f32[4]{1} cpu"


def graph(*stmts, inputs=f'%0: {T4} "x"', ret="return (%0)"):
    body = "".join(f"  {s}\n" for s in stmts)
    return f"graph @g({inputs}) {{\n{body}  {ret}\n}}\n"


CASES = [
    # (text, "line:column", words the message must contain)
    ("", "1:1", "expected 'graph'"),
    ("grph @g() {\n  return ()\n}\n", "1:1", "expected 'graph'"),
    ("graph g() {\n  return ()\n}\n", "1:7", "expected '@'"),
    ("symbol s0 hint=4\nsymbol s0 hint=5\n" + graph(), "2:1", "symbol s0 is already declared (at 1:1)"),
    ("symbol s0 hint=x\n" + graph(), "1:16", "expected"),
    ("symbol s0 hint=4 // why\nsymbol\n" + graph(), "2:7", "expected"),
    (graph(f"%1 = frobnicate(%0) : {T4}"), "2:8", "unknown op 'frobnicate'"),
    (graph(f"%1 = torch(%0) : {T4}"), "2:13", "expected a string"),
    (graph(f'%1 = torch ""(%0) : {T4}'), "2:8", "qualified name"),
    (graph(f'%1 = torch "f(%0) : {T4}'), "2:14", "unterminated string"),
    (graph(f'%1 = torch "a\\qb"(%0) : {T4}'), "2:16", "unknown escape"),
    (graph("%1 = neg(%0) : q32[4]{1} cpu"), "2:18", "unknown dtype 'q32'"),
    (graph("%1 = neg(%0) : f32[4]{1} cuda:x"), "2:28", "invalid device 'cuda:x'"),
    (graph("%1 = neg(%0) : f32[4]{1}"), "3:3", "expected a device (cpu, cuda:0, ...) after the strides, found 'return'"),
    (graph("%1 = neg(%0) : f32[4 +]{1} cpu"), "2:25", "expected an integer, a symbol"),
    (graph("%1 = neg(%0) : f32[4 / 2]{1} cpu"), "2:24", "use '//'"),
    (graph("%1 = neg(%0) : f32[s0 // 0]{1} cpu"), "2:25", "by zero"),
    (graph("%1 = neg(%0)"), "2:15", "expected ':' and the result types"),
    (graph(f"%1, %2 = split(%0, 2) : {T4}"), "2:25", "several results are typed tuple(...) or list(...)"),
    (graph(f"%1, %2 = split(%0, 2) : tuple({T4})"), "2:25", "2 results but 1 result types"),
    (graph(f"%1 = neg(%0) : {T4}", f"%1 = abs(%0) : {T4}"), "3:3", "%1 is already defined (at 2:3)"),
    (graph(f"%0 = neg(%0) : {T4}"), "2:3", "%0 is already defined (at 1:10)"),
    (graph(f"%1 = clamp(min=0.0, %0) : {T4}"), "2:23", "positional argument after keyword arguments"),
    (graph(f"%1 = clamp(%0, min=0.0, min=1.0) : {T4}"), "2:27", "keyword argument 'min' given twice"),
    (graph(f'%1 = torch "f"(%0, (1)) : {T4}'), "2:24", "a one-item tuple is written '(x,)'"),
    (graph(f'%1 = torch "f"(%0, frob) : {T4}'), "2:22", "expected an argument"),
    (graph(f'%1 = torch "f"(%0, 99999999999999999999) : {T4}'), "2:22", "does not fit in int64"),
    (graph(f'%1 = torch "f"(%0, 1e999) : {T4}'), "2:22", "float literal out of range"),
    (graph(f'%1 = torch "f"(%0, 12abc) : {T4}'), "2:24", "unexpected 'a' in a number"),
    (graph(f'%1 = torch "f"(%0, - 5) : {T4}'), "2:22", "expected a number after '-'"),
    (graph(f'%1 = torch "f"(%0, -infinity) : {T4}'), "2:22", "expected a number after '-'"),
    (graph(f'%1 = torch "f"(%0, 1e+) : {T4}'), "2:25", "expected digits in the exponent"),
    (graph(f'%1 = torch "f"(%0, torch.float33) : {T4}'), "2:28", "unknown dtype 'torch.float33'"),
    (graph(f'%1 = torch "f"(%0, device("gpu:-1")) : {T4}'), "2:29", "invalid device 'gpu:-1'"),
    (graph(f'%1 = torch "f"(%0, slice(1.5, None, None)) : {T4}'), "2:28", "slice bounds are integers"),
    (graph(f'%1 = torch "f"(%0, [1, 2) : {T4}'), "2:27", "expected ']'"),
    (graph(f"%99999999 = neg(%0) : {T4}"), "2:3", "expected a value id"),
    (graph(ret="return %0"), "2:10", "expected '(' after 'return'"),
    (graph(ret="retrun (%0)"), "2:3", "unknown op 'retrun'"),
    ("graph @g() {\n", "2:1", "expected an op name"),
    (graph() + "graph @h() {\n  return ()\n}\n", "4:1", "after the end of the graph"),
    (graph(inputs=f"%0: {T4}"), "1:27", "expected a string"),
    (graph(f'%1 = torch "f"(%0, {"[" * 100000}) : {T4}'), "2:278", "nested deeper than 256 levels"),
    (graph(f'%1 = neg(%0) : f32[{"(" * 100000}1]{{1}} cpu'), "2:278", "nested deeper than 256 levels"),
    (graph(f'%1 = torch "f"(%0, \u00ef) : {T4}'), "2:22", "found byte 0xc3"),
    (graph(f'%1 = neg(%0) : f32[s0 \u00ef]{{1}} cpu'), "2:25", "expected ']' after the sizes, found byte 0xc3"),
]


@pytest.mark.parametrize("text,location,words", CASES, ids=[c[2][:40] for c in CASES])
def test_parse_error_names_line_column(ir, text, location, words):
    with pytest.raises(ir.ParseError) as info:
        ir.parse(text)
    message = str(info.value)
    assert message.startswith(location + ": "), message
    assert words in message, message


def test_parse_error_is_a_value_error(ir):
    assert issubclass(ir.ParseError, ValueError)


def test_mutated_text_parses_or_fails_cleanly(ir):
    """Random edits of valid graphs: a ParseError with line:column, or a graph whose printed form
    parses back to the same text; verify() never fails on what parse() accepts."""
    import random
    from .test_roundtrip import ROUND_TRIP
    seed = 7
    rng = random.Random(seed)
    texts = sorted(ROUND_TRIP.values())
    pieces = list('%@()[]{},:="\\.-+*/ 0123456789aefxz\n') + ["torch", "None", "tuple(", "//", "grad", "...", "\u00e9"]
    parsed = 0
    for i in range(3000):
        text = rng.choice(texts)
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(text) + 1)
            if rng.random() < 0.5:
                text = text[:at] + rng.choice(pieces) + text[at:]
            else:
                text = text[:at] + text[at + rng.randint(1, 4):]
        try:
            g = ir.parse(text)
        except ir.ParseError as e:
            assert str(e).split(":")[0].isdigit(), f"seed {seed} case {i}: {e}"
            continue
        parsed += 1
        ir.verify(g)
        printed = ir.print(g)
        assert ir.print(ir.parse(printed)) == printed, f"seed {seed} case {i}: {text!r}"
    assert parsed > 50  # the edits must not all be fatal, or this tests only the error path
