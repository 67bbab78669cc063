#!/usr/bin/env bash
# Training graphs on the lent H200 (issue 13), each step under its own time limit so that one device call
# returns as much as it can: build, the training tests on CUDA, the parity corpus's grad-enabled `ember`
# variant on CUDA (training graphs through Triton kernels), the train bench on CUDA. Logs go to $OUT.
# (gpu_check.sh runs the GPU backend's own checks.)
set -uo pipefail
source "$(dirname "$0")/gpu_common.sh"
cd tests
export EMBER_TEST_DEVICE=cuda
step training 90 python3 -m pytest -q -p no:cacheprovider training "$@"
grep -E "^(FAILED|ERROR)|Error" "$out/training.log" | head -20
step parity_train 150 python3 -m pytest -q -p no:cacheprovider parity -k "ember]"
grep -E "^FAILED" "$out/parity_train.log" | head -20
cd ..
step bench_train 150 python3 -m ember.bench train --device cuda --repeat 5 --warmup 2 --out "$out/train.json"
tail -12 "$out/bench_train.log"
cd tests
step autotune 30 python3 -m pytest -q -p no:cacheprovider runtime_cuda/test_autotune.py
step split_and_graphs 60 python3 -m pytest -q -p no:cacheprovider codegen_triton/test_split_gpu.py cuda_graphs runtime_cuda
