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


def check_report(folder, suite, markdown, printed, workload):
    """What a suite run with WrongCompiler wrote: its markdown's title and the wrong output listed as a failure
    on `workload`, and the chart beside the JSON (or, without matplotlib, the note that it was skipped)."""
    assert markdown.startswith(f"# Ember benchmark: {suite}") and f"| {workload} |" in markdown
    assert (f"- {workload} / wrong: wrong output: differs from eager's and its error (0.5) is more than 2x eager's"
            in markdown)
    if has_matplotlib():
        assert (folder / f"{suite}.png").stat().st_size > 0
    else:
        assert "chart skipped: matplotlib is not installed" in printed
