#!/usr/bin/env bash
# The GPU backend's checks on the lent H200, in priority order, each under its own time limit, so that one
# 10-minute device call returns as much as it can: build, the smoke workloads (eager / Ember / Inductor),
# the CUDA runtime and Triton tests, the parity corpus through generated Triton kernels, the experiments,
# then the models. Logs go to $OUT (default /tmp). Usage: tools/device/gpu_check.sh [extra test paths...]
set -uo pipefail
out=${OUT:-/tmp}
step() {  # step NAME SECONDS COMMAND...: runs COMMAND with a limit, its output to $out/NAME.log, a summary line here
  local name=$1 limit=$2; shift 2
  local start=$SECONDS
  timeout "$limit" "$@" > "$out/$name.log" 2>&1
  local rc=$?
  echo "== $name: rc=$rc in $((SECONDS - start))s: $(grep -E 'passed|failed|error' "$out/$name.log" | tail -1)"
}
python3 -c "import sys, torch, triton; print(sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name(0))"
cmake -S . -B build/gpu -G Ninja -DPython_EXECUTABLE="$(command -v python3)" \
  -Dnanobind_DIR="$(python3 -m nanobind --cmake_dir)" > "$out/build.log" 2>&1 &&
  ninja -C build/gpu -j "$(nproc)" >> "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
cp build/gpu/_C*.so python/ember/
make --no-print-directory python/ember-0.1.0.dist-info/entry_points.txt > /dev/null
export PYTHONPATH=$PWD/python EMBER_CACHE_DIR=$out/ember-cache PYTHONUNBUFFERED=1
step smoke 60 python3 tools/device/triton_smoke.py
cat "$out/smoke.log"
cd tests
export EMBER_TEST_DEVICE=cuda
step runtime 75 python3 -m pytest -q -p no:cacheprovider runtime_cuda codegen_triton "$@"
step parity 90 python3 -m pytest -q -p no:cacheprovider parity -k "ember-no-grad"
cd ..
step experiments 40 python3 tools/device/triton_smoke.py --experiments
cat "$out/experiments.log"
step bench 60 python3 -m ember.bench gpu --modes default --no-compile-times --out "$out/bench/gpu.json" \
  --workloads "${EMBER_GPU_BENCH_WORKLOADS:-seed_bf16,softmax,layer_norm,rms_norm,mlp,gpt2}"
tail -45 "$out/bench.log"
cd tests
step models 60 python3 -m pytest -q -p no:cacheprovider models api bench/test_gpu_suite.py
