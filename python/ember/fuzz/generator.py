"""Random programs for the differential fuzzer: seed -> Program (program.py), deterministically.

What a program may contain (each statement's `feature` names one): pointwise chains with broadcasting
and constants, reductions (sum/mean/amax/amin/var/softmax over random dims, keepdim), views (reshape,
flatten, permute, transpose, slices, expand, narrow), in-place ops on views of intermediates, mutation
of inputs and of input lists, indexing (basic, None/ellipsis, index_select, gather, boolean masks),
dtype changes and promotion (f32, f16, bf16, f64, int32, int64, bool), Python control flow on shapes
and on tensor values (graph breaks: a branch on a tensor, `.item()`, a loop that halves until small),
containers as inputs (list, tuple, dict) and outputs (tuple, list, dict), appends to a caller's
list (a side effect), and one tensor passed as two arguments.

Why statements are checked while they are generated: each candidate statement runs eagerly on the
program's seed-0 inputs, and one that raises is dropped, so the generator needs no model of torch's
shape and dtype rules -- the live values say which variables exist, their shapes and dtypes. The
finished program must then run eagerly on two input seeds; the seed picks another program otherwise.
Only `random.Random(seed)` and the eager values (themselves seeded) decide anything: same seed, same
source.
"""
import random

from .program import ONE, Expr, Input, Program, Stmt, TensorSpec

MAX_ELEMENTS = 4096

UNARY = ["torch.sin({0})", "torch.cos({0})", "torch.tanh({0})", "torch.sigmoid({0})", "torch.relu({0})",
         "{0}.abs()", "(-{0})", "{0}.clamp(-1.5, 1.5)", "torch.sqrt({0}.abs())", "torch.log1p({0}.abs())",
         "torch.exp({0}.clamp(max=3))", "({0} ** 2)", "torch.rsqrt({0}.abs() + 1)", "torch.floor({0})"]
BINARY = ["({0} + {1})", "({0} - {1})", "({0} * {1})", "({0} / ({1}.abs() + 1))", "torch.maximum({0}, {1})",
          "torch.minimum({0}, {1})"]
TERNARY = ["torch.where({0} > 0, {1}, {2})"]
CONSTANTS = ["0.5", "2", "1.5", "-1", "3"]
REDUCTIONS = ["sum", "mean", "amax", "amin", "var"]
DTYPES = ["float16", "bfloat16", "float64", "int32", "int64", "bool"]
INPLACE = ["mul_(2)", "add_(1)", "zero_()", "fill_(0.5)", "clamp_(-1, 1)", "neg_()", "sub_(0.25)"]


