"""Measures how long the system g++ takes on a generated-kernel-sized translation unit.

Not a test: prints a table for docs/code-cache.md. A stand-in for ember/vec.h (the real header is
written in parallel) includes what a SIMD header includes (<immintrin.h>, <cmath>, <cstdint>,
<cstring>, <algorithm>, <limits>) and defines ~400 lines of inline vector code; the kernel is ~200
lines of OpenMP loops over it. Variants: with and without -pipe, and with a precompiled header.

    python tools/measure_cpp_compile.py [--repeat N] [--isa avx2] [--inductor]

On a machine without a built ember._C (another Python), pass the flags Ember would use, written
here with `--write-flags FILE`, as `--flags FILE` there.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
try:
    from ember._C import codecache
except ImportError:
    codecache = None
INCLUDE = "@INCLUDE@"  # stands for the include dir in a --flags file


def ember_flags(isa, flags_file, include):
    if flags_file:
        return [f.replace(INCLUDE, include) for f in json.load(open(flags_file))[isa]]
    return codecache.compile_flags(include_dirs=[include], isa=isa)


def detect_isa():
    if codecache is not None:
        return codecache.detect_isa()
    flags = set(open("/proc/cpuinfo").read().split())
    if {"avx512f", "avx512bw", "avx512dq", "avx512vl", "avx2", "fma", "f16c"} <= flags:
        return "avx512"
    return "avx2" if {"avx2", "fma", "f16c"} <= flags else "scalar"


def stand_in_header():
    lines = ["#pragma once", "#include <immintrin.h>", "#include <cmath>", "#include <cstdint>", "#include <cstring>",
             "#include <algorithm>", "#include <limits>", "namespace ember::vec {",
             "struct VecF { static constexpr int kSize = 8; float v[8];",
             "  static VecF load(const float* p) { VecF r; std::memcpy(r.v, p, sizeof r.v); return r; }",
             "  static VecF load(const float* p, int n) { VecF r{}; std::memcpy(r.v, p, n * sizeof(float)); return r; }",
             "  void store(float* p) const { std::memcpy(p, v, sizeof v); }",
             "  void store(float* p, int n) const { std::memcpy(p, v, n * sizeof(float)); }",
             "  static VecF broadcast(float x) { VecF r; for (float& e : r.v) e = x; return r; }",
             "  float lane(int i) const { return v[i]; } };"]
    for op in "+-*/":
        lines.append(f"inline VecF operator{op}(VecF a, VecF b) {{ VecF r; for (int i = 0; i < 8; ++i) "
                     f"r.v[i] = a.v[i] {op} b.v[i]; return r; }}")
    # Polynomial math functions, the bulk of a real vector-math header.
    for k in range(60):
        terms = " + x * (".join(f"{1.0 / (j + k + 1):.9e}f" for j in range(6)) + ")" * 5
        lines += [f"inline float poly{k}(float x) {{ return {terms}; }}",
                  f"inline VecF vpoly{k}(VecF a) {{ VecF r; for (int i = 0; i < 8; ++i) r.v[i] = poly{k}(a.v[i]); "
                  "return r; }",
                  f"template <typename T> inline T tpoly{k}(T x) {{ return x * T({k}) + T(1); }}"]
    for fn in ("exp", "log", "tanh", "erf"):
        lines.append(f"inline VecF {fn}(VecF a) {{ VecF r; for (int i = 0; i < 8; ++i) r.v[i] = std::{fn}(a.v[i]); "
                     "return r; }")
    lines.append("}  // namespace ember::vec")
    return "\n".join(lines) + "\n"


def kernel_source(tag):
    body = ['#include "ember/vec.h"', "#include <omp.h>", "using namespace ember::vec;", f"// {tag}"]
    for k in range(12):
        body += [f'extern "C" void kernel{k}(const float* in0, const float* in1, float* out0, int64_t n) {{',
                 "  #pragma omp parallel for if (n > 65536)",
                 "  for (int64_t i = 0; i < n - n % VecF::kSize; i += VecF::kSize) {",
                 "    VecF a = VecF::load(in0 + i);",
                 "    VecF b = VecF::load(in1 + i);",
                 f"    VecF c = vpoly{k}(a) * b + tanh(a * VecF::broadcast(0.5f));",
                 "    VecF d = exp(c - b) / (VecF::broadcast(1.0f) + log(a * a + VecF::broadcast(1.0f)));",
                 "    (c + d).store(out0 + i);",
                 "  }",
                 "  for (int64_t i = n - n % VecF::kSize; i < n; ++i) {",
                 f"    out0[i] = poly{k}(in0[i]) * in1[i] + std::erf(in0[i]);",
                 "  }",
                 "}"]
    body += ['extern "C" int64_t f(int64_t x) { return x + 1; }']
    return "\n".join(body) + "\n"


def timed(cmd):
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - start


def inductor_compile(cxx, isa, work, repeat):
    """Inductor's per-kernel cost: a one-loop kernel including its prefix header (ATen Vectorized)."""
    import sysconfig
    import torch
    root = os.path.join(os.path.dirname(torch.__file__), "include")
    src = os.path.join(work, "inductor.cpp")
    open(src, "w").write('''#include "torch/csrc/inductor/cpp_prefix.h"
extern "C" void kernel(const float* in_ptr0, float* out_ptr0) {
  #pragma omp parallel for
  for (long x0 = 0; x0 < 1024; x0 += 8) {
    auto tmp0 = at::vec::Vectorized<float>::loadu(in_ptr0 + x0, 8);
    tmp0.exp().store(out_ptr0 + x0);
  }
}
''')
    capability = {"avx512": ["-mavx512f", "-mavx512dq", "-mavx512vl", "-mavx512bw", "-mfma", "-DCPU_CAPABILITY_AVX512"],
                  "avx2": ["-mavx2", "-mfma", "-mf16c", "-DCPU_CAPABILITY_AVX2"], "scalar": []}[isa]
    cmd = [cxx, "-O3", "-std=c++17", "-fPIC", "-shared", "-fopenmp", *capability, "-I" + root,
           "-I" + os.path.join(root, "torch", "csrc", "api", "include"), "-I" + sysconfig.get_paths()["include"],
           src, "-o", os.path.join(work, "inductor.so")]
    times = [timed(cmd) for _ in range(repeat)]
    return statistics.median(times), min(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--isa", default=None)
    parser.add_argument("--flags", help="JSON file from --write-flags (when ember._C is not importable)")
    parser.add_argument("--write-flags", help="write Ember's flags per ISA to this JSON file and exit")
    parser.add_argument("--inductor", action="store_true", help="also time Inductor's cpp_prefix.h (needs torch)")
    args = parser.parse_args()
    if args.write_flags:
        json.dump({isa: codecache.compile_flags(include_dirs=[INCLUDE], isa=isa) for isa in ("scalar", "avx2", "avx512")},
                  open(args.write_flags, "w"), indent=1)
        return
    isa = args.isa or detect_isa()
    cxx = os.environ.get("CXX") or "g++"
    work = tempfile.mkdtemp(prefix="ember-cc-")
    try:
        inc = os.path.join(work, "include")
        os.makedirs(os.path.join(inc, "ember"))
        header = os.path.join(inc, "ember", "vec.h")
        open(header, "w").write(stand_in_header())
        src = os.path.join(work, "k.cpp")
        source = kernel_source("timing")
        open(src, "w").write(source)
        flags = ember_flags(isa, args.flags, inc)
        no_pipe = [f for f in flags if f != "-pipe"]
        # PCH: the same flags minus -shared, the header compiled to <dir>/ember/vec.h.gch, found first.
        pch_dir = os.path.join(work, "pch")
        os.makedirs(os.path.join(pch_dir, "ember"))
        pch_flags = [f for f in flags if f != "-shared"]
        pch_time = timed([cxx, *pch_flags, "-x", "c++-header", header, "-o", os.path.join(pch_dir, "ember", "vec.h.gch")])
        with_pch = [*flags[:-1], "-I" + pch_dir, flags[-1], "-Winvalid-pch"]
        out = os.path.join(work, "k.so")
        rows = []
        for name, fl in (("flags as shipped (-pipe)", flags), ("without -pipe", no_pipe), ("with PCH", with_pch),
                         ("-O2 instead of -O3", [("-O2" if f == "-O3" else f) for f in flags])):
            times = [timed([cxx, *fl, src, "-o", out]) for _ in range(args.repeat)]
            rows.append((name, statistics.median(times), min(times)))
        empty = os.path.join(work, "empty.cpp")
        open(empty, "w").write('#include "ember/vec.h"\nextern "C" int f() { return 0; }\n')
        times = [timed([cxx, *flags, empty, "-o", out]) for _ in range(args.repeat)]
        rows.append(("header only (empty kernel)", statistics.median(times), min(times)))
        times = [timed([cxx, *with_pch, empty, "-o", out]) for _ in range(args.repeat)]
        rows.append(("header only, with PCH", statistics.median(times), min(times)))
        if args.inductor:
            rows.append(("Inductor: one loop + cpp_prefix.h", *inductor_compile(cxx, isa, work, args.repeat)))
        version = subprocess.run([cxx, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
        print(f"compiler: {version}; isa {isa}; {os.cpu_count()} cpus, load {os.getloadavg()[0]:.1f}; kernel {source.count(chr(10))} lines, "
              f"header {open(header).read().count(chr(10))} lines; PCH build {pch_time:.3f} s, "
              f"{os.path.getsize(os.path.join(pch_dir, 'ember', 'vec.h.gch')) / 1e6:.1f} MB")
        print("| variant | median s | min s |\n|---|---|---|")
        for name, median, best in rows:
            print(f"| {name} | {median:.3f} | {best:.3f} |")
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
