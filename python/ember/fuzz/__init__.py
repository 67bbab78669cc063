"""Ember's differential fuzzer: random programs run eagerly and through Ember, compared under the
fp64-reference rule, failures shrunk to short programs (docs/fuzzing.md; `python -m ember.fuzz`)."""
