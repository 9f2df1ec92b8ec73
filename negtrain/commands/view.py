"""``view``: a static results browser of runs, report cards and protocol outputs (docs/viewer.md)."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from negtrain.commands import check_bootstrap


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", type=Path, nargs="+", metavar="PATH",
                   help="a run directory, a report card or a protocol output; two or more: A vs B pages for their shared benchmarks")
    p.add_argument("--out", type=Path, help="the site's folder (default: PATH/view, or PATH/view-vs-<PATH2> for several)")
    p.add_argument("--serve", type=int, metavar="PORT", help="then serve the site on http://127.0.0.1:PORT/ until Ctrl-C (0: any free port)")
    p.add_argument("--bootstrap", type=int, default=1000, metavar="N", help="paired bootstrap resamples of A vs B (0: none; default 1000)")
    p.add_argument("--bootstrap-seed", type=int, default=0, metavar="SEED", help="seed of the bootstrap draws (default 0)")
    p.add_argument("--adjust", choices=("holm", "bh"), default="holm",
                   help="adjustment of A vs B's p-values over each pair's table: holm (default) or bh (Benjamini-Hochberg)")


def command_for(*paths: Path) -> str:
    """The command that opens these results in the viewer, printed at the end of ``report`` and
    ``evaluate --model``."""
    return "negtrain view " + " ".join(shlex.quote(str(p)) for p in paths)


def run(args: argparse.Namespace, extra: list[str]) -> int:
    from negtrain.core.errors import NegtrainError, Stopped

    if extra:
        raise NegtrainError(f"unexpected arguments: {' '.join(extra)}")
    check_bootstrap(args)
    if args.serve is not None and not 0 <= args.serve <= 65535:
        raise NegtrainError(f"--serve must be a port between 0 and 65535, got {args.serve}")
    from negtrain.view.site import default_out, serve, site_bytes, write_site

    out = args.out or default_out(args.paths)
    index = write_site(args.paths, out, args.bootstrap, args.bootstrap_seed, args.adjust)
    for warning in index["warnings"]:
        print(f"warning: {warning}")
    sets = sum(len(s["sets"]) for s in index["sources"])
    print(f"site written to {out}: {sets} eval set(s) of {len(index['sources'])} evaluation(s), "
          f"{len(index['pairs'])} A-vs-B pair(s), {site_bytes(out) / 1e6:.1f} MB; open {(out / 'index.html').resolve().as_uri()}")
    if args.serve is not None:
        try:
            serve(out, args.serve)
        except Stopped:
            print("stopped serving")
    return 0
