"""Runs max-autotune's matmul templates (src/codegen/triton/matmul_template.cpp) through Triton's
interpreter on CPU tensors: a script the parent test (test_matmul_template.py) starts with
TRITON_INTERPRET=1. Prints one JSON line per case: {"case", "ok", "message", "configs"}.

Each case is a torch function whose graph is one extern matmul and the pointwise kernel after it.
The runner emits the program with matmul templates on, launches the template alone (it does both
steps) with its first config and with its smallest tiles, and compares the outputs with eager under
the fp64-reference rule.
"""
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from matmul_cases import CASES  # noqa: E402
from interp_cases import lower  # noqa: E402
from interp_runner import buffers, compare, flat  # noqa: E402  (asserts TRITON_INTERPRET=1)

from ember._C import codegen  # noqa: E402
from ember._triton import interpret  # noqa: E402

def run_case(name):
    fn, make_args = CASES[name]
    args = make_args()
    emitted = codegen.emit_triton(lower(fn, args), schedule=True, max_configs=8, matmul_templates=True)
    templates = emitted["matmul_templates"]
    if len(templates) != 1:
        return {"case": name, "ok": False, "configs": 0,
                "message": f"{len(templates)} templates; refusals: {emitted['matmul_refusals']}"}
    t = templates[0]
    kernel = t["kernel"]
    fn_t = interpret.load(kernel["source"], kernel["name"])
    eager = flat(fn(*[a.clone() for a in args]))
    ref = flat(fn(*[a.double() for a in args]))
    problems = []
    # The first config, and the one with the smallest tiles (the most programs: grouping and tails).
    configs = kernel["configs"]
    smallest = min(range(len(configs)), key=lambda i: configs[i]["blocks"]["BLOCK_M"] * configs[i]["blocks"]["BLOCK_N"])
    for c in sorted({0, smallest}):
        config = configs[c]
        prog, tensor = buffers(emitted, [a.clone() for a in args])
        blocks = config["blocks"]
        grid = (math.ceil(t["m"] / blocks["BLOCK_M"]) * math.ceil(t["n"] / blocks["BLOCK_N"]), t["batch"])
        fn_t[grid](*[tensor(p["buffer"]) for p in kernel["params"]], **blocks)
        outs = [tensor(b) for b in prog.outputs]
        problems += [f"config {c} output {k}: {why}" for k, (o, e, r) in enumerate(zip(outs, eager, ref))
                     if (why := compare(o, e, r))]
    return {"case": name, "ok": not problems, "message": "\n".join(problems), "configs": len({0, smallest})}


def main(names):
    for name in names:
        try:
            result = run_case(name)
        except Exception as e:  # reported to the parent test, which fails the case
            result = {"case": name, "ok": False, "message": f"{type(e).__name__}: {e}", "configs": 0}
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or list(CASES))