class _Builder:
    """One program under construction: the rng, the sizes, and the live eager namespace."""

    def __init__(self, seed):
        self.seed = seed
        self.rng = random.Random(seed)
        self.dims = [self.rng.randint(2, 6) for _ in range(self.rng.randint(2, 3))]
        self.inputs = []
        self.stmts = []
        self.ns = {}
        self.counter = 0

    # ---- names and live values --------------------------------------------------------------

    def fresh(self, prefix="t"):
        self.counter += 1
        return f"{prefix}{self.counter}"

    def tensors(self, pred=None):
        import torch
        return [n for n, v in self.ns.items() if isinstance(v, torch.Tensor) and (pred is None or pred(v))]

    def pick(self, pred=None):
        names = self.tensors(pred)
        return self.rng.choice(names) if names else None

    # ---- inputs -----------------------------------------------------------------------------

    def shape(self, rank):
        return tuple(ONE if self.rng.random() < 0.15 else self.rng.randrange(len(self.dims)) for _ in range(rank))

    def spec(self):
        dtype = "float32" if self.rng.random() < 0.7 else self.rng.choice(DTYPES)
        return TensorSpec(self.shape(self.rng.randint(1, 3)), dtype)

    def make_inputs(self):
        r = self.rng
        for i in range(r.randint(1, 3)):
            self.inputs.append(Input(f"x{i}", "tensor", [self.spec()]))
        if r.random() < 0.3:
            kind = r.choice(["list", "tuple", "dict"])
            shape = self.shape(r.randint(1, 3))
            self.inputs.append(Input("xs", kind, [TensorSpec(shape) for _ in range(r.randint(1, 3))]))
        if r.random() < 0.25:
            # An index tensor for gather / advanced indexing: values valid along one dim of x0.
            x0 = self.inputs[0].items[0]
            sized = [d for d in x0.shape if d != ONE]
            if sized:
                high = r.choice(sized)
                self.gather_dim = x0.shape.index(high)
                self.inputs.append(Input("idx", "tensor", [TensorSpec(x0.shape, "int64", high=high)]))
        if r.random() < 0.2:
            self.inputs.append(Input("log", "log"))
        # One tensor passed as two arguments (`f(x, x)`: a write through one name is read through the other).
        # Drawn from a stream of its own, so the other seeds' programs stay what they were.
        aside = random.Random(self.seed * 7919 + 17)
        if aside.random() < 0.1:
            same = aside.choice([i.name for i in self.inputs if i.kind == "tensor"])
            self.inputs.append(Input(f"x{len(self.inputs)}_same", "same", of=same))

    def bind_inputs(self):
        import torch
        prog = Program(self.seed, self.dims, self.inputs, [], ["None"])
        values = _cpu_inputs(load(prog.source()), 0)
        self.ns = {"torch": torch}
        for inp, value in zip(self.inputs, values):
            if inp.kind in ("tensor", "same"):
                self.ns[inp.name] = value
        self.containers = {i.name: i for i in self.inputs if i.kind in ("list", "tuple", "dict")}
        self.container_values = {i.name: v for i, v in zip(self.inputs, values) if i.kind != "tensor"}

    # ---- statements -------------------------------------------------------------------------

    def leaf(self):
        name = self.pick()
        return Expr(name) if name else None

    def pointwise(self, depth):
        r = self.rng
        if depth == 0 or r.random() < 0.3:
            if r.random() < 0.15:
                return Expr(r.choice(CONSTANTS))
            return self.leaf()
        arity = r.choice([1, 1, 2, 2, 3])
        fmt = r.choice({1: UNARY, 2: BINARY, 3: TERNARY}[arity])
        children = tuple(self.pointwise(depth - 1) for _ in range(arity))
        if any(c is None for c in children):
            return None
        return Expr(fmt, children)

    def assign(self, feature, expr):
        if expr is None or not any(c.fmt in self.ns for c in (expr, *expr.subexprs())):
            return None
        return Stmt(feature, self.fresh(), expr)

    def stmt_pointwise(self):
        expr = self.pointwise(self.rng.randint(1, 3))
        return self.assign("pointwise", expr) if expr is not None and expr.children else None

    def stmt_reduction(self):
        r = self.rng
        x = self.pick(lambda t: t.dim() > 0)
        if x is None:
            return None
        op = r.choice(REDUCTIONS + ["softmax", "full"])
        if op == "full":
            return self.assign("reduction", Expr(f"{{0}}.{r.choice(['sum', 'amax', 'mean'])}()", (Expr(x),)))
        rank = self.ns[x].dim()
        dims = r.sample(range(rank), r.randint(1, min(2, rank)))
        dims = [d - rank if r.random() < 0.3 else d for d in dims]
        if op == "softmax":
            return self.assign("reduction", Expr(f"torch.softmax({{0}}, dim={dims[0]})", (Expr(x),)))
        dim = str(dims[0]) if len(dims) == 1 else str(tuple(dims))
        keep = r.random() < 0.5
        return self.assign("reduction", Expr(f"{{0}}.{op}(dim={dim}, keepdim={keep})", (Expr(x),)))

    def stmt_view(self):
        r = self.rng
        x = self.pick(lambda t: t.dim() > 0)
        if x is None:
            return None
        rank = self.ns[x].dim()
        perm = list(range(rank))
        r.shuffle(perm)
        i, j = r.randrange(rank), r.randrange(rank)
        fmt = r.choice([
            "{0}.reshape(-1)", "{0}.flatten()", "{0}.reshape({0}.shape[0], -1)", f"{{0}}.permute{tuple(perm)}",
            f"{{0}}.transpose({i}, {j})", "{0}.t()", "{0}[1:]", "{0}[:, ::2]", "{0}[..., :2]",
            "{0}.unsqueeze(0).expand(3, *{0}.shape)", "{0}.unsqueeze(-1).expand(*{0}.shape, 2)",
            f"{{0}}.narrow({i}, 1, 1)", "{0}.view(-1)", "{0}.contiguous()", f"{{0}}.unsqueeze({i})",
            f"{{0}}.squeeze({i})", f"{{0}}.movedim({i}, {j})"])
        return self.assign("view", Expr(fmt, (Expr(x),)))

    def view_index(self, rank):
        r = self.rng
        options = ["[0]", "[1:]", "[..., ::2]", "[..., 0]"]
        if rank >= 2:
            options += ["[:, 0]", ".t()[0]", ".transpose(0, -1)[1:]", ".diagonal()"]
        return r.choice(options)

    def stmt_inplace_view(self):
        r = self.rng
        x = self.pick(lambda t: t.dim() > 0)
        if x is None:
            return None
        v, w = self.fresh(), self.fresh()
        index, op = self.view_index(self.ns[x].dim()), r.choice(INPLACE)
        copy = Stmt("pointwise", v, Expr("{0}.clone()", (Expr(x),)))
        if r.random() < 0.5:
            lines = (f"{v} = {x}.clone()", f"{v}{index}.{op}")
        else:
            # A view taken before its base is mutated: the view must see the write.
            lines = (f"{v} = {x}.clone()", f"{w} = {v}{index}", f"{v}.{op}")
        return Stmt("inplace-view", lines=lines, alternatives=(copy,))

    def stmt_input_mutation(self):
        r = self.rng
        names = [i.name for i in self.inputs if i.kind == "tensor" and i.name != "idx"]
        if "xs" in self.containers and self.containers["xs"].kind == "list" and r.random() < 0.3:
            y = self.pick()
            return Stmt("container-mutation", lines=(f"xs.append({y} * 2)",)) if y else None
        if not names:
            return None
        x = r.choice(names)
        index = "" if r.random() < 0.5 else self.view_index(self.ns[x].dim())
        return Stmt("input-mutation", lines=(f"{x}{index}.{r.choice(INPLACE)}",))

    def stmt_indexing(self):
        r = self.rng
        if "idx" in self.ns and r.random() < 0.3:
            return self.assign("gather", Expr(f"torch.gather({{0}}, {self.gather_dim}, idx)", (Expr("x0"),)))
        x = self.pick(lambda t: t.dim() > 0)
        if x is None:
            return None
        rank = self.ns[x].dim()
        d = r.randrange(rank)
        fmt = r.choice([
            "{0}[0]", "{0}[..., None]", "{0}[None]", "{0}[-1, ...]", f"torch.index_select({{0}}, {d}, torch.tensor([1, 0]))",
            f"{{0}}.index_select({d}, torch.tensor([0, 0, 1]))", "{0}[{0} > 0]", "{0}[torch.tensor([1, 0, 1])]"]
            + (["{0}[idx.flatten()]"] if "idx" in self.ns else [])
            + (["{0}[:, 1]", "{0}[1, :2]"] if rank >= 2 else []))
        feature = "mask-index" if "> 0]" in fmt else "indexing"
        return self.assign(feature, Expr(fmt, (Expr(x),)))

    def stmt_dtype(self):
        r = self.rng
        x, y = self.pick(), self.pick()
        if x is None:
            return None
        fmt = r.choice(["{0}.to(torch.float16)", "{0}.to(torch.bfloat16)", "{0}.double()", "{0}.float()",
                        "{0}.int()", "{0}.long()", "({0} > 0)", "{0}.bool()", "({0}.to(torch.float16) + {1})",
                        "({0}.to(torch.bfloat16) * {1})", "{0}.to({1}.dtype)", "({0}.int() + {1})",
                        "({0} > {1}) | ({1} < 0.5)"])
        return self.assign("dtype", Expr(fmt, (Expr(x), Expr(y))))

    def branches(self, v):
        a, b = self.pointwise(2), self.pointwise(2)
        if a is None or b is None:
            return None
        return Stmt("pointwise", v, a), Stmt("pointwise", v, b)

    def stmt_shape_flow(self):
        r = self.rng
        x = self.pick(lambda t: t.dim() > 0)
        v = self.fresh()
        if x is None:
            return None
        if r.random() < 0.5:
            pair = self.branches(v)
            if pair is None:
                return None
            a, b = pair
            return Stmt("shape-branch", lines=(f"if {x}.shape[0] > {r.randint(2, 5)}:", f"    {a.render()[0]}",
                                               "else:", f"    {b.render()[0]}"), alternatives=pair)
        body = self.rng.choice(UNARY).format(v)
        init = Stmt("pointwise", v, Expr("({0} * 1)", (Expr(x),)))
        return Stmt("shape-loop", lines=(f"{v} = {x} * 1", f"for _ in range({x}.shape[-1] % 3 + 1):",
                                         f"    {v} = {body} + 0.5"), alternatives=(init,))

    def stmt_value_flow(self):
        import torch
        r = self.rng
        x = self.pick(lambda t: t.numel() > 0 and t.dtype != torch.bool)
        if x is None:
            return None
        v = self.fresh()
        kind = r.choice(["branch", "item", "loop"])
        if kind == "branch":
            pair = self.branches(v)
            if pair is None:
                return None
            a, b = pair
            cond = r.choice([f"{x}.sum() > 0", f"{x}.float().mean() < 0.2", f"({x} > 1).any()",
                             f"{x}.amax().item() > 0.5"])
            return Stmt("value-branch", lines=(f"if {cond}:", f"    {a.render()[0]}", "else:", f"    {b.render()[0]}"),
                        alternatives=pair)
        y = self.pick(lambda t: t.is_floating_point())
        if y is None:
            return None
        if kind == "item":
            return Stmt("item", lines=(f"{v} = {y} * {x}.float().mean().item()",),
                        alternatives=(Stmt("pointwise", v, Expr("({0} * 0.5)", (Expr(y),))),))
        init = Stmt("pointwise", v, Expr("{0}.clone()", (Expr(y),)))
        return Stmt("value-loop", lines=(f"{v} = {y}.clone()", "for _ in range(6):",
                                         f"    if {v}.abs().amax() <= 1:", "        break", f"    {v} = {v} / 2"),
                    alternatives=(init,))

    def stmt_container(self):
        r = self.rng
        if not self.containers or r.random() < 0.4:
            y = self.pick()
            if y is None or "log" not in [i.name for i in self.inputs]:
                return None
            return Stmt("side-effect", lines=(f"log.append({y}.sum())",))
        name, inp = r.choice(sorted(self.containers.items()))
        v = self.fresh()
        if inp.kind == "dict":
            key = r.choice(inp.keys())
            return Stmt("container-read", v, Expr(f"{name}[{key!r}]"))
        if r.random() < 0.5:
            return Stmt("container-read", v, Expr(f"{name}[{r.randrange(len(inp.items))}]"))
        return Stmt("container-loop", lines=(f"{v} = {name}[0] * 0", f"for t in {name}:", f"    {v} = {v} + t"),
                    alternatives=(Stmt("container-read", v, Expr(f"{name}[0]")),))

    WEIGHTS = [("stmt_pointwise", 5), ("stmt_reduction", 3), ("stmt_view", 3), ("stmt_inplace_view", 2),
               ("stmt_input_mutation", 1), ("stmt_indexing", 2), ("stmt_dtype", 2), ("stmt_shape_flow", 1),
               ("stmt_value_flow", 1), ("stmt_container", 2)]

    def try_stmt(self, stmt):
        """Runs a candidate on the live values; keeps it when it runs without a warning (var() with no
        degrees of freedom, ...) and makes no huge tensor."""
        import warnings

        import torch
        before = set(self.ns)
        trial = dict(self.ns)
        trial.update(self.container_values)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                exec("\n".join(stmt.render()), trial)
        except Exception:  # an invalid candidate (shape, dtype, index) or a warning: drop it
            return False
        new = {k: v for k, v in trial.items() if k not in before and k not in self.container_values and k != "t"}
        if any(isinstance(v, torch.Tensor) and v.numel() > MAX_ELEMENTS for v in new.values()):
            return False
        self.ns.update(new)
        self.stmts.append(stmt)
        return True

    def build(self):
        self.make_inputs()
        self.bind_inputs()
        names, weights = zip(*self.WEIGHTS)
        target = self.rng.randint(3, 10)
        for _ in range(target * 4):
            if len(self.stmts) >= target:
                break
            stmt = getattr(self, self.rng.choices(names, weights)[0])()
            if stmt is not None:
                self.try_stmt(stmt)
        made = [n for n in self.tensors() if n.startswith("t")]
        pool = made or self.tensors()
        outputs = sorted(set(self.rng.sample(pool, min(len(pool), self.rng.randint(1, 3)))), key=pool.index)
        kind = self.rng.choice(["tuple", "list", "dict", "single"])
        return Program(self.seed, self.dims, self.inputs, self.stmts, outputs, kind)


