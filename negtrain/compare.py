"""``negtrain compare A B``: is B better than A on the same benchmark splits, beyond sampling noise?

A and B are each a run directory (its ``predictions/`` of an epoch), a report card or an
evaluation directory (``predictions/<benchmark>-<split>-validate.jsonl``), or one predictions file
(with ``--benchmark`` and ``--split``). Every benchmark split both sides predicted is scored with
the benchmark's own metric, and per metric the comparison gives:

- ``diff``: B − A;
- ``ci95``: the 95% percentile interval of B − A under a *paired* cluster bootstrap: each resample
  draws the benchmark's independent units (contrast sets, premises, ...) with replacement and
  scores A and B on the same draw, so the comparison is not diluted by the split's own sampling
  noise that A and B share;
- ``share_b_le_a``: the share of resamples in which B's value is at most A's (for a
  lower-is-better metric, the share in which B is at least as good as A).

See :mod:`negtrain.metrics.uncertainty` for the bootstrap.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from negtrain.benchmarks.registry import get_benchmark
from negtrain.errors import NegtrainError
from negtrain.evaluation import scored_metric
from negtrain.metrics.base import MISSING
from negtrain.metrics.uncertainty import paired
from negtrain.training import provenance

#: ``<benchmark>-<split>-<epochN|validate|test>.jsonl``; benchmark names may hold '-', splits do not.
PREDICTIONS_FILE = re.compile(r"^(?P<benchmark>.+)-(?P<split>[^-]+)-(?P<stage>epoch(?P<epoch>\d+)|validate|test)\.jsonl$")


@dataclass(frozen=True)
class Side:
    label: str  # what the user passed
    files: dict[str, Path]  # "<benchmark>/<split>" -> predictions file


def _epoch_of_best(run: Path) -> int:
    found = sorted((run / "checkpoints").glob("best-epoch*.ckpt"), key=lambda p: p.stat().st_mtime)
    match = re.search(r"best-epoch(\d+)", found[-1].name) if found else None
    if match is None:
        raise NegtrainError(f"{run}: --epoch best needs checkpoints/best-epoch<N>.ckpt")
    return int(match.group(1))


def resolve_side(arg: Path, benchmark: str | None, split: str | None, epoch: str) -> Side:
    """The predictions files one side of the comparison stands for."""
    if arg.is_file():
        if benchmark is None or split is None:
            raise NegtrainError(f"{arg}: a predictions file needs --benchmark and --split")
        return Side(str(arg), {f"{benchmark}/{split}": arg})
    folder = arg / "predictions"
    if not folder.is_dir():
        raise NegtrainError(f"{arg}: neither a predictions file nor a run directory or report card (no predictions/)")
    by_set: dict[str, dict[str, Path]] = {}
    for path in sorted(folder.glob("*.jsonl")):
        match = PREDICTIONS_FILE.match(path.name)
        if match:
            # epoch01 and epoch1 are the same epoch (a file renamed by hand, or another writer's spelling).
            stage = f"epoch{int(match['epoch'])}" if match["epoch"] is not None else match["stage"]
            stages = by_set.setdefault(f"{match['benchmark']}/{match['split']}", {})
            if stage in stages:
                raise NegtrainError(f"{folder}: {stages[stage].name} and {path.name} are both {stage}; move one aside")
            stages[stage] = path
    has_epochs = any(s.startswith("epoch") for stages in by_set.values() for s in stages)
    # --epoch picks among a run's epochs; a report card or a validate/test run has one evaluation.
    wanted = None if epoch == "last" or not has_epochs else _epoch_of_best(arg) if epoch == "best" else int(epoch)
    files = {}
    for name, stages in by_set.items():
        if benchmark is not None and name.split("/")[0] != benchmark or split is not None and name.split("/")[1] != split:
            continue
        epochs = sorted(int(s[5:]) for s in stages if s.startswith("epoch"))
        if wanted is not None:
            if f"epoch{wanted}" in stages:
                files[name] = stages[f"epoch{wanted}"]
        elif epochs:
            files[name] = stages[f"epoch{epochs[-1]}"]
        else:  # test predictions are the held-out score of a run; else the validate (report card) ones
            files[name] = stages.get("test") or stages["validate"]
    if not files:
        which = f" for epoch {wanted}" if wanted is not None else ""
        raise NegtrainError(f"{folder}: no predictions files{which}" + (f" for {benchmark}" if benchmark else ""))
    return Side(str(arg), files)


def compare(a: Path, b: Path, benchmark: str | None = None, split: str | None = None, epoch: str = "last",
            resamples: int = 1000, seed: int = 0, allow_missing: bool = False) -> dict[str, Any]:
    """The comparison as JSON-ready data (see the module docstring)."""
    if epoch not in ("last", "best") and not epoch.isdigit():
        raise NegtrainError(f"--epoch must be 'last', 'best' or an epoch number, got '{epoch}'")
    side_a, side_b = resolve_side(a, benchmark, split, epoch), resolve_side(b, benchmark, split, epoch)
    common = [name for name in side_a.files if name in side_b.files]
    if not common:
        raise NegtrainError(f"A ({', '.join(side_a.files)}) and B ({', '.join(side_b.files)}) share no benchmark split")
    evals = []
    for name in common:
        bench, split_name = name.split("/")
        scored_a, metric_a = scored_metric(bench, split_name, side_a.files[name], allow_missing)
        scored_b, metric_b = scored_metric(bench, split_name, side_b.files[name], allow_missing)
        if not metric_a.supports_uncertainty:
            raise NegtrainError(f"{name}: {type(metric_a).__name__} cannot be bootstrapped (it defines no unit_table)")
        declared = get_benchmark(bench)
        diffs = paired(metric_a, metric_a.last_outcomes, metric_b, metric_b.last_outcomes, resamples, seed, declared.is_count)
        table = metric_a.unit_table(metric_a.last_outcomes)
        notes = set(scored_a.notes) | set(scored_b.notes)
        if (metric_a.last_predictions is not None and metric_b.last_predictions is not None
                and not ((metric_a.last_predictions == MISSING) == (metric_b.last_predictions == MISSING)).all()):
            notes.add("A and B predicted different examples: each side is scored on its own subset")
        evals.append({
            "benchmark": bench,
            "split": split_name,
            "a_predictions": str(side_a.files[name]),
            "b_predictions": str(side_b.files[name]),
            "unit": table.unit,
            "units": table.units,
            "notes": sorted(notes),
            "metrics": {
                k: {
                    "a": _num(d.a), "b": _num(d.b), "diff": _num(d.diff), "ci95": d.ci95,
                    "share_b_le_a": d.share_b_le_a, "higher_is_better": declared.is_higher_better(k),
                }
                for k, d in diffs.items()
            },
        })
    only = sorted((set(side_a.files) ^ set(side_b.files)))
    return {"a": side_a.label, "b": side_b.label, "bootstrap": {"resamples": resamples, "seed": seed},
            "evals": evals, "not_in_both": only, "warnings": setup_differences(a, b)}


def _provenance_of(arg: Path) -> dict[str, Any] | None:
    """The provenance of a run, card or evaluation directory, or of the one a predictions file
    sits in (``<dir>/predictions/<file>``); None where there is none."""
    return provenance.read(arg if arg.is_dir() else arg.parent.parent)


def setup_differences(a: Path, b: Path) -> list[str]:
    """Where A and B were produced differently in a way that moves numbers: a data file with other
    bytes, another major version of a package (:func:`negtrain.training.provenance.differences`).
    Sides with no provenance at all (bare predictions files) are not compared."""
    return provenance.differences(_provenance_of(a), _provenance_of(b))


def _num(x: float) -> float | None:
    return float(x) + 0.0 if math.isfinite(x) else None  # + 0.0: no -0.0


def _f(x: float | None, signed: bool = False) -> str:
    if x is None:
        return "-"
    return f"{x:+.4f}" if signed else f"{x:.4f}"


def comparison_markdown(result: dict[str, Any]) -> str:
    boot = result["bootstrap"]
    lines = [
        "# Paired comparison: B − A",
        "",
        f"- A: `{result['a']}`",
        f"- B: `{result['b']}`",
        "",
        (f"95% CI of B − A: paired percentile bootstrap, {boot['resamples']} resamples (seed {boot['seed']}) of each "
         "benchmark's independent units, the same units drawn for A and B. 'share B ≤ A': the share of resamples "
         "in which B's value is at most A's." if boot["resamples"] else "No bootstrap (--bootstrap 0): differences only."),
    ]
    if result.get("warnings"):
        lines += ["", "**A and B were not produced alike:**", "", *[f"- warning: {w}" for w in result["warnings"]]]
    for ev in result["evals"]:
        lines += ["", f"## {ev['benchmark']}/{ev['split']} ({ev['units']} {ev['unit']}s)", "",
                  "| metric | A | B | B − A | 95% CI of B − A | share B ≤ A | better |", "|---|---|---|---|---|---|---|"]
        for k, m in ev["metrics"].items():
            ci = f"[{m['ci95'][0]:+.4f}, {m['ci95'][1]:+.4f}]" if m["ci95"] and m["ci95"][0] is not None else "-"
            share = _f(m["share_b_le_a"])
            lines.append(f"| {k} | {_f(m['a'])} | {_f(m['b'])} | {_f(m['diff'], True)} | {ci} | {share} | "
                         f"{'higher' if m['higher_is_better'] else 'lower'} |")
        lines += ["", *[f"note: {n}" for n in ev["notes"]]] if ev["notes"] else []
    if result["not_in_both"]:
        lines += ["", f"Not compared (predicted by one side only): {', '.join(result['not_in_both'])}."]
    return "\n".join(lines) + "\n"
