"""The rules on real programs: every parity-corpus program runs eagerly under a TorchFunctionMode
that, for each call of a core op (as python/ember/ops.py classifies callables, plus the tensor
operators the interpreter maps to core ops), asks the rule with the call's own arguments and
compares any answer with the real result. Prints how often each op was answered."""
import collections

import torch
from torch.overrides import TorchFunctionMode

from ember import ops as ember_ops
from ember._C import shapes

# tests/ is on sys.path (pytest's rootdir-relative import of this package): the parity corpus.
from parity import cases_fallback, cases_modules, cases_mutation, cases_python, cases_semantics, cases_torch  # noqa: F401
from parity.harness import build_targets
from parity.registry import CASES

# Tensor operators with the tensor on the left, as the interpreter maps them (interp_objects.cpp).
OPERATORS = {
    "__add__": "add", "__sub__": "sub", "__mul__": "mul", "__truediv__": "div", "__floordiv__": "floor_divide",
    "__mod__": "remainder", "__pow__": "pow", "__matmul__": "matmul", "__and__": "bitwise_and",
    "__or__": "bitwise_or", "__xor__": "bitwise_xor", "__lt__": "lt", "__le__": "le", "__eq__": "eq",
    "__ne__": "ne", "__gt__": "gt", "__ge__": "ge", "__getitem__": "getitem", "__neg__": "neg",
    "__invert__": "bitwise_not", "__abs__": "abs",
}


def _describe(result):
    if isinstance(result, torch.Tensor):
        return [(str(result.dtype)[6:], tuple(result.shape), result.stride(), result.requires_grad, str(result.device))]
    if isinstance(result, (tuple, list)) and all(isinstance(r, torch.Tensor) for r in result):
        return [_describe(r)[0] for r in result]
    return None


class RuleChecker(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.answered = collections.Counter()
        self.declined = collections.Counter()
        self.mismatches = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        op = OPERATORS.get(getattr(func, "__name__", ""))
        if op is None:
            kind, detail = ember_ops.classify(func)
            op = detail if kind == "core" else None
        if op is None or not args or not isinstance(args[0], (torch.Tensor, list, tuple)):
            return result
        want = _describe(result)
        if want is None:
            return result
        got = shapes.infer_result_types(op, tuple(args), dict(kwargs), torch.is_grad_enabled(),
                                        str(torch.get_default_dtype())[6:])
        if got is None:
            self.declined[op] += 1
        else:
            self.answered[op] += 1
            if [tuple(g) for g in got] != want:
                self.mismatches.append(f"{op}: rule {got} != torch {want} for {func} {args!r} {kwargs!r}")
        return result


def test_rules_on_the_parity_corpus():
    checker = RuleChecker()
    for case in CASES.values():
        _, target = build_targets(case)
        g = torch.Generator()
        g.manual_seed(1000)
        try:
            inputs = case.inputs(g)
            if not isinstance(inputs, tuple):
                inputs = (inputs,)
            if case.reset is not None:
                case.reset()
            with checker:
                target(*inputs)
        except Exception:
            continue  # programs that raise on purpose (error cases) still had their calls checked
    assert not checker.mismatches, "\n".join(checker.mismatches[:20])
    total_answered, total_declined = sum(checker.answered.values()), sum(checker.declined.values())
    print(f"\ncore-op calls: {total_answered} answered by rules, {total_declined} left to meta kernels")
    for op in sorted(set(checker.answered) | set(checker.declined)):
        print(f"  {op:<14} answered {checker.answered[op]:>4}  declined {checker.declined[op]:>4}")
    assert total_answered > 3 * total_declined, (checker.answered, checker.declined)
