"""Wall-clock timing shared by every benchmark suite and the demo.

Guarantees: warm-up calls before any sample; every sample times a block of calls (sized so one block lasts
at least `min_sample_s`, which keeps the timer's resolution out of microsecond numbers); medians over many
samples; a spread (interquartile range) next to every median so a reader can tell a difference from noise.

Callables measured together are interleaved sample by sample, rotating who goes first, so that a slow
drift of the machine (other processes, frequency changes) lands on all of them alike. Overheads are
differences of such interleaved medians, and their noise is the spread of the per-round differences.
The garbage collector is off while samples are taken; it would otherwise charge its pauses to whoever
happened to allocate last.
"""
import dataclasses
import gc
import statistics
import time


def _quantile(sorted_values, q):
    """Linear interpolation between closest ranks; sorted_values must be non-empty and sorted."""
    pos = (len(sorted_values) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


@dataclasses.dataclass
class Timing:
    """Per-call seconds of `len(samples)` samples, each the mean over `calls_per_sample` calls."""
    samples: list
    calls_per_sample: int

    @property
    def median(self):
        return statistics.median(self.samples)

    @property
    def min(self):
        return min(self.samples)

    @property
    def iqr(self):
        s = sorted(self.samples)
        return _quantile(s, 0.75) - _quantile(s, 0.25)

    def to_json(self):
        return {
            "median_us": self.median * 1e6,
            "min_us": self.min * 1e6,
            "iqr_us": self.iqr * 1e6,
            "samples": len(self.samples),
            "calls_per_sample": self.calls_per_sample,
        }


@dataclasses.dataclass
class Difference:
    """`a - b` for two interleaved timings: the difference of medians, and the spread of per-round differences."""
    value: float
    iqr: float

    @property
    def within_noise(self):
        return abs(self.value) <= self.iqr

    def to_json(self):
        return {"us": self.value * 1e6, "noise_us": self.iqr * 1e6, "within_noise": self.within_noise}


def difference(a, b):
    if len(a.samples) != len(b.samples):
        raise ValueError(f"difference: timings were not taken together ({len(a.samples)} vs {len(b.samples)} samples)")
    per_round = sorted(x - y for x, y in zip(a.samples, b.samples))
    return Difference(a.median - b.median, _quantile(per_round, 0.75) - _quantile(per_round, 0.25))


def _block(fn, calls):
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return time.perf_counter() - start


def calls_per_sample(fn, min_sample_s, max_calls=1 << 20):
    """How many back-to-back calls of fn last at least min_sample_s (a power of two, at most max_calls)."""
    calls = 1
    while calls < max_calls and _block(fn, calls) < min_sample_s:
        calls *= 2
    return calls


def measure(fns, *, warmup=3, repeats=21, min_sample_s=0.002, calls=None):
    """Time each zero-argument callable of the dict `fns` -> {name: Timing}, interleaved round by round.

    All callables use the same number of calls per sample (enough for the fastest to last min_sample_s,
    unless `calls` is given), so every sample is long enough and paired samples are comparable.
    """
    if not fns:
        raise ValueError("measure: nothing to time")
    if repeats < 1 or warmup < 0:
        raise ValueError(f"measure: need repeats >= 1 and warmup >= 0, got repeats={repeats}, warmup={warmup}")
    warm_up(fns, warmup)
    if calls is None:
        calls = max(calls_per_sample(fn, min_sample_s) for fn in fns.values())
    samples = interleave(fns, repeats, lambda fn: _block(fn, calls) / calls)
    return {name: Timing(samples[name], calls) for name in fns}


def warm_up(fns, warmup):
    for fn in fns.values():
        for _ in range(warmup):
            fn()


def interleave(fns, repeats, take_sample):
    """{name: [take_sample(fn) for each of `repeats` rounds]}; each round rotates who goes first, and the
    garbage collector is off throughout. A sample may be any value (gpu_timing.py takes CUDA events and reads
    them once the rounds are over)."""
    names = list(fns)
    samples = {name: [] for name in names}
    gc_was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        for r in range(repeats):
            for i in range(len(names)):
                name = names[(r + i) % len(names)]
                samples[name].append(take_sample(fns[name]))
    finally:
        if gc_was_enabled:
            gc.enable()
    return samples


def time_first_call(fn):
    """(seconds, result) of a single call: the cost of a compiler's first call, capture included."""
    gc.collect()
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def format_us(seconds):
    us = seconds * 1e6
    if abs(us) >= 1000:
        return f"{us / 1000:.2f} ms"
    return f"{us:.1f} µs"


def format_s(seconds):
    if seconds >= 1:
        return f"{seconds:.2f} s"
    return f"{seconds * 1e3:.1f} ms"
