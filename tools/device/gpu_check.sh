#!/usr/bin/env bash
# The GPU backend's checks on the lent H200, in priority order, each under its own time limit, so that one
# 10-minute device call returns as much as it can: build, the smoke workloads (eager / Ember / Inductor),
# the CUDA runtime and Triton tests, the parity corpus through generated Triton kernels, the experiments,
# then the models. Logs go to $OUT (default /tmp). Usage: tools/device/gpu_check.sh [extra test paths...]
set -uo pipefail
source "$(dirname "$0")/gpu_common.sh"
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
