"""Command-line options shared by the suites that time compilers side by side (cpu, models).

Each suite keeps its own full-run sampling defaults (its workloads differ in length and noise); --quick
picks the same small ones everywhere, and a value given on the command line wins over both. Only the
shared options are added here, one call per group, so that each suite still orders its own options
around them as its --help shows.
"""
from .compilers import COMPILERS

QUICK_SAMPLING = {"repeat": 3, "warmup": 1, "min_sample_ms": 0.5}


def add_sampling_arguments(parser, full):
    """--repeat, --warmup and --min-sample-ms; `full` holds the suite's defaults without --quick."""
    quick = QUICK_SAMPLING
    parser.add_argument("--repeat", type=int, default=None,
                        help=f"timed samples per callable (default {full['repeat']}; {quick['repeat']} with --quick)")
    parser.add_argument("--warmup", type=int, default=None,
                        help=f"calls before timing (default {full['warmup']}; {quick['warmup']} with --quick)")
    parser.add_argument("--min-sample-ms", type=float, default=None,
                        help=f"each sample times enough calls to last this long (default {full['min_sample_ms']:g} ms; "
                             f"{quick['min_sample_ms']:g} with --quick)")


def sampling_config(args, full):
    """{"repeat", "warmup", "min_sample_ms"}: the given value, else the --quick or the full default."""
    picked = {}
    for key in QUICK_SAMPLING:
        given = getattr(args, key)
        picked[key] = given if given is not None else (QUICK_SAMPLING if args.quick else full)[key]
    if picked["repeat"] < 1 or picked["warmup"] < 0 or picked["min_sample_ms"] <= 0:
        raise ValueError("--repeat must be >= 1, --warmup >= 0, --min-sample-ms > 0")
    return picked


def add_no_inductor_argument(parser):
    parser.add_argument("--no-inductor", action="store_true", help="leave torch.compile out")


def compilers(args):
    """Ember, then Inductor unless --no-inductor."""
    return [COMPILERS["ember"]] + ([] if args.no_inductor else [COMPILERS["inductor"]])
