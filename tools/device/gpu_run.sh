#!/usr/bin/env bash
# Builds Ember on the lent GPU machine (its python3 has torch, nanobind, cmake, ninja; no registry)
# and runs the test suite with CUDA tensors where tests take a device (EMBER_TEST_DEVICE=cuda).
# Usage: tools/device/gpu_run.sh [pytest args...]; logs go to $OUT when set.
set -uo pipefail
out=${OUT:-/tmp}
python3 -c "import sys, torch, nanobind; print(sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')"
cmake -S . -B build/py311 -G Ninja -DPython_EXECUTABLE="$(command -v python3)" \
  -Dnanobind_DIR="$(python3 -m nanobind --cmake_dir)" > "$out/gpu-build.log" 2>&1 &&
  ninja -C build/py311 -j "$(nproc)" >> "$out/gpu-build.log" 2>&1 || { tail -40 "$out/gpu-build.log"; exit 1; }
cp build/py311/_C*.so python/ember/
make --no-print-directory python/ember-0.1.0.dist-info/entry_points.txt > /dev/null  # torch.compile(backend="ember")
cd tests && EMBER_TEST_DEVICE=cuda PYTHONUNBUFFERED=1 python3 -m pytest -q -p no:cacheprovider "$@" 2>&1 | tee "$out/gpu-tests.log" | tail -40
