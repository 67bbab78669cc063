#!/usr/bin/env bash
# Training graphs on the lent H200 (issue 13), each step under its own time limit so that one device call
# returns as much as it can: build, the training tests on CUDA, the parity corpus's grad-enabled `ember`
# variant on CUDA (training graphs through Triton kernels), the train bench on CUDA, then the GPU checks of
# issue 12 that share the build (runtime and Triton tests, parity ember-no-grad). Logs go to $OUT.
set -uo pipefail
out=${OUT:-/tmp}
step() {  # step NAME SECONDS COMMAND...
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
step runtime 75 python3 -m pytest -q -p no:cacheprovider runtime_cuda codegen_triton cuda_graphs
step parity 90 python3 -m pytest -q -p no:cacheprovider parity -k "ember-no-grad"
grep -E "^FAILED" "$out/parity.log" | head -10
