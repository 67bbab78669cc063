#!/usr/bin/env python3
"""Regenerates the expectations of golden IR tests after an intended change.

    .venv/bin/python tests/golden/update.py            # every tests/golden/*.ir and *.loop
    .venv/bin/python tests/golden/update.py FILE...    # just these

Runs each file's RUN line and rewrites its CHECK lines (from standard output) or, when ember-opt
fails, its ERROR lines (each line of standard error, without the file's path). Review the diff
before committing: this script records whatever the tool does now.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import golden  # noqa: E402


def update(path):
    args, _, _ = golden.load(path)
    result = golden.run(path, args)
    if result.returncode == 0:
        new = [f"{golden.CHECK} {line}".rstrip() for line in result.stdout.splitlines()]
    else:
        prefix = f"{path}:"
        new = []
        for line in result.stderr.splitlines():
            if line.startswith(prefix):
                line = line[len(prefix):].lstrip()
            new.append(f"{golden.ERROR} {line}")
    kept = [line for line in Path(path).read_text().splitlines()
            if not line.startswith((golden.CHECK, golden.ERROR))]
    while kept and not kept[-1].strip():
        kept.pop()
    Path(path).write_text("\n".join(kept + [""] + new) + "\n")
    return result.returncode


def main(argv):
    paths = [Path(a).resolve() for a in argv] or golden.golden_files()
    for path in paths:
        rc = update(path)
        print(f"{'updated' if rc == 0 else 'updated (error expected)'}: {path.relative_to(golden.REPO)}")


if __name__ == "__main__":
    main(sys.argv[1:])
