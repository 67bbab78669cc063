# Ember: every set-up step lives here, so a fresh machine needs only `make test` or `make demo`.
# The development build is a plain CMake/Ninja build per CPython version (incremental in seconds);
# `pip install .` builds the same CMakeLists through scikit-build-core.

SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
# CPython 3.12 and 3.13 run the bytecode tests: a pyenv install first (a pyenv shim on PATH exists
# but fails when that version is not the active one), else whatever PATH offers.
PY312 ?= $(or $(lastword $(wildcard $(HOME)/.pyenv/versions/3.12*/bin/python3.12)),$(shell command -v python3.12))
PY313 ?= $(or $(lastword $(wildcard $(HOME)/.pyenv/versions/3.13*/bin/python3.13)),$(shell command -v python3.13))
JOBS ?= $(shell nproc)
PYTEST_ARGS ?=

.PHONY: all build build-all test test-bytecode demo bench clean

all: build

$(VENV)/.ready:
	python3.11 -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0 nanobind scikit-build-core cmake ninja pytest "numpy<2.4"
	# The GPU backend's compiler (the H200's version); its interpreter, which the tests run generated
	# kernels through on the CPU, needs numpy < 2.4 (docs/codegen-triton.md).
	$(PY) -m pip install -q triton==3.6.0
	$(PY) -m pip install -q transformers==5.24.0
	# The model zoo's libraries (python -m ember.bench zoo, tests/zoo). torchvision's wheel is built against CUDA
	# torch: it, and timm and diffusers (which would pull it), go in without dependencies, theirs listed first.
	$(PY) -m pip install -q pillow==13.0.0 importlib_metadata requests
	$(PY) -m pip install -q --no-deps torchvision==0.28.0 timm==1.0.31 diffusers==0.42.1
	touch $@

# build/<tag>/ holds one CMake tree per interpreter; the extension is copied next to the package as a new
# file (--remove-destination), not over the one that running processes have mapped.
define build_for
	@mkdir -p build/$(1)
	@test -f build/$(1)/build.ninja || $(VENV)/bin/cmake -S . -B build/$(1) -G Ninja \
	    -DCMAKE_MAKE_PROGRAM=$(abspath $(VENV)/bin/ninja) \
	    -DPython_EXECUTABLE=$(2) \
	    -Dnanobind_DIR=$$($(PY) -m nanobind --cmake_dir) > /dev/null
	$(VENV)/bin/ninja -C build/$(1) -j $(JOBS) > build/$(1)/last-build.log || (cat build/$(1)/last-build.log; exit 1)
	cp --remove-destination build/$(1)/_C*.so python/ember/
endef

# A development tree imports ember from python/ (PYTHONPATH); this metadata beside it gives the
# entry point that `torch.compile(backend="ember")` looks up (pip install writes its own).
DEV_DIST_INFO := python/ember-0.1.0.dist-info

build: $(VENV)/.ready $(DEV_DIST_INFO)/entry_points.txt
	$(call build_for,py311,$(abspath $(PY)))
	@mkdir -p build/bin && cp build/py311/ember-opt build/bin/

$(DEV_DIST_INFO)/entry_points.txt: pyproject.toml
	@mkdir -p $(DEV_DIST_INFO)
	printf 'Metadata-Version: 2.1\nName: ember\nVersion: 0.1.0\n' > $(DEV_DIST_INFO)/METADATA
	printf '[torch_dynamo_backends]\nember = ember.fx_backend:ember_backend\n' > $@

build/venv%/.ready: $(VENV)/.ready
	$(PY$*) -m venv build/venv$*
	build/venv$*/bin/python -m pip install -q pytest
	touch $@

build-all: build build/venv312/.ready build/venv313/.ready
	$(call build_for,py312,$(abspath build/venv312/bin/python))
	$(call build_for,py313,$(abspath build/venv313/bin/python))

test-bytecode: build-all
	cd tests && ../build/venv312/bin/python -m pytest -q -p no:cacheprovider bytecode eval_frame $(PYTEST_ARGS)
	cd tests && ../build/venv313/bin/python -m pytest -q -p no:cacheprovider bytecode eval_frame $(PYTEST_ARGS)

# The layering check (tools/check_layering.py) runs first: a folder that includes one above it in
# the pipeline order, or a Python import cycle, fails the run before any test does.
# pytest lists its 30 slowest tests: CI runs this target and must stay under 30 minutes.
# The GPU backend's kernels also run on the CPU through Triton's interpreter, in a second process
# (TRITON_INTERPRET=1 must be set before triton is imported, and no other test may see it): the parity
# corpus's "ember-triton" variant and the Triton runtime's own tests. (Fuzz programs through it are not run
# here yet: the interpreter's own float32 -> bfloat16 conversion is off by an ulp -- docs/fuzzing.md.)
test: build-all
	$(PY) tools/check_layering.py
	cd tests && ../$(PY) -m pytest -q -p no:cacheprovider --durations=30 . $(PYTEST_ARGS)
	cd tests && TRITON_INTERPRET=1 ../$(PY) -m pytest -q -p no:cacheprovider parity/test_parity.py \
	    codegen_triton/test_interpret_compile.py -k "ember-triton or interpret_compile" $(PYTEST_ARGS)
	$(MAKE) --no-print-directory test-bytecode

demo: build
	PYTHONPATH=python $(PY) -m ember.demo

# The cpu suite draws its chart with matplotlib, which nothing else needs.
$(VENV)/.bench-ready: $(VENV)/.ready
	$(PY) -m pip install -q matplotlib
	touch $@

# Both suites run even when the first reports a failure; the target fails if either did.
bench: build $(VENV)/.bench-ready
	PYTHONPATH=python $(PY) -m ember.bench overhead; a=$$?; \
	PYTHONPATH=python $(PY) -m ember.bench cpu; b=$$?; \
	exit $$(( a || b ))

clean:
	rm -rf build python/ember/_C*.so $(DEV_DIST_INFO)