def _generator(i):
    import torch
    g = torch.Generator()
    g.manual_seed(1000 + i)
    return g


def load(source, filename="<ember.fuzz>"):
    """Executes a program's source in a fresh namespace; the source is registered with linecache so
    that tracebacks and Ember's break reasons can show its lines."""
    import linecache
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    ns = {"__name__": "ember_fuzz_program"}
    exec(compile(source, filename, "exec"), ns)
    return ns


def _on_device(tree, device, memo=None):
    """The inputs with every tensor on `device` (a tensor passed twice stays one); a container is rebuilt only
    when something in it moved."""
    import torch
    memo = {} if memo is None else memo
    if isinstance(tree, torch.Tensor):
        if id(tree) not in memo:
            memo[id(tree)] = tree.to(device)
        return memo[id(tree)]
    if isinstance(tree, (list, tuple)):
        moved = [_on_device(v, device, memo) for v in tree]
        return tree if all(m is v for m, v in zip(moved, tree)) else type(tree)(moved)
    if isinstance(tree, dict):
        moved = {k: _on_device(v, device, memo) for k, v in tree.items()}
        return tree if all(moved[k] is v for k, v in tree.items()) else moved
    return tree


def _cpu_inputs(ns, i):
    """Input seed i's values on the CPU, whatever EMBER_TEST_DEVICE says: programs are drawn and checked on the
    CPU, where an invalid one raises (on CUDA an index out of range is a device-side assert that poisons the
    process's CUDA context); the runner puts inputs on each variant's device (_on_device)."""
    return _on_device(ns["inputs"](_generator(i)), "cpu")


def runs_eagerly(prog):
    """The program runs without error on input seeds 0 and 1 (a branch may differ between them)."""
    try:
        ns = load(prog.source())
        for i in range(2):
            ns["program"](*_cpu_inputs(ns, i))
    except Exception:  # the program is not valid torch for these inputs
        return False
    return True


def generate(seed):
    """The program for `seed`: deterministic, and valid eager PyTorch on input seeds 0 and 1."""
    for attempt in range(20):
        prog = _Builder(seed * 1000 + attempt).build()
        prog.seed = seed
        if prog.stmts and runs_eagerly(prog):
            return prog
    raise RuntimeError(f"ember.fuzz: no valid program for seed {seed} in 20 attempts")
