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
  lower-is-better metric, the share in which B is at least as good as A);
- ``p``: a two-sided p of "A and B do not differ": for ``accuracy``, McNemar's exact test on the
  per-example correctness of the examples both predicted (``test: mcnemar``; the discordant counts
  are in the split's ``mcnemar``), for every other metric the paired bootstrap's
  (``test: bootstrap``);
- ``p_adjusted``: ``p`` adjusted over every comparison of the table (all splits, all metrics),
  Holm–Bonferroni by default or Benjamini–Hochberg (``adjust="bh"``).

See :mod:`negtrain.metrics.uncertainty` for the bootstrap and :mod:`negtrain.metrics.paired_tests`
for the exact test and the adjustments.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from negtrain.benchmarks.registry import get_benchmark
from negtrain.core.errors import NegtrainError
from negtrain.evaluation.predictions import scored_metric
from negtrain.metrics.base import MISSING
from negtrain.metrics.paired_tests import ADJUSTMENTS, adjusted, mcnemar_exact
from negtrain.metrics.uncertainty import UnitTable, paired
from negtrain.runs.seeds import SeedGroup, is_seed_group
from negtrain.models import provenance

#: ``<benchmark>-<split>-<epochN|validate|test>.jsonl``; benchmark names may hold '-', splits do not.
PREDICTIONS_FILE = re.compile(r"^(?P<benchmark>.+)-(?P<split>[^-]+)-(?P<stage>epoch(?P<epoch>\d+)|validate|test)\.jsonl$")


@dataclass(frozen=True)
class Side:
    label: str  # what the user passed
    files: dict[str, Path]  # "<benchmark>/<split>" -> predictions file
    has_epochs: bool = False  # a run directory's per-epoch predictions, which --epoch picks among


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
    return Side(str(arg), files, has_epochs)


def units_scored(table_a: UnitTable, table_b: UnitTable) -> int:
    """How many of the split's units (contrast sets, ...) hold an example both sides predicted: a
    limited card scores some of them, and a comparison rests on those, not on the split's count."""
    if table_a.codes is None or table_a.seen is None or table_b.seen is None:
        return table_a.units
    return int(len(np.unique(table_a.codes[table_a.seen & table_b.seen])))


def discordant(table_a: UnitTable, table_b: UnitTable) -> dict[str, int] | None:
    """McNemar's counts on the examples A and B both predicted: ``a_only`` right by A alone,
    ``b_only`` right by B alone, ``pairs`` predicted by both; None where the metric has no
    per-example right/wrong (F1-only or cloze benchmarks)."""
    if table_a.right is None or table_b.right is None or table_a.seen is None or table_b.seen is None:
        return None
    both = table_a.seen & table_b.seen
    return {"pairs": int(both.sum()), "a_only": int((both & table_a.right & ~table_b.right).sum()),
            "b_only": int((both & table_b.right & ~table_a.right).sum())}


def mcnemar_of(table_a: UnitTable, table_b: UnitTable) -> dict[str, Any] | None:
    """:func:`discordant` with its exact two-sided p."""
    counts = discordant(table_a, table_b)
    return None if counts is None else {**counts, "p": mcnemar_exact(counts["a_only"], counts["b_only"])}


def add_adjusted(evals: list[dict[str, Any]], method: str) -> None:
    """Each metric's ``p_adjusted``: ``method``'s adjustment over every p of the table. A metric
    that is the same data as another (``same_as``) is not a test of its own: it takes that one's."""
    rows = [m for ev in evals for m in ev["metrics"].values() if not m.get("same_as")]
    for row, value in zip(rows, adjusted([row["p"] for row in rows], method), strict=False):
        row["p_adjusted"] = value
    for ev in evals:
        for m in ev["metrics"].values():
            if m.get("same_as"):
                m["p_adjusted"] = ev["metrics"][m["same_as"]].get("p_adjusted")


def mark_same_data(bench_name: str, split: str, table_a: UnitTable, table_b: UnitTable, metrics: dict[str, dict[str, Any]]) -> None:
    """A breakdown ``<metric>/<subset>`` whose subset holds every example both sides predicted is
    ``<metric>`` itself, on the same data (a comparison of one ScoNe condition): marked
    ``same_as``, so it is neither tested nor adjusted for twice."""
    if table_a.seen is None or table_b.seen is None:
        return
    examples = get_benchmark(bench_name).load(split)
    seen = (table_a.seen & table_b.seen).nonzero()[0].tolist()
    subsets = {examples[i].subset for i in seen}
    if len(subsets) != 1 or None in subsets:
        return
    (only,) = subsets
    for name, row in metrics.items():
        base, _, subset = name.rpartition("/")
        if subset == only and base in metrics:
            row["same_as"] = base


def _compared(side_a: Side, side_b: Side, resamples: int, seed: int, allow_missing: bool) -> list[dict[str, Any]]:
    """Per benchmark split both sides predicted, the comparison of its metrics (no adjusted p yet)."""
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
        exact = mcnemar_of(table, metric_b.unit_table(metric_b.last_outcomes))
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
            "units_scored": units_scored(table, metric_b.unit_table(metric_b.last_outcomes)),
            "notes": sorted(notes),
            "mcnemar": exact,
            "metrics": {k: metric_row(k, d, declared, exact) for k, d in diffs.items()},
        })
        mark_same_data(bench, split_name, table, metric_b.unit_table(metric_b.last_outcomes), evals[-1]["metrics"])
    return evals


