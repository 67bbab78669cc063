"""Triton's compiler on generated kernel text, in worker processes (docs/cuda-runtime.md).

The C++ side (src/runtime/triton_build.cpp) owns the cubin cache; it calls two functions here,
with the GIL held, at compile time only:

- ``fingerprint(backend, capability, warp_size)``: the toolchain's part of every cache key (Triton's
  version, the ptxas path and ``--version`` it runs for that target, the sha256 of
  ``helpers.py``); computed once per process and target.
- ``compile_kernels(jobs, workers)``: compiles every job (a dict, see ``_compile_one``) in a pool of
  worker processes and returns one result dict per job, in order: the cubin, the PTX, the launch
  metadata and the launched parameter types, or ``{"error": message}``.

Why a pool of plain subprocesses rather than ``multiprocessing``: spawn and forkserver children
re-import the parent's ``__main__`` (a user's training script, unless it guards its top level),
and unpickling a function from ``ember._triton.compile`` would import the ``ember`` package, that
is torch and ``ember._C``, in every worker. A worker here is ``python -c`` that loads this very
file by path (stdlib imports only at the top), imports triton once, and serves jobs over its
stdin/stdout. Workers start when a batch needs them (as many as it has jobs, up to the limit), or
earlier through ``prestart()`` (ember.compile calls it once CUDA is in use, so that they boot while
the first graph is traced), and are reused for the life of the process; each compiles a small kernel
as it starts (``_warm_up``: Triton's one-time costs), and they exit when their stdin closes (the
parent exited).

In a worker, ``ember._triton.helpers`` is importable without importing ``ember``: helpers.py is
loaded by path into ``sys.modules`` under that name, below two empty package modules. A kernel's
text is compiled from a content-named fake file registered in ``linecache`` (Triton reads a
``@triton.jit`` function's source through ``inspect``): the name depends on the text only, so the
cubin (whose line info carries the file name) is the same on every machine.
"""

import atexit
import hashlib
import os
import pickle
import selectors
import struct
import subprocess
import sys
import threading
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
_HELPERS = os.path.join(_HERE, "helpers.py")

# Options every job compiles with, besides its own num_warps, num_stages and debug. Inductor turns
# overflow sanitizing off too: it adds checks to every integer op when debug is on.
_FIXED_OPTIONS = {"sanitize_overflow": False}


