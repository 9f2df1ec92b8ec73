"""``env``: this machine's provenance (what a run here would record), or a run's versions as pip
constraints."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--constraints", type=Path, metavar="RUN_OR_CARD",
                   help="write the package versions recorded by a run, report card or export (its provenance.json) "
                   "as a pip constraints file, one NAME==VERSION per line")
    p.add_argument("--out", type=Path, help="with --constraints: the file to write (default: print it)")


def run(args: argparse.Namespace, extra: list[str]) -> int:
    from negtrain.core.errors import NegtrainError

    if extra:
        raise NegtrainError(f"unexpected arguments: {' '.join(extra)}")
    if args.constraints is None:
        if args.out is not None:
            raise NegtrainError("--out goes with --constraints RUN_OR_CARD")
        from negtrain.models.provenance import environment

        print(json.dumps(environment(), indent=1))
        return 0
    from negtrain.io.atomic import write_text
    from negtrain.models.constraints_file import constraints
    from negtrain.models.provenance import FILE_NAME, read

    source = args.constraints
    if args.out is not None:
        from negtrain.core.paths import check_output_file

        check_output_file(args.out, "--out")
    if not source.exists():
        raise NegtrainError(f"--constraints {source}: no such run, card or file")
    record = read(source)
    if record is None:
        raise NegtrainError(f"--constraints {source}: holds no {FILE_NAME} (a run from a negtrain that did not record provenance)")
    text = constraints(record, str(source))
    if args.out is None:
        print(text, end="")
    else:
        write_text(args.out, text)
        count = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
        print(f"{count} package versions written to {args.out}; reinstall with: pip install -c {args.out} negtrain")
    return 0
