"""Scoring one benchmark on several splits at once, as papers that evaluate on several disjoint
splits report it: CondaQA's few-shot results (Ravichander et al. 2022, Appendix C.2) are five test
splits, each prompted with its own nine shots, reported as the mean and standard deviation over the
five.

For the splits given (each with its own predictions file) this reports:

- each split scored on its own (:func:`negtrain.evaluation.predictions.score_file`: values, stderr, intervals);
- per metric, over the splits: ``mean``, ``std`` (the *sample* standard deviation, n - 1 in the
  denominator) and ``std_population`` (n). The paper says only "standard deviation ... computed
  over five splits" (Appendix D, Table 11), not which; numpy's default would be the population one,
  the usual statistic for a spread over runs the sample one, so both are written and the text
  shows the sample one, named;
- pooled: every split's predictions scored together as one set with the benchmark's own metric, so
  accuracy and consistency come with the cluster bootstrap interval over all question groups (the
  five CondaQA splits partition the test set, and no question group spans two of them).

Counts (``n``, ``groups_scored``) are summed into the pooled score, never averaged.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from negtrain.benchmarks.registry import get_benchmark
from negtrain.core.errors import NegtrainError
from negtrain.evaluation.predictions import scored_metric
from negtrain.evaluation.scored_file import Scored, format_scored
from negtrain.metrics.base import MISSING
from negtrain.metrics.uncertainty import uncertainty_of


@dataclass
class AcrossSplits:
    benchmark: str
    splits: list[Scored]
    #: metric -> {"mean", "std" (sample), "std_population", "values" (per split, in order)}
    summary: dict[str, dict[str, object]]
    pooled: Scored | None
    notes: list[str] = field(default_factory=list)

    def as_json(self) -> dict:
        return {
            "benchmark": self.benchmark,
            "splits": [s.as_json() for s in self.splits],
            "across_splits": self.summary,
            "pooled": self.pooled.as_json() if self.pooled is not None else None,
            "notes": self.notes,
        }


def _finite(x: float) -> float | None:
    return round(float(x), 6) + 0.0 if math.isfinite(x) else None


def summarize(per_split: Sequence[Mapping[str, float]], is_count=lambda name: False) -> dict[str, dict[str, object]]:
    """Mean, sample std (n - 1) and population std (n) over the splits, per metric that every split
    reports and that is not a count; a split where the metric is NaN (nothing to score) is left out
    of that metric's statistics, and its value shown as None."""
    names = [k for k in per_split[0] if not is_count(k) and all(k in m for m in per_split)]
    out: dict[str, dict[str, object]] = {}
    for name in names:
        # A metric undefined on a split (NaN in memory, null in metrics.jsonl: e.g. a consistency
        # over no complete group, in a run limited to some batches) is left out, not a crash.
        values = np.array([math.nan if m[name] is None else float(m[name]) for m in per_split], dtype=np.float64)
        finite = values[np.isfinite(values)]
        out[name] = {
            "mean": _finite(finite.mean()) if finite.size else None,
            "std": _finite(finite.std(ddof=1)) if finite.size > 1 else None,
            "std_population": _finite(finite.std(ddof=0)) if finite.size else None,
            "values": [_finite(v) for v in values],
        }
    return out


def score_splits(benchmark: str, splits: Sequence[str], paths: Sequence[Path], allow_missing: bool = False,
                 bootstrap: int = 1000, bootstrap_seed: int = 0) -> AcrossSplits:
    """Score ``paths[i]`` on ``splits[i]`` each, then over the splits and pooled (see the module)."""
    if len(splits) != len(paths):
        raise NegtrainError(f"{len(splits)} split(s) but {len(paths)} predictions file(s): give one --predictions per split, in the same order")
    if len(set(splits)) != len(splits):
        raise NegtrainError(f"a split given twice: {', '.join(splits)}")
    bench = get_benchmark(benchmark)
    scored, metrics, examples = [], [], []
    for split, path in zip(splits, paths, strict=False):
        s, metric = scored_metric(benchmark, split, path, allow_missing)
        s.uncertainty = uncertainty_of(metric, bootstrap, bootstrap_seed, bench.is_count)
        scored.append(s)
        metrics.append(metric)
        examples += bench.load(split)
    summary = summarize([s.metrics for s in scored], bench.is_count)
    notes: list[str] = []
    spaces = {s.predicted_labels for s in scored}
    outcomes = [m.last_outcomes for m in metrics]
    if len(spaces) > 1 or any(o is None or o.ndim != 1 for o in outcomes):
        notes.append("no pooled score: the splits' predictions are in different label spaces")
        return AcrossSplits(benchmark, scored, summary, None, notes)
    (space,) = spaces
    pooled_metric = bench.scorer(examples, space) if space else bench.metric(examples)
    # responses no answer rule could read stay wrong, and counted, in the pooled score too
    pooled_metric.counts_unparsed = any(getattr(m, "counts_unparsed", False) for m in metrics)
    full = np.concatenate(outcomes)
    seen = np.flatnonzero(full != MISSING)
    pooled_metric.update(torch.from_numpy(seen), torch.from_numpy(full[seen]))
    values = {k: float(v) for k, v in pooled_metric.compute().items()}
    pooled = Scored(
        benchmark, "+".join(splits), ", ".join(str(p) for p in paths), len(examples), int(seen.size), tuple(space), values,
        [f"pooled: the predictions of {len(splits)} splits scored as one set"],
    )
    pooled.uncertainty = uncertainty_of(pooled_metric, bootstrap, bootstrap_seed, bench.is_count)
    return AcrossSplits(benchmark, scored, summary, pooled, notes)


def format_across(a: AcrossSplits) -> str:
    lines = [format_scored(s) for s in a.splits]
    width = max((len(k) for k in a.summary), default=0)
    lines.append(f"{a.benchmark} over {len(a.splits)} splits ({', '.join(s.split for s in a.splits)}): "
                 "mean ± standard deviation (sample, n-1) over the splits")
    for name, stats in a.summary.items():
        mean, std = stats["mean"], stats["std"]
        shown = "-" if mean is None else f"{mean:.4f}" + (f" ± {std:.4f}" if std is not None else "")
        lines.append(f"  {name:<{width}}  {shown}")
    if a.pooled is not None:
        lines.append(format_scored(a.pooled))
    lines += [f"note: {n}" for n in a.notes]
    return "\n".join(lines)
