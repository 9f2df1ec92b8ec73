"""``compare``: paired bootstrap comparison of two runs, report cards or predictions files."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from negtrain.commands import check_bootstrap


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("a", type=Path, help="A: a run directory, a report card, or a predictions file")
    p.add_argument("b", type=Path, help="B: the same kind; the comparison reports B - A")
    p.add_argument("--benchmark", help="compare this benchmark only (required for predictions files)")
    p.add_argument("--split", help="compare this split only (required for predictions files)")
    p.add_argument("--epoch", default="last",
                   help="which epoch's predictions of a run directory: last (default), best (the best checkpoint's), or N")
    p.add_argument("--bootstrap", type=int, default=1000, metavar="N", help="paired bootstrap resamples (0: none; default 1000; at most 100000)")
    p.add_argument("--bootstrap-seed", type=int, default=0, metavar="SEED", help="seed of the bootstrap draws (default 0)")
    p.add_argument("--allow-missing", action="store_true",
                   help="score predictions files that cover only part of a split (e.g. a run with limit_val_batches)")
    p.add_argument("--adjust", choices=("holm", "bh"), default="holm",
                   help="multiple-comparison adjustment of the p-values over the whole table: holm (Holm-Bonferroni, "
                   "the default) or bh (Benjamini-Hochberg)")
    p.add_argument("--json", action="store_true", help="print JSON instead of Markdown")
    p.add_argument("--out", type=Path, help="also write the comparison to OUT.md and OUT.json")


def run(args: argparse.Namespace, extra: list[str]) -> int:
    from negtrain.core.errors import NegtrainError

    if extra:
        raise NegtrainError(f"unexpected arguments: {' '.join(extra)}")
    check_bootstrap(args)
    if args.out is not None:  # before the work: an unwritable --out fails in a second, not after it
        from negtrain.core.paths import check_output_file

        for suffix in (".md", ".json"):
            check_output_file(args.out.with_suffix(suffix), "--out")
    from negtrain.evaluation.compare import compare, comparison_markdown
    from negtrain.io.atomic import write_text

    result = compare(args.a, args.b, args.benchmark, args.split, args.epoch, args.bootstrap, args.bootstrap_seed,
                     args.allow_missing, args.adjust)
    for warning in result["warnings"]:  # on stderr too, so --json output shows them as well
        print(f"warning: {warning}", file=sys.stderr)
    markdown = comparison_markdown(result)
    if args.out is not None:
        write_text(args.out.with_suffix(".md"), markdown)
        write_text(args.out.with_suffix(".json"), json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1) if args.json else markdown, end="" if not args.json else "\n")
    return 0