def _compare_seed_groups(a: Path, b: Path, benchmark, split, epoch, resamples, seed, allow_missing, adjust) -> dict[str, Any]:
    """Two ``fit --seeds`` groups, paired by seed: each seed both groups ran is compared run
    against run (the same examples, so McNemar and the paired bootstrap apply within it), and
    the adjustment runs over every seed's rows together."""
    if not (is_seed_group(a) and is_seed_group(b)):
        which = a if is_seed_group(a) else b
        raise NegtrainError(f"{which} is a seed group (fit --seeds); compare it with another seed group, or name one of its runs")
    group_a, group_b = SeedGroup.read(a), SeedGroup.read(b)
    runs_b = dict(zip(group_b.seeds, group_b.runs, strict=False))
    paired_seeds = [(s, run, runs_b[s]) for s, run in zip(group_a.seeds, group_a.runs, strict=False) if s in runs_b]
    if not paired_seeds:
        raise NegtrainError(f"{a} (seeds {group_a.seeds}) and {b} (seeds {group_b.seeds}) share no seed to pair runs by")
    evals = []
    for s, run_a, run_b in paired_seeds:
        side_a = resolve_side(run_a.path, benchmark, split, epoch)
        side_b = resolve_side(run_b.path, benchmark, split, epoch)
        evals += [{**ev, "seed": s} for ev in _compared(side_a, side_b, resamples, seed, allow_missing)]
    add_adjusted(evals, adjust)
    unpaired = sorted(set(group_a.seeds) ^ set(group_b.seeds))
    return {"a": str(a), "b": str(b), "bootstrap": {"resamples": resamples, "seed": seed}, "adjust": adjust,
            "seeds": [s for s, _, _ in paired_seeds], "evals": evals,
            "not_in_both": [f"seed {s}" for s in unpaired], "warnings": setup_differences(group_a.runs[0].path, group_b.runs[0].path)}


def compare(a: Path, b: Path, benchmark: str | None = None, split: str | None = None, epoch: str = "last",
            resamples: int = 1000, seed: int = 0, allow_missing: bool = False, adjust: str = "holm") -> dict[str, Any]:
    """The comparison as JSON-ready data (see the module docstring)."""
    if epoch not in ("last", "best") and not epoch.isdigit():
        raise NegtrainError(f"--epoch must be 'last', 'best' or an epoch number, got '{epoch}'")
    if adjust not in ADJUSTMENTS:
        raise NegtrainError(f"--adjust must be one of {', '.join(ADJUSTMENTS)}, got '{adjust}'")
    if is_seed_group(a) or is_seed_group(b):
        return _compare_seed_groups(a, b, benchmark, split, epoch, resamples, seed, allow_missing, adjust)
    side_a, side_b = resolve_side(a, benchmark, split, epoch), resolve_side(b, benchmark, split, epoch)
    if epoch != "last" and not (side_a.has_epochs or side_b.has_epochs):
        raise NegtrainError(f"--epoch {epoch}: neither {a} nor {b} has per-epoch predictions (a report card, an "
                            "evaluation directory or a predictions file holds one evaluation); --epoch picks among a run's epochs")
    evals = _compared(side_a, side_b, resamples, seed, allow_missing)
    add_adjusted(evals, adjust)
    only = sorted(set(side_a.files) ^ set(side_b.files))
    return {"a": side_a.label, "b": side_b.label, "bootstrap": {"resamples": resamples, "seed": seed},
            "adjust": adjust, "evals": evals, "not_in_both": only, "warnings": setup_differences(a, b)}


