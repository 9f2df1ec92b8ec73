"""Standard errors and cluster bootstrap intervals for every benchmark metric.

Every :class:`~negtrain.metrics.base.ExampleMetric` is defined in two steps (see there):

1. ``unit_table(outcomes)``: per *independent unit* of the benchmark (a ScoNe contrast set, a
   NaN-NLI premise, a CondaQA question group, ..., else the example), sums of per-example and
   per-group quantities: how many examples were predicted, how many right, a confusion matrix,
   whether the group was scored and all right, ...
2. ``from_totals(totals)``: the metrics, by their own definitions, from those sums totalled over
   units (accuracy = right / seen, F1 from the confusion counts, consistency = all-right groups /
   scored groups).

The point estimate totals every unit once. A bootstrap resample draws the units with replacement
and totals each unit as often as it was drawn, so a resample is ``counts @ table``: one matrix
product for all resamples, and each metric is recomputed from the resampled totals (F1 is
recomputed, not averaged; consistency is counted over the resampled groups). Because whole units
are drawn, the dependence between the six members of a contrast set is kept: resampling examples
instead would pretend a contrast set is six independent observations.

Reported per metric:

- ``stderr``: for a mean of per-item 0/1 outcomes (a :class:`Mean`: accuracy and its subsets,
  consistency over groups, error rates) lm-evaluation-harness's ``mean_stderr``: the sample
  standard deviation of the outcomes (n − 1 denominator) over √n, which for 0/1 outcomes is
  √(p(1 − p)/(n − 1)). It treats the items as independent, as lm-eval does, so it is comparable
  with lm-eval's numbers. For any other metric (F1, a loss) the standard deviation of the
  bootstrap replicates (lm-eval's ``bootstrap_stderr``), or none when the bootstrap is off.
- ``ci95``: the 2.5th and 97.5th percentiles of the cluster bootstrap replicates (resamples where
  the metric is undefined, e.g. a subset not drawn at all, are left out).

Counts (``n``, ``groups_scored``, ...; the benchmark declares which names are counts) get no
uncertainty.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

#: Whether a metric name is a count (``Benchmark.is_count``): counts get no uncertainty.
IsCount = Callable[[str], bool]


def ratios(num, den):
    """num / den elementwise, NaN where den is 0 (an empty subset is unknown, not 0)."""
    num, den = np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64)
    safe = np.where(den > 0, den, 1.0)
    return np.where(den > 0, num / safe, np.nan)


@dataclass(frozen=True)
class Mean:
    """A metric that is the mean of per-item 0/1 outcomes: ``hits`` of ``items`` (scalars for the
    point estimate, arrays over resamples in the bootstrap). Its stderr is lm-eval's."""

    hits: np.ndarray | float
    items: np.ndarray | float

    @property
    def value(self) -> np.ndarray:
        return ratios(self.hits, self.items)


