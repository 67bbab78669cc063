"""Ember's benchmark harness: `python -m ember.bench <suite>`.

One module per suite, each with add_arguments(parser) and run(args) -> exit status; timing.py is the one
timing helper (warm-up, repeats, medians, noise; cuda_measure.py times by CUDA events on top of it),
compilers.py the compilers compared (in ember.compile's and torch.compile's modes), options.py the
command-line options the cpu, gpu and models suites share, compare.py what the cpu and gpu suites share
(output checks, targets, tables), fresh.py the fresh processes that measure compile times, report.py the
machine description and result files.
Benchmarks are not tests: nothing here asserts a speed.
zoo.py is the model zoo (zoo_models.py and zoo_transformers.py its catalogue, zoo_report.py its report).
Importing the package makes torchvision importable on a CPU torch (zoo_imports.py): transformers imports it
when it is installed, so every suite that builds a transformers model needs that first.
"""
from .zoo_imports import allow_torchvision

allow_torchvision()
