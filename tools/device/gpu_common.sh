# Sourced by the device scripts (gpu_check.sh, gpu_training.sh): `step`, and the build of the extension
# for the GPU machine's Python, after which the tree's python/ is importable. Logs go to $out. The build
# directory is build/py311, as gpu_run.sh's: the tests look for ember-opt there.
out=${OUT:-/tmp}
step() {  # step NAME SECONDS COMMAND...: runs COMMAND with a limit, its output to $out/NAME.log, a summary line here
  local name=$1 limit=$2; shift 2
  local start=$SECONDS
  timeout "$limit" "$@" > "$out/$name.log" 2>&1
  local rc=$?
  echo "== $name: rc=$rc in $((SECONDS - start))s: $(grep -E 'passed|failed|error' "$out/$name.log" | tail -1)"
}
python3 -c "import sys, torch, triton; print(sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name(0))"
cmake -S . -B build/py311 -G Ninja -DPython_EXECUTABLE="$(command -v python3)" \
  -Dnanobind_DIR="$(python3 -m nanobind --cmake_dir)" > "$out/build.log" 2>&1 &&
  ninja -C build/py311 -j "$(nproc)" >> "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
cp build/py311/_C*.so python/ember/
make --no-print-directory python/ember-0.1.0.dist-info/entry_points.txt > /dev/null
export PYTHONPATH=$PWD/python EMBER_CACHE_DIR=$out/ember-cache PYTHONUNBUFFERED=1
