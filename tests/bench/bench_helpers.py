"""What the suites' tests share: a compiler that is wrong on purpose, which a suite's error columns must catch."""
OFFSET = 0.5


class WrongCompiler:
    """Adds OFFSET to every output (shaped like ember.bench.compilers.Compiler, for run()'s extra_compilers)."""
    name = "wrong"
    label = "adds 0.5 to the output"

    def reset(self):
        pass

    def compile(self, fn):
        return lambda *args: fn(*args) + OFFSET

    def counters(self):
        return {"graphs": 1}


def suite_args(suite, *argv):
    """The argparse.Namespace that `python -m ember.bench <suite> argv...` would hand to suite.run."""
    import argparse
    parser = argparse.ArgumentParser()
    suite.add_arguments(parser)
    return parser.parse_args(list(argv))


def has_matplotlib():
    try:
        import matplotlib  # noqa: F401
    except ModuleNotFoundError:
        return False
    return True
