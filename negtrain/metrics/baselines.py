"""The baselines a benchmark's headline score stands beside, computed from the data that was
scored, for every benchmark whose answer is a label:

- ``majority``: the headline the best constant prediction gets on the scored examples (for
  accuracy, the share of the most frequent gold label; NegNLI's Table 7 calls it MB), found by
  scoring each label of the prediction space, predicted for every scored example, with the
  benchmark's own metric;
- ``chance``: the headline's expected value under uniform random guessing, where it does not
  depend on the data: 1/k for accuracy over k labels (none for F1).

A model at or below its baseline has learnt nothing the data's label counts do not give; a card
marks it. Standard library and numpy only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from negtrain.metrics.uncertainty import point_values

MISSING, UNPARSED = -1, -2  # as negtrain.metrics.base's, without importing torch


def baselines(metric: Any, headline_name: str | None, labels: Sequence[str]) -> dict[str, Any] | None:
    """``{"metric": <headline>, "majority": ..., "chance": ..., "majority_label": ...}`` for the
    predictions ``metric`` last scored (its ``last_outcomes``, label ids into ``labels`` with
    MISSING where none was made); None where there is no headline or no label prediction."""
    outcomes = getattr(metric, "last_outcomes", None)
    if headline_name is None or outcomes is None or not getattr(metric, "supports_uncertainty", False) or len(labels) < 2:
        return None
    outcomes = np.asarray(outcomes)
    seen = outcomes != MISSING
    if outcomes.ndim != 1 or not seen.any():
        return None
    predicted = outcomes[seen]
    if ((predicted >= len(labels)) | ((predicted < 0) & (predicted != UNPARSED))).any():  # not label ids
        return None
    best: tuple[float, str] | None = None
    for k, label in enumerate(labels):
        values = point_values(metric.from_totals(metric.unit_table(np.where(seen, k, MISSING)).totals()))
        value = values.get(headline_name)
        if value is not None and not math.isnan(value) and (best is None or value > best[0]):
            best = (value, label)
    if best is None:
        return None
    out: dict[str, Any] = {"metric": headline_name, "majority": round(best[0], 6), "majority_label": best[1]}
    if headline_name == "accuracy":
        out["chance"] = round(1 / len(labels), 6)
    return out


def highest(baseline: Mapping[str, Any] | None) -> tuple[str, float] | None:
    """The higher of a record's baselines, named: ``("majority", 0.7911)``; None without one."""
    if not baseline:
        return None
    found = [(name, float(baseline[name])) for name in ("majority", "chance") if isinstance(baseline.get(name), (int, float))]
    return max(found, key=lambda x: x[1]) if found else None


def at_or_below(record: Mapping[str, Any]) -> bool:
    """Whether a metrics line's headline is no better than its highest baseline (a line as
    ``metrics.jsonl`` holds it: ``metrics``, ``baseline``, ``lower_is_better``)."""
    baseline = record.get("baseline")
    top = highest(baseline)
    if top is None or baseline is None:  # highest() is None without a baseline; both said for the checker
        return False
    value = record["metrics"].get(baseline["metric"])
    if value is None or math.isnan(value):
        return False
    lower = baseline["metric"] in (record.get("lower_is_better") or ())
    return value >= top[1] - 1e-12 if lower else value <= top[1] + 1e-12