def metric_row(name: str, d, declared, exact: dict[str, Any] | None) -> dict[str, Any]:
    """One metric's comparison; accuracy's p is McNemar's exact one where the split has
    per-example correctness, every other p the paired bootstrap's."""
    by_mcnemar = name == "accuracy" and exact is not None
    return {
        "a": _num(d.a), "b": _num(d.b), "diff": _num(d.diff), "ci95": d.ci95,
        "share_b_le_a": d.share_b_le_a, "higher_is_better": declared.is_higher_better(name),
        "p": exact["p"] if exact is not None and by_mcnemar else d.p_bootstrap, "test": "mcnemar" if by_mcnemar else "bootstrap",
    }


def _provenance_of(arg: Path) -> dict[str, Any] | None:
    """The provenance of a run, card or evaluation directory, or of the one a predictions file
    sits in (``<dir>/predictions/<file>``); None where there is none."""
    return provenance.read(arg if arg.is_dir() else arg.parent.parent)


def setup_differences(a: Path, b: Path) -> list[str]:
    """Where A and B were produced differently in a way that moves numbers: a data file with other
    bytes, another major version of a package (:func:`negtrain.models.provenance.differences`).
    Sides with no provenance at all (bare predictions files) are not compared."""
    return provenance.differences(_provenance_of(a), _provenance_of(b))


def _units(ev: dict[str, Any]) -> str:
    """``200 contrast sets``, or ``10 of 200 contrast sets scored`` for part of the split."""
    scored = ev.get("units_scored", ev["units"])
    return f"{ev['units']:,} {ev['unit']}s" if scored == ev["units"] else f"{scored:,} of {ev['units']:,} {ev['unit']}s scored"


def _num(x: float) -> float | None:
    return float(x) + 0.0 if math.isfinite(x) else None  # + 0.0: no -0.0


def format_p(p: float | None) -> str:
    """A p-value to 4 significant digits (small ones in exponent form), '-' where there is none."""
    if p is None:
        return "-"
    return f"{p:.4f}" if p >= 0.001 else f"{p:.3g}"


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
        "",
        (f"p: two-sided, of \"A and B do not differ\"; accuracy by McNemar's exact test on the examples both predicted "
         f"(mcnemar), every other metric by the paired bootstrap (bootstrap). Adjusted: {ADJUSTMENTS[result['adjust']]} "
         f"over all {sum(m['p'] is not None and not m.get('same_as') for ev in result['evals'] for m in ev['metrics'].values())} p-values of this table "
         "(a metric on the same data as another, e.g. one condition's accuracy when only that condition was scored, is not tested twice)."),
    ]
    if result.get("warnings"):
        lines += ["", "**A and B were not produced alike:**", "", *[f"- warning: {w}" for w in result["warnings"]]]
    for ev in result["evals"]:
        lines += ["", f"## {'seed ' + str(ev['seed']) + ': ' if 'seed' in ev else ''}{ev['benchmark']}/{ev['split']} ({_units(ev)})", "",
                  f"| metric | A | B | B − A | 95% CI of B − A | share B ≤ A | p (test) | p adjusted ({ADJUSTMENTS[result['adjust']]}) | better |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for k, m in ev["metrics"].items():
            ci = f"[{m['ci95'][0]:+.4f}, {m['ci95'][1]:+.4f}]" if m["ci95"] and m["ci95"][0] is not None else "-"
            share = _f(m["share_b_le_a"])
            p = f"{format_p(m['p'])} ({m['test']})" if m["p"] is not None else "-"
            if m.get("same_as"):
                p = f"same data as {m['same_as']}"
            lines.append(f"| {k} | {_f(m['a'])} | {_f(m['b'])} | {_f(m['diff'], True)} | {ci} | {share} | {p} | "
                         f"{format_p(m['p_adjusted'])} | {'higher' if m['higher_is_better'] else 'lower'} |")
        if ev["mcnemar"] is not None:
            mc = ev["mcnemar"]
            lines += ["", f"McNemar: of {mc['pairs']} examples both predicted, {mc['a_only']} right by A only and "
                          f"{mc['b_only']} by B only; exact two-sided p = {format_p(mc['p'])}."]
        lines += ["", *[f"note: {n}" for n in ev["notes"]]] if ev["notes"] else []
    if result["not_in_both"]:
        lines += ["", f"Not compared (in one side only): {', '.join(result['not_in_both'])}."]
    return "\n".join(lines) + "\n"
