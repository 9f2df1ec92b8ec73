"""``report``: plots and a Markdown summary of a run (a second --run overlays it, more set beside)."""

from __future__ import annotations

import argparse
from pathlib import Path

from negtrain.commands.view import command_for


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run", type=Path, action="append", required=True,
                   help="a run directory, or the parent directory of `fit --seeds` (mean and std across seeds); "
                   "give --run again to overlay a second run, or more (side by side: evaluations, TINAD's Figure 2)")


def run(args: argparse.Namespace, extra: list[str]) -> int:
    from negtrain.core.errors import NegtrainError
    from negtrain.runs.report import report

    if extra:
        raise NegtrainError(f"unexpected arguments: {' '.join(extra)}")
    out = report(*args.run)
    print(f"report written to {out}: {', '.join(sorted(p.name for p in out.iterdir()))}")
    from negtrain.runs.seeds import is_seed_group

    if not is_seed_group(args.run[0]):  # a seed group's parent holds runs, not one evaluation
        print(f"browse every example: {command_for(*args.run)}")
    return 0