def _helpers_digest():
    try:
        with open(_HELPERS, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except FileNotFoundError:
        return "none"


_fingerprints = {}
_fingerprint_lock = threading.Lock()


def fingerprint(backend, capability, warp_size):
    """Everything about the toolchain that changes the cubin of a given job, as one string."""
    target = (backend, capability, warp_size)
    with _fingerprint_lock:
        if target not in _fingerprints:
            import triton
            from triton.backends.nvidia.compiler import get_ptxas, get_ptxas_version

            ptxas = get_ptxas(capability).path
            _fingerprints[target] = "\n".join([
                "triton " + triton.__version__,
                "ptxas " + ptxas,
                get_ptxas_version(capability).strip(),
                "helpers " + _helpers_digest(),
                "options " + repr(sorted(_FIXED_OPTIONS.items())),
            ])
        return _fingerprints[target]


# ---- the parent: a pool of worker processes ----

# Replies go to a private copy of the worker's stdout; fd 1 itself becomes stderr, so that whatever
# Triton or a tool prints cannot corrupt the stream of replies.
_WORKER_BOOT = """
import importlib.util, os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; EOF ends a worker
replies = os.fdopen(os.dup(1), "wb")
os.dup2(2, 1)
sys.stdout = sys.stderr
spec = importlib.util.spec_from_file_location("ember_triton_compile_worker", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
module._serve(sys.stdin.buffer, replies)
"""


def _send(stream, obj):
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(struct.pack("<Q", len(data)) + data)
    stream.flush()


def _read_exact(stream, size):
    chunks = []
    while size:
        chunk = stream.read(size)
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _receive(stream):
    head = _read_exact(stream, 8)
    if head is None:
        return None
    data = _read_exact(stream, struct.unpack("<Q", head)[0])
    return None if data is None else pickle.loads(data)


class _Worker:
    def __init__(self):
        # stderr is inherited: Triton's and ptxas's warnings reach the user's terminal.
        # Without TRITON_INTERPRET: a process that interprets kernels (options={"triton_interpret": True})
        # can still compile cubins, which an interpreted triton.language cannot.
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        self.process = subprocess.Popen(
            [sys.executable, "-c", _WORKER_BOOT, os.path.abspath(__file__)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)

    def alive(self):
        return self.process.poll() is None

    def close(self):
        try:
            self.process.stdin.close()
        except OSError:
            pass


class _Pool:
    def __init__(self):
        self.workers = []
        self.lock = threading.Lock()  # one batch at a time: a worker serves one job at a time

    def start(self, count):
        """At least `count` live workers (started, not waited for)."""
        with self.lock:
            self._ensure(count)

    def _ensure(self, count):
        self.workers = [w for w in self.workers if w.alive()]
        while len(self.workers) < count:
            self.workers.append(_Worker())

    def run(self, jobs, limit):
        with self.lock:
            self._ensure(min(limit, len(jobs)))
            results = [None] * len(jobs)
            pending = list(reversed(range(len(jobs))))
            busy = {}  # worker -> job index
            selector = selectors.DefaultSelector()
            try:
                for worker in self.workers[:min(limit, len(jobs))]:
                    self._start(worker, pending, busy, jobs, selector)
                while busy:
                    for key, _ in selector.select():
                        worker = key.data
                        index = busy.pop(worker)
                        selector.unregister(worker.process.stdout)
                        result = _receive(worker.process.stdout)
                        if result is None:
                            code = worker.process.wait()
                            result = {"error": f"the Triton compile worker died (exit status {code})"}
                            self.workers.remove(worker)
                            worker = _Worker()
                            self.workers.append(worker)
                        results[index] = result
                        self._start(worker, pending, busy, jobs, selector)
            finally:
                selector.close()
            return results

    @staticmethod
    def _start(worker, pending, busy, jobs, selector):
        if not pending:
            return
        index = pending.pop()
        _send(worker.process.stdin, jobs[index])
        busy[worker] = index
        selector.register(worker.process.stdout, selectors.EVENT_READ, worker)

    def close(self):
        for worker in self.workers:
            worker.close()
        for worker in self.workers:
            try:
                worker.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                worker.process.kill()


_pool = None
_pool_lock = threading.Lock()


@atexit.register
def shutdown():
    """Stops the workers (each exits when its stdin closes); the next batch or prestart() starts new
    ones, which read the environment (TRITON_CACHE_DIR, TRITON_PTXAS_PATH) afresh."""
    global _pool
    with _pool_lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.close()


def default_workers():
    """min(16, the cores this process may run on)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(16, cores or 1))


def _new_stats():
    return {"batches": 0, "jobs": 0, "wall_seconds": 0.0, "workers_started": 0, "worker_boot_seconds": 0.0,
            "job_seconds": {}}


_stats = _new_stats()


def stats():
    """What compile_kernels did since the last reset_stats(): batches, jobs compiled, the batches' wall
    seconds, workers started and the seconds they spent importing triton (summed over workers), and
    per Triton stage (frontend, ttir, ttgir, llir, ptx, cubin = ptxas) and in total the seconds jobs
    spent, summed over jobs (they overlap: the pool runs them in parallel)."""
    with _pool_lock:
        return {k: dict(v) if isinstance(v, dict) else v for k, v in _stats.items()}


def reset_stats():
    global _stats
    with _pool_lock:
        _stats = _new_stats()


def _account(results, seconds):
    with _pool_lock:
        _stats["batches"] += 1
        _stats["jobs"] += len(results)
        _stats["wall_seconds"] += seconds
        for result in results:
            boot = result.pop("boot_seconds", None)
            if boot is not None:
                _stats["workers_started"] += 1
                _stats["worker_boot_seconds"] += boot
            for stage, s in result.pop("seconds", {}).items():
                _stats["job_seconds"][stage] = _stats["job_seconds"].get(stage, 0.0) + s


def _get_pool():
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = _Pool()
        return _pool


def prestart(workers=0):
    """Starts the pool's workers now, without waiting for them: each imports triton and warms up
    (about 1-3 s) while the caller goes on tracing, so the first batch finds them ready. `workers` 0:
    default_workers(). Workers already running count."""
    _get_pool().start(workers or default_workers())


def compile_kernels(jobs, workers=0):
    """One result per job, in order (see the module docstring). `workers` 0: min(16, cpus)."""
    if not jobs:
        return []
    start = time.perf_counter()
    results = _get_pool().run(list(jobs), workers or default_workers())
    _account(results, time.perf_counter() - start)
    return results


# ---- the worker ----

def _install_helpers():
    """Makes `from ember._triton import helpers` work without importing the ember package."""
    import importlib.util
    import types

    ember = types.ModuleType("ember")
    ember.__path__ = []
    package = types.ModuleType("ember._triton")
    package.__path__ = []
    ember._triton = package
    sys.modules["ember"] = ember
    sys.modules["ember._triton"] = package
    if os.path.exists(_HELPERS):
        spec = importlib.util.spec_from_file_location("ember._triton.helpers", _HELPERS)
        helpers = importlib.util.module_from_spec(spec)
        sys.modules["ember._triton.helpers"] = helpers
        spec.loader.exec_module(helpers)
        package.helpers = helpers


def _load_kernel(source, name):
    import linecache

    filename = f"ember_triton_{hashlib.sha256(source.encode()).hexdigest()[:20]}.py"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    namespace = {"__name__": filename[:-3], "__file__": filename}
    exec(compile(source, filename, "exec"), namespace)
    if name not in namespace:
        raise NameError(f"the kernel source defines no function '{name}'")
    return namespace[name]


def _compile_one(job):
    """job: source, name, signature [(param, type)], constexprs [(param, value)], divisible (indices
    of parameters whose value is a multiple of 16), options {num_warps, num_stages, debug},
    target (backend, capability, warp_size)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    start = time.perf_counter()
    fn = _load_kernel(job["source"], job["name"])
    signature = dict(job["signature"])
    constexprs = dict(job["constexprs"])
    attrs = {(i,): [["tt.divisibility", 16]] for i in job["divisible"]}
    options = dict(job["options"], **_FIXED_OPTIONS)
    stage_us = {}

    def listen(times, **_):  # Triton's own per-stage clock (knobs.CompileTimes, microseconds)
        stage_us["frontend"] = times.ir_initialization
        stage_us.update(times.lowering_stages)

    triton.knobs.compilation.listener = listen
    try:
        compiled = triton.compile(ASTSource(fn, signature, constexprs, attrs), target=GPUTarget(*job["target"]),
                                  options=options)
    finally:
        triton.knobs.compilation.listener = None
    m = compiled.metadata
    seconds = {stage: us / 1e6 for stage, us in stage_us.items()}
    seconds["total"] = time.perf_counter() - start
    return {
        "seconds": seconds,
        "cubin": compiled.kernel,
        "ptx": compiled.asm.get("ptx", ""),
        "entry": m.name,
        "num_warps": m.num_warps,
        "num_ctas": m.num_ctas,
        "shared": m.shared,
        "global_scratch_size": m.global_scratch_size,
        "global_scratch_align": m.global_scratch_align,
        "profile_scratch_size": m.profile_scratch_size,
        "profile_scratch_align": m.profile_scratch_align,
        "param_types": [t for p, t in job["signature"] if t != "constexpr" and p not in constexprs],
    }


# A kernel compiled once by every worker as it starts (see _warm_up).
_WARM_UP_SOURCE = """
import triton
import triton.language as tl


@triton.jit
def ember_warm_up(in_ptr0, out_ptr0, xnumel, XBLOCK: tl.constexpr):
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    xmask = xindex < xnumel
    tl.store(out_ptr0 + xindex, tl.load(in_ptr0 + xindex, xmask) + 1.0, xmask)
"""


def _compile_past_tritons_cache():
    """Ember's cubin cache (src/runtime/triton_build.cpp) is the one that serves jobs; Triton's own cache
    under it would only answer what Ember's already missed, yet its key costs every worker a hash of
    libtriton.so (triton_key: 0.25 s of a worker's 0.4 s start on the dev box). So a worker compiles
    past Triton's cache (always_compile: never read) and keys the entries Triton still writes (its
    CompiledKernel reads the cubin back from them) on Triton's version and libtriton.so's size and
    modification time instead."""
    import triton
    import triton.runtime.cache as triton_cache

    library = os.path.join(os.path.dirname(triton.__file__), "_C")
    identity = [triton.__version__]
    for name in sorted(os.listdir(library)):
        if name.startswith("libtriton."):
            st = os.stat(os.path.join(library, name))
            identity.append(f"{name}:{st.st_size}:{st.st_mtime_ns}")
    key = "-".join(identity)
    triton_cache.triton_key = lambda: key
    triton.knobs.compilation.always_compile = True


def _warm_up():
    """Pays a process's one-time compile costs before the first job arrives: the first triton.compile
    imports the code generator and starts LLVM and ptxas; a job would pay them on top of its own
    compile."""
    try:
        _compile_one({"source": _WARM_UP_SOURCE, "name": "ember_warm_up",
                      "signature": [("in_ptr0", "*fp32"), ("out_ptr0", "*fp32"), ("xnumel", "i32"),
                                    ("XBLOCK", "constexpr")],
                      "constexprs": [("XBLOCK", 128)], "divisible": [0, 1],
                      "options": {"num_warps": 4, "num_stages": 1, "debug": False}, "target": ("cuda", 90, 32)})
    except Exception:  # noqa: BLE001 -- a warm-up that fails costs nothing; a job reports its own errors
        pass


def _serve(requests, replies):
    start = time.perf_counter()
    _install_helpers()
    import triton  # noqa: F401  (once, before the first job, so each job pays only its compile)

    _compile_past_tritons_cache()
    _warm_up()
    boot = time.perf_counter() - start  # reported with the first result (stats())
    while True:
        job = _receive(requests)
        if job is None:
            return
        try:
            result = _compile_one(job)
        except Exception as e:  # a Triton error is the job's result, not the worker's end
            result = {"error": f"{type(e).__name__}: {e}"}
        if boot is not None:
            result["boot_seconds"], boot = boot, None
        _send(replies, result)