@dataclass(frozen=True)
class UnitTable:
    """Per-unit sums: ``values[u, k]`` is column ``columns[k]`` summed over unit ``u``."""

    unit: str  # what one unit is, e.g. "contrast set"
    columns: tuple[str, ...]
    values: np.ndarray  # (units, columns)
    #: Per example, before summing: its unit, and (where the metric has these columns) whether it
    #: was predicted ("seen") and right ("right"): what a paired exact test and the viewer read,
    #: so that their "right" is the metric's own.
    codes: np.ndarray | None = None
    seen: np.ndarray | None = None
    right: np.ndarray | None = None

    @property
    def units(self) -> int:
        return self.values.shape[0]

    def totals(self, counts: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """Column totals: over every unit once, or per resample for ``counts`` (resamples, units)."""
        summed = self.values.sum(axis=0) if counts is None else counts @ self.values
        return {c: summed[..., k] for k, c in enumerate(self.columns)}


def unit_table(unit: str, codes: np.ndarray, n_units: int, per_example: Mapping[str, np.ndarray],
               per_unit: Mapping[str, np.ndarray] | None = None) -> UnitTable:
    """A :class:`UnitTable` from per-example columns (summed within each unit; ``codes[i]`` is
    example i's unit) and columns that are already per unit (e.g. "this group was all right")."""
    codes = np.asarray(codes, dtype=np.int64)
    columns: list[str] = []
    values: list[np.ndarray] = []
    for name, col in per_example.items():
        columns.append(name)
        values.append(np.bincount(codes, weights=np.asarray(col, dtype=np.float64), minlength=n_units))
    for name, col in (per_unit or {}).items():
        columns.append(name)
        values.append(np.asarray(col, dtype=np.float64).reshape(n_units))
    table = np.stack(values, axis=1) if values else np.zeros((n_units, 0))
    seen, right = (np.asarray(per_example[k], dtype=bool) if k in per_example else None for k in ("seen", "right"))
    return UnitTable(unit, tuple(columns), table, codes, seen, right)


def point_values(values: Mapping[str, np.ndarray | Mean | float]) -> dict[str, float]:
    """The floats of a ``from_totals`` result computed on the full totals."""
    return {k: float(v.value if isinstance(v, Mean) else v) for k, v in values.items()}


def resample_counts(units: int, resamples: int, seed: int) -> np.ndarray:
    """How often each unit is drawn in each resample: (resamples, units), rows summing to ``units``.

    Deterministic in (units, resamples, seed): numpy's PCG64 with that seed."""
    return next(_count_chunks(units, resamples, seed, chunk=max(resamples, 1)))


#: Draws held in memory at once (resamples x units); larger splits are resampled in chunks.
CHUNK_DRAWS = 2_000_000


def _count_chunks(units: int, resamples: int, seed: int, chunk: int | None = None):
    """:func:`resample_counts` in chunks of resamples, drawn from one generator in sequence."""
    rng = np.random.Generator(np.random.PCG64(seed))
    chunk = chunk or max(1, CHUNK_DRAWS // max(units, 1))
    for start in range(0, resamples, chunk):
        size = min(chunk, resamples - start)
        draws = rng.integers(0, units, size=(size, units))
        offsets = (np.arange(size, dtype=np.int64) * units)[:, None]
        yield np.bincount((draws + offsets).ravel(), minlength=size * units).reshape(size, units).astype(np.float64)


def replicates(metric, table: UnitTable, counts: np.ndarray, is_count: IsCount = lambda name: False) -> dict[str, np.ndarray]:
    """Every non-count metric recomputed on each resample: name -> (resamples,)."""
    out = {}
    for k, v in metric.from_totals(table.totals(counts)).items():
        if is_count(k):
            continue
        out[k] = np.asarray(v.value if isinstance(v, Mean) else v, dtype=np.float64)
    return out


def bootstrap(pairs: list[tuple[object, UnitTable]], resamples: int, seed: int, is_count: IsCount) -> list[dict[str, np.ndarray]]:
    """:func:`replicates` of each (metric, table) on the *same* resamples (tables of one split have
    the same units), drawn in memory-bounded chunks."""
    units = pairs[0][1].units
    parts: list[list[dict[str, np.ndarray]]] = [[] for _ in pairs]
    for counts in _count_chunks(units, resamples, seed):
        for part, (metric, table) in zip(parts, pairs, strict=False):
            part.append(replicates(metric, table, counts, is_count))
    return [{k: np.concatenate([p[k] for p in part]) for k in part[0]} if part else {} for part in parts]


def _rounded(x: float) -> float | None:
    # + 0.0 turns -0.0 into 0.0 (a zero difference is not negative)
    return round(float(x), 6) + 0.0 if np.isfinite(x) else None


def percentile_interval(samples: np.ndarray) -> list[float | None] | None:
    """The 2.5th and 97.5th percentiles over the finite samples, or None when there are none."""
    finite = samples[np.isfinite(samples)]
    if not finite.size:
        return None
    lo, hi = np.percentile(finite, [2.5, 97.5])
    return [_rounded(lo), _rounded(hi)]


def mean_stderr(mean: Mean) -> float:
    """lm-eval's ``mean_stderr`` of ``items`` 0/1 outcomes of which ``hits`` are 1:
    sample_stddev / √n = √(n/(n−1) · p(1−p)) / √n = √(p(1−p)/(n−1)); NaN for n < 2."""
    n, hits = float(mean.items), float(mean.hits)
    if n < 2:
        return float("nan")
    p = hits / n
    return float(np.sqrt(p * (1.0 - p) / (n - 1.0)))


@dataclass(frozen=True)
class Uncertainty:
    """Per metric ``{"stderr": ..., "ci95": [lo, hi]}`` (ci95 only with a bootstrap), and the
    unit resampled with how many of them there were."""

    unit: str
    units: int
    resamples: int
    seed: int
    metrics: dict[str, dict[str, object]]

    def as_json(self) -> dict[str, dict[str, object]]:
        return self.metrics

    def described(self) -> dict[str, object]:
        """How the intervals were made, written next to them: ``{"unit", "units", "resamples", "seed"}``."""
        return {"unit": self.unit, "units": self.units, "resamples": self.resamples, "seed": self.seed}


def format_interval(entry: Mapping[str, Any] | None) -> str:
    """``[lo, hi]`` of an uncertainty entry with 4 decimals, or "" when it has no ci95."""
    ci = (entry or {}).get("ci95")
    if not ci or ci[0] is None:
        return ""
    return f"[{ci[0]:.4f}, {ci[1]:.4f}]"


def format_stderr(entry: Mapping[str, object] | None) -> str:
    """``±0.0123`` (the stderr) of an uncertainty entry, or "" when it has none."""
    se = (entry or {}).get("stderr")
    return f"±{se:.4f}" if isinstance(se, (int, float)) else ""


def scored_units(table: UnitTable) -> UnitTable:
    """``table`` without the units none of whose examples was predicted (a split cut by
    ``trainer.limit_val_batches``, or predictions missing for part of it): those hold no data, and
    the bootstrap resamples the units the numbers rest on, whose count (``units``) is then the
    one written beside them. Their per-example fields are dropped: only the totals are resampled."""
    if "seen" in table.columns:
        present = table.values[:, table.columns.index("seen")] > 0
    elif table.seen is not None and table.codes is not None:
        present = np.bincount(table.codes[table.seen], minlength=table.units) > 0
    else:
        return table
    if present.all() or not present.any():
        return table
    return UnitTable(table.unit, table.columns, table.values[present])


def estimate(metric, outcomes: np.ndarray, resamples: int, seed: int, is_count: IsCount) -> Uncertainty:
    """stderr and (with ``resamples`` > 0) the cluster-bootstrap ci95 of every metric of ``metric``
    on ``outcomes`` (the full, synced per-example state its ``compute`` scored) that is not a count."""
    table = scored_units(metric.unit_table(outcomes))
    point = metric.from_totals(table.totals())
    samples = bootstrap([(metric, table)], resamples, seed, is_count)[0] if resamples > 0 and table.units else {}
    out: dict[str, dict[str, object]] = {}
    for name, value in point.items():
        if is_count(name):
            continue
        entry: dict[str, object] = {}
        if isinstance(value, Mean):
            entry["stderr"] = _rounded(mean_stderr(value))
        elif name in samples and np.isfinite(samples[name]).sum() > 1:
            entry["stderr"] = _rounded(np.std(samples[name][np.isfinite(samples[name])], ddof=1))
        else:
            entry["stderr"] = None
        if name in samples:
            entry["ci95"] = percentile_interval(samples[name])
        out[name] = entry
    return Uncertainty(table.unit, table.units, resamples, seed, out)


def uncertainty_of(metric, resamples: int, seed: int, is_count: IsCount) -> Uncertainty | None:
    """:func:`estimate` on the state ``metric``'s last ``compute`` scored (``last_outcomes``), or
    None where it has none or its metrics cannot be bootstrapped. Every score that reports
    intervals (a run, a report card, a predictions file, splits pooled) takes them from here."""
    if metric.last_outcomes is None or not metric.supports_uncertainty:
        return None
    return estimate(metric, metric.last_outcomes, resamples, seed, is_count)


@dataclass(frozen=True)
class Difference:
    """B − A for one metric: the point difference, its paired bootstrap ci95, and the share of
    resamples in which B's value is at most A's."""

    a: float
    b: float
    diff: float
    ci95: list[float | None] | None
    share_b_le_a: float | None
    #: Two-sided bootstrap p of "no difference": twice the smaller share of resamples on either
    #: side of 0, each counted as (k + 1) / (R + 1) so that it is never 0 (Davison & Hinkley 1997).
    p_bootstrap: float | None = None


def paired(metric_a, outcomes_a: np.ndarray, metric_b, outcomes_b: np.ndarray, resamples: int, seed: int,
           is_count: IsCount) -> dict[str, Difference]:
    """Paired cluster bootstrap of B − A for every metric both report: each resample draws the same
    units for A and B. The two metrics score the same benchmark split (they may differ in the label
    space of the predictions, e.g. NaN-NLI's 3-way and binary view)."""
    table_a, table_b = metric_a.unit_table(outcomes_a), metric_b.unit_table(outcomes_b)
    if table_a.units != table_b.units or table_a.unit != table_b.unit:
        raise ValueError("a paired comparison needs the same units in A and B (the same benchmark split)")
    point_a = point_values(metric_a.from_totals(table_a.totals()))
    point_b = point_values(metric_b.from_totals(table_b.totals()))
    rep_a, rep_b = bootstrap([(metric_a, table_a), (metric_b, table_b)], resamples, seed, is_count) if resamples > 0 and table_a.units else ({}, {})
    out = {}
    for name in point_a:
        if is_count(name) or name not in point_b:
            continue
        ci = share = p = None
        if name in rep_a and name in rep_b:
            d = rep_b[name] - rep_a[name]
            ci = percentile_interval(d)
            finite = np.isfinite(d)
            share = _rounded((d[finite] <= 0).mean()) if finite.any() else None
            kept = d[finite]
            if kept.size:
                p = _rounded(min(1.0, 2 * (min(int((kept <= 0).sum()), int((kept >= 0).sum())) + 1) / (kept.size + 1)))
        a, b = point_a[name], point_b[name]
        out[name] = Difference(a, b, b - a, ci, share, p)
    return out
