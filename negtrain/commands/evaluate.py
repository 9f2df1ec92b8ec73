"""``evaluate``: score a predictions file from any system on a benchmark split, or list benchmarks."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from negtrain.errors import NegtrainError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--benchmark", help="a registered benchmark (see --list)")
    p.add_argument("--split", help="one of the benchmark's splits")
    p.add_argument("--predictions", type=Path, help='JSONL, one {"id": ..., "prediction": "<label>"} per line')
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument("--allow-missing", action="store_true", help="score only the predicted examples (the output says so)")
    p.add_argument("--list", action="store_true", help="list the benchmarks, their splits, labels and metric names")


def run(args: argparse.Namespace, extra: list[str]) -> int:
    if extra:
        raise NegtrainError(f"unexpected arguments: {' '.join(extra)}")
    if args.list:
        print(json.dumps(listing(), indent=1) if args.json else format_listing())
        return 0
    absent = [f"--{n}" for n in ("benchmark", "split", "predictions") if getattr(args, n) is None]
    if absent:
        raise NegtrainError(f"evaluate needs {', '.join(absent)} (or --list)")
    from negtrain.evaluation import format_scored, score_file

    scored = score_file(args.benchmark, args.split, args.predictions, allow_missing=args.allow_missing)
    print(json.dumps(scored.as_json()) if args.json else format_scored(scored))
    return 0


def listing() -> list[dict]:
    from negtrain.benchmarks.registry import BENCHMARKS

    out = []
    for name, cls in BENCHMARKS.items():
        spaces = cls.prediction_spaces or (tuple(cls.labels),)
        out.append(
            {
                "benchmark": name,
                "splits": list(cls.splits),
                "labels": list(cls.labels),
                "prediction_labels": [list(s) for s in spaces],
                "metrics": [d.name for d in cls.reported_metrics],
                "lower_is_better": [d.name for d in cls.reported_metrics if not d.higher_is_better],
                "counts": [d.name for d in cls.reported_metrics if d.kind == "count"],
                **({"families": list(cls.scoring_families)} if cls.scoring_families else {}),
            }
        )
    return out


def format_listing() -> str:
    lines = []
    for b in listing():
        lines.append(f"{b['benchmark']}")
        lines.append(f"  splits:  {', '.join(b['splits'])}")
        lines.append(f"  labels:  {', '.join(b['labels']) or '(open vocabulary: predictions are token strings)'}")
        if len(b["prediction_labels"]) > 1:
            lines.append("  also scores: " + "; ".join(", ".join(s) for s in b["prediction_labels"][1:]) + " predictions")
        lines.append(f"  metrics: {', '.join(b['metrics']) or '(see the benchmark module)'}")
        if b["lower_is_better"]:
            lines.append(f"  lower is better: {', '.join(b['lower_is_better'])}")
        if b.get("families"):
            lines.append(f"  scored by: {', '.join(b['families'])}")
    return "\n".join(lines)
