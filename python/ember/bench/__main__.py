"""Entry point: `python -m ember.bench <suite> [options]`; `--help` lists the suites.

A suite that depends on a stage not built yet is listed with the reason and exits with status 2, so that
scripts can tell "not measurable yet" from "measured" (0) and "a compiler failed" (1).
"""
import argparse
import sys

from . import cpu, dynamic, gpu, models, overhead, train, zoo

SUITES = {
    "overhead": overhead,
    "cpu": cpu,
    "models": models,
    "gpu": gpu,
    "train": train,
    "zoo": zoo,
    "dynamic": dynamic,
}

NOT_YET = {}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m ember.bench",
                                     description="Ember benchmarks: eager, Ember and torch.compile side by side.")
    sub = parser.add_subparsers(dest="suite", required=True, metavar="SUITE")
    for name, module in SUITES.items():
        doc = module.__doc__ or ""
        p = sub.add_parser(name, help=doc.splitlines()[0] if doc else name, description=doc,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(p)
    for name, reason in NOT_YET.items():
        sub.add_parser(name, help=f"not implemented yet: {reason}")
    args = parser.parse_args(argv)
    if args.suite in NOT_YET:
        print(f"not implemented yet: {NOT_YET[args.suite]}")
        return 2
    return SUITES[args.suite].run(args)


if __name__ == "__main__":
    sys.exit(main())
