"""Peak memory of a few calls, measured the same way for eager PyTorch and for every compiler.

torch keeps no allocator statistics on the CPU, so the measure is the process's resident set: the peak
resident size while the calls run (Linux's VmHWM, reset just before them by writing "5" to
/proc/self/clear_refs) minus the resident size before them. Before the reset, freed heap memory is handed
back to the system (glibc's malloc_trim), so that a call cannot hide its allocations in memory an earlier
call left resident. What the delta counts: every intermediate and output buffer a call touches, and any
workspace or arena the compiled code allocates per call; not the weights and inputs (resident before), nor
the compiler's own memory when the calls come after the first one.

Where the high-water mark cannot be reset (not Linux, or /proc not writable) the fallback is the growth of
getrusage's ru_maxrss over the calls, which is zero whenever an earlier peak was higher; the result names
the method it used so a reader can tell.
"""
import ctypes
import ctypes.util
import gc
import resource

_libc = None


def _release_free_heap():
    global _libc
    if _libc is None:
        name = ctypes.util.find_library("c")
        _libc = ctypes.CDLL(name) if name else False
    if _libc and hasattr(_libc, "malloc_trim"):
        _libc.malloc_trim(0)


def _status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise OSError(f"/proc/self/status has no {field} line")


def _reset_high_water_mark():
    """True when VmHWM now equals the current resident size."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_delta(fn, calls):
    """{"bytes": peak resident growth while `calls` calls of fn run, "method": how it was measured}."""
    if calls < 1:
        raise ValueError(f"peak_delta: calls must be >= 1, got {calls}")
    gc.collect()
    _release_free_heap()
    if _reset_high_water_mark():
        before = _status_kib("VmRSS")
        for _ in range(calls):
            fn()
        return {"bytes": max(0, _status_kib("VmHWM") - before) * 1024, "method": "VmHWM - VmRSS"}
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for _ in range(calls):
        fn()
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"bytes": (after - before) * 1024, "method": "ru_maxrss growth (a lower bound)"}
