"""Cost of a shape rule against torch's meta kernel, for the ops capture meets most.

Run: PYTHONPATH=python .venv/bin/python tests/shapes/measure_rule_cost.py
Prints, per op, microseconds per call of: the meta kernel (what capture runs today: the torch
callable on meta tensors, under grad mode), the C++ rule alone (ember._C.shapes.time_rule, its
operands converted once), and the test binding's round trip (which also reads each meta tensor's
metadata from Python and builds the Python answer). Not a test: no assertions on time.
"""
import statistics
import timeit

import torch
import torch.nn.functional as F

from ember._C import shapes


def meta(*sizes, grad=False):
    t = torch.empty(*sizes, device="meta")
    return t.requires_grad_(True) if grad else t


def cases():
    x = meta(8, 128, 256)
    w, b = meta(512, 256, grad=True), meta(512, grad=True)
    lw, lb = meta(256, grad=True), meta(256, grad=True)
    return [
        ("add", torch.add, (meta(64, 128), meta(128)), {}),
        ("linear", F.linear, (x, w, b), {}),
        ("layer_norm", F.layer_norm, (x, (256,), lw, lb, 1e-5), {}),
        ("gelu", F.gelu, (x,), {"approximate": "tanh"}),
        # Torch calls (not core ops), named as capture names them.
        ("torch.conv2d", F.conv2d, (meta(2, 16, 32, 32), meta(32, 16, 3, 3, grad=True), meta(32, grad=True)),
         {"padding": 1}),
        ("torch.nn.functional.batch_norm", F.batch_norm,
         (meta(2, 32, 32, 32), meta(32), meta(32), meta(32, grad=True), meta(32, grad=True), False), {}),
        ("torch.nn.functional.rms_norm", F.rms_norm, (x, (256,), lw, 1e-6), {}),
        ("torch.nn.functional.scaled_dot_product_attention", F.scaled_dot_product_attention,
         (meta(2, 4, 64, 32), meta(2, 4, 64, 32), meta(2, 4, 64, 32)), {"is_causal": True}),
    ]


def best_of(fn, number, repeat=7):
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number


def main():
    print(f"torch {torch.__version__}; microseconds per call (best of 7)")
    print(f"{'op':<12}{'meta kernel':>14}{'rule (C++)':>14}{'binding':>12}{'meta / rule':>14}")
    for op, fn, args, kwargs in cases():
        assert shapes.infer_result_types(op, args, kwargs, True, "float32") is not None, op
        meta_s = best_of(lambda: fn(*args, **kwargs), 2000)
        rule_s = statistics.median(shapes.time_rule(op, args, kwargs, True, "float32", 20000) for _ in range(7))
        bind_s = best_of(lambda: shapes.infer_result_types(op, args, kwargs, True, "float32"), 2000)
        print(f"{op.rsplit('.', 1)[-1]:<12}{meta_s * 1e6:>14.2f}{rule_s * 1e6:>14.3f}{bind_s * 1e6:>12.2f}{meta_s / rule_s:>13.0f}x")


if __name__ == "__main__":
    main()
