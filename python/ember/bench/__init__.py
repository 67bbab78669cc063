"""Ember's benchmark harness: `python -m ember.bench <suite>`.

One module per suite, each with add_arguments(parser) and run(args) -> exit status; timing.py is the one
timing helper (warm-up, repeats, medians, noise), compilers.py the compilers compared, options.py the
command-line options the cpu and models suites share, report.py the machine description and result files.
Benchmarks are not tests: nothing here asserts a speed.
"""
