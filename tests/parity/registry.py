"""The parity corpus registry: every program Ember must run exactly like eager PyTorch.

A Case names a program (a function, or a factory of an nn.Module), an input factory taking a
torch.Generator (call i of a run draws from seed i: same shapes, new values, so a graph that
baked in input values is caught), and what is expected of the counters:
  - "strict":   the frame is captured once and reused: frames_compiled == 1, cache_hits == 2,
                recompiles == 0, eager_frames == 0, graph_breaks == 0 after three calls;
  - "captured": captured on every call but a guarded value legitimately changes between calls
                (e.g. a list that grows per call and whose length is guarded): eager_frames == 0,
                graph_breaks == 0, frames_compiled + cache_hits == 3;
  - "eager":    the program has a construct Ember leaves to CPython: a graph break or a frame run eagerly.
  - "any":      only results are checked (for constructs the issue does not name, e.g. module hooks).
`fallback_marker` names a comment on the line expected in explain()'s break reason.
Kernels: in the "ember-no-grad" variant (where graphs can run generated code) every program must
generate at least one kernel, except those NO_KERNELS lists with the reason. Every ember variant
also requires stats()["codegen_failures"] == 0 and stats()["backend_errors"] == 0, so a broken C++
compiler or a failing stage fails the corpus.
`sets_grad_mode`: the program switches grad mode itself (no_grad, set_grad_enabled, ...): under the
no-grad variant its later calls would start in another mode than its first, so it runs with the
other variants only.
`state(target)` snapshots side effects after each call (target: the module, or None for
functions); `reset()` restores globals before each sequence of calls.
"""
import dataclasses
from typing import Any, Callable, Optional

COUNTER_POLICIES = ("strict", "captured", "eager", "any")


@dataclasses.dataclass
class Case:
    name: str
    fn: Callable
    inputs: Callable
    module: bool = False
    counters: str = "strict"
    state: Optional[Callable] = None
    reset: Optional[Callable] = None
    rtol: Optional[float] = None
    atol: Optional[float] = None
    grad: bool = False          # also compare parameter/input gradients after out.sum().backward()
    fallback_marker: Optional[str] = None
    sets_grad_mode: bool = False
    note: str = ""

    def __post_init__(self):
        if self.counters not in COUNTER_POLICIES:
            raise ValueError(f"case {self.name}: counters must be one of {COUNTER_POLICIES}, got {self.counters!r}")
        if self.counters == "eager" and self.fallback_marker is None:
            raise ValueError(f"case {self.name}: an eager case names its fallback line with fallback_marker")


CASES: dict = {}

# Programs that generate no kernel in the "ember-no-grad" variant, and why (test_parity.py checks
# that each name is a case). A program leaves this table when Ember starts lowering what it does.
_EXTERN_ONLY = "every op of its graphs is an extern call (matmul, conv, embedding, views, sort, ...)"
_NO_GRAPH = "it captures no tensor op (Python values only, or its frame runs eagerly)"
NO_KERNELS = {
    **dict.fromkeys([
        "for_over_shape", "functional_conv1d", "functional_conv2d", "functional_dropout_off",
        "functional_dropout_train_seeded",
        "functional_unfold_fold_shuffle", "if_on_ndim",
        "if_on_shape", "index_int_slice", "index_none_ellipsis",
        "inplace_input_out_argument", "inplace_metadata_ops", "inplace_on_view_of_intermediate", "nn_bilinear",
        "nn_conv1d", "nn_conv1d_stride_dilation", "nn_conv2d", "nn_conv2d_padding_mode_reflect",
        "nn_conv2d_padding_same_groups", "nn_conv_transpose2d", "nn_embedding_bag",
        "nn_identity_flatten_unflatten", "nn_instancenorm", "nn_linear_bfloat16",
        "nn_linear_float16", "nn_linear_no_bias",
        # linear with a bias: one torch.nn.functional.linear call, as eager (src/lowering/linear.cpp)
        "nn_linear", "nn_linear_3d_input", "functional_linear", "nn_dropout_eval", "nn_dropout_train_seeded",
        "training_flag_branch_eval", "ModuleIteration", "module_int_attr_increment",
        "dict_input",
        "op_matmul", "output_views_of_input", "reduce_arg_topk_sort",
        "reduce_cumulative", "shape_flatten_unflatten",
        "shape_split_chunk_unbind", "shape_squeeze_unsqueeze", "shape_view_reshape", "slice_objects",
        "tensor_T_attribute", "tensor_attributes", "tensor_stride_and_sizes", "try_except_no_exception",
    ], _EXTERN_ONLY),
    **dict.fromkeys([
        "float_formatting", "nn_batchnorm1d_train_cumulative", "shape_as_python_values",
        "string_and_tuple_comparisons", "try_except_raising",
    ], _NO_GRAPH),
}
# ... and, on a CUDA device only, these: their graphs move values to the CPU (x.cpu(), x.to("cpu"), a
# numpy round trip), and a compiled graph runs on one device, so they run on the eager executor.
NO_KERNELS_ON_CUDA = dict.fromkeys(["dtype_conversions", "numpy_call", "tensor_to_same_device"],
                                   "a graph spans cuda and cpu values: a compiled graph runs on one device")


def register(case: Case) -> Case:
    if case.name in CASES:
        raise ValueError(f"duplicate parity case name {case.name!r}")
    CASES[case.name] = case
    return case


def case(name=None, *, inputs, module=False, **kwargs) -> Callable[[Any], Any]:
    """Decorator: registers a function, or (module=True) a zero-argument nn.Module factory or class."""

    def deco(fn):
        register(Case(name=name or fn.__name__, fn=fn, inputs=inputs, module=module, **kwargs))
        return fn

    return deco


def module_case(name, factory, *, inputs, **kwargs):
    register(Case(name=name, fn=factory, inputs=inputs, module=True, **kwargs))
