#!/usr/bin/env bash
# Dynamic shapes on the lent H200 (issue 14), each step under its own time limit so that one device call
# returns as much as it can: build, tests/dynamic with CUDA tensors (the host's Python 3.12 and
# transformers), then `bench dynamic` on the host's CPU (Ember only: dynamic vs static graphs on a quiet
# machine) and on the GPU (Ember and Inductor). Logs and JSON go to $OUT. Usage: gpu_dynamic.sh [test paths...]
set -uo pipefail
source "$(dirname "$0")/gpu_common.sh"
cd tests
export EMBER_TEST_DEVICE=cuda
step dynamic 200 python3 -m pytest -q -p no:cacheprovider dynamic "$@"
grep -E "^(FAILED|ERROR)" "$out/dynamic.log" | head -20
cd ..
step bench_dynamic_cpu 100 env CUDA_VISIBLE_DEVICES= python3 -m ember.bench dynamic --no-inductor --out "$out/dynamic_cpu.json"
tail -16 "$out/bench_dynamic_cpu.log"
step bench_dynamic_cuda 180 python3 -m ember.bench dynamic --device cuda --out "$out/dynamic_cuda.json"
tail -16 "$out/bench_dynamic_cuda.log"
rm -rf "$out/ember-cache"
