"""Parity cases for mutation and side effects: in-place ops on intermediates, on inputs and on views
of inputs (the caller must see its tensors changed exactly as in eager), writes to module attributes
and buffers, to globals, and to caller-owned lists, dicts and objects.

Side effects on Python values the trace reads back (an int counter incremented each call) use the
"captured" counter policy: the changed value is a guarded property, so a recompile is legitimate.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from ember.testing import DEVICE, randint, randn

from .registry import case


def x34(g):
    return (randn(g, 3, 4),)


# ---------------------------------------------------------------------------------------------
# In-place ops on intermediates

@case(inputs=x34)
def inplace_chain_on_intermediate(x):
    y = x * 2
    y.add_(1)
    y.mul_(3).sub_(x)
    y.clamp_(-2, 2)
    return y


@case(inputs=x34)
def inplace_on_view_of_intermediate(x):
    y = x.clone()
    row = y[1]
    row.mul_(10)
    y[:, 0].zero_()
    y.t()[2].fill_(5.0)
    return y, row


@case(inputs=x34)
def inplace_functional_relu(x):
    y = x + 0
    F.relu(y, inplace=True)
    z = x - 0
    torch.relu_(z)
    return y, z


@case(inputs=lambda g: (randn(g, 4, 3), randint(g, 0, 4, 2, 3)))
def inplace_scatter_index_add(x, idx):
    y = torch.zeros(4, 3)
    y.scatter_(0, idx, 1.0)
    y.index_add_(0, torch.tensor([0, 2]), x[:2])
    y.masked_fill_(y > 1.5, -1.0)
    return y


@case(inputs=x34)
def inplace_metadata_ops(x):
    y = x.clone()
    y.unsqueeze_(0)
    y.transpose_(1, 2)
    y.squeeze_(0)
    return y, y.shape


@case(inputs=x34)
def inplace_copy_into_buffer(x):
    buf = torch.empty(3, 4)
    buf.copy_(x)
    buf[0].copy_(torch.arange(4.0))
    return buf


@case(inputs=x34)
def inplace_alias_keeps_flowing(x):
    y = x * 1
    z = y.view(-1)
    z.add_(1)
    w = y * 2
    y.mul_(0)
    return w, y, z


# ---------------------------------------------------------------------------------------------
# In-place ops on inputs: the caller sees the mutation

@case(inputs=x34)
def inplace_input_no_return(x):
    x.add_(1)


@case(inputs=x34)
def inplace_input_returned(x):
    x.mul_(2).add_(0.5)
    return x


@case(inputs=x34)
def inplace_input_then_used(x):
    x.sub_(1)
    return x * 2


@case(inputs=x34)
def inplace_input_augmented_operator(x):
    x += 1
    x *= 3
    return x.sum()


@case(inputs=x34)
def inplace_input_setitem(x):
    x[0] = 5.0
    x[:, -1] = x[:, 0] * 2
    return x[1:]


@case(inputs=x34)
def inplace_input_view_mutation(x):
    x[1].zero_()
    x.t()[0].fill_(-1.0)
    x.view(-1)[5] = 42.0
    return x.sum(dim=0)


@case(inputs=lambda g: (randn(g, 3, 4), randn(g, 3, 4)))
def inplace_two_inputs(a, b):
    a.add_(b)
    b.mul_(a)
    return a - b


@case(inputs=lambda g: (randn(g, 3, 4), randn(g, 3, 4)))
def inplace_copy_into_input(out, src):
    out.copy_(src * 2)
    return out


@case(inputs=lambda g: (randn(g, 3, 4),))
def inplace_input_masked_and_clamped(x):
    x.masked_fill_(x < 0, 0.0)
    x.clamp_(max=0.5)
    x.exp_()


@case(inputs=lambda g: (randn(g, 6), randn(g, 6)))
def inplace_input_out_argument(x, out):
    torch.add(x, 1, out=out)
    torch.mul(x, 2, out=x)
    return out


@case(inputs=lambda g: ([randn(g, 2), randn(g, 2)],))
def inplace_tensor_inside_input_list(xs):
    for t in xs:
        t.mul_(2)
    return xs[0] + xs[1]


@case(inputs=lambda g: (randn(g, 2, 3, requires_grad=False), randn(g, 3)))
def inplace_input_broadcast_add(x, b):
    x.add_(b)
    return x.mean()


# ---------------------------------------------------------------------------------------------
# Globals

CALLS = 0
LOG = []
LAST = None
GLOBAL_BUFFER = torch.zeros(4, device=DEVICE)  # globals live where the inputs do


def _reset_globals():
    global CALLS, LAST
    CALLS = 0
    LOG.clear()
    LAST = None
    GLOBAL_BUFFER.zero_()


def _globals_state(_):
    return {"CALLS": CALLS, "LOG": list(LOG), "LAST": LAST, "GLOBAL_BUFFER": GLOBAL_BUFFER}


@case(inputs=x34, reset=_reset_globals, state=_globals_state)
def global_int_counter_write(x):
    global CALLS
    CALLS += 1
    return x * 2


@case(inputs=x34, reset=_reset_globals, state=_globals_state)
def global_tensor_write(x):
    global LAST
    LAST = x.sum(dim=0)
    return x + 1


@case(inputs=x34, reset=_reset_globals, state=_globals_state,
      note="the appends are replayed after the graph; LOG is only appended to, so its length is not guarded (no recompile)")
def global_list_append(x):
    LOG.append(x.shape[0])
    LOG.append("seen")
    return x.relu()


@case(inputs=x34, reset=_reset_globals, state=_globals_state)
def global_buffer_inplace(x):
    GLOBAL_BUFFER.add_(x.sum(dim=0))
    return GLOBAL_BUFFER * 2


# ---------------------------------------------------------------------------------------------
# Caller-owned Python containers and objects

@case(inputs=lambda g: (randn(g, 3, 4), []), note="the appends are replayed in place after the graph")
def input_list_append(x, sink):
    sink.append(x * 2)
    sink.append(x.shape[0])
    return x


@case(inputs=lambda g: (randn(g, 3, 4), {"seen": 0}), note="the dict's final contents are replayed in place after the graph")
def input_dict_setitem(x, store):
    store["out"] = x.sum()
    store["seen"] = store["seen"] + 1
    del store["seen"]
    return x


class _Counter:
    def __init__(self):
        self.count = 0
        self.last = None


@case(inputs=lambda g: (randn(g, 3, 4), _Counter()))
def input_object_attribute_write(x, counter):
    counter.count += 1
    counter.last = x.mean()
    return x * counter.count, counter.count


class _FreshObject:
    pass


@case(inputs=x34)
def new_object_in_trace(x):
    o = _FreshObject()
    o.value = x * 2
    o.n = 3
    return o.value * o.n


# ---------------------------------------------------------------------------------------------
# Modules writing their own state

class StepCounter(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.steps = 0

    def forward(self, x):
        self.steps += 1
        return self.lin(x)


case("module_int_attr_increment", inputs=x34, module=True, state=lambda m: m.steps)(StepCounter)


class TensorAttrWriter(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 2)
        self.last_input = None
        self.history = []

    def forward(self, x):
        y = self.lin(x)
        self.last_input = x.detach()
        self.last_norm = y.norm()
        return y


case("module_tensor_attr_write", inputs=x34, module=True,
     state=lambda m: (m.last_input, m.last_norm))(TensorAttrWriter)


class BufferUpdater(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("running", torch.zeros(4))
        self.register_buffer("count", torch.zeros((), dtype=torch.int64))

    def forward(self, x):
        self.running.mul_(0.9).add_(x.mean(dim=0), alpha=0.1)
        self.count += 1
        return x - self.running


case("module_buffer_inplace_update", inputs=x34, module=True)(BufferUpdater)


class BufferReassign(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("ema", torch.zeros(4))

    def forward(self, x):
        self.ema = self.ema * 0.5 + x.mean(dim=0) * 0.5
        return x * self.ema


case("module_buffer_reassign", inputs=x34, module=True)(BufferReassign)


class ParamInplaceNoGrad(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(4))

    def forward(self, x):
        with torch.no_grad():
            self.w.mul_(0.5)
        return x * self.w


case("module_param_inplace_under_no_grad", inputs=x34, module=True, sets_grad_mode=True)(ParamInplaceNoGrad)


class ListAttrAppend(nn.Module):
    def __init__(self):
        super().__init__()
        self.seen_shapes = []

    def forward(self, x):
        self.seen_shapes.append(tuple(x.shape))
        return x.sin()


case("module_list_attr_append", inputs=x34, module=True,
     note="the append is replayed after the graph; the list is only appended to, so its length is not guarded (no recompile)",
     state=lambda m: list(m.seen_shapes))(ListAttrAppend)
