"""The data of a ``negtrain view`` site, as JSON-ready dicts.

Every eval set is scored by :func:`negtrain.evaluation.predictions.scored_metric`, the code behind
``evaluate --predictions`` and the card, and each example's right/wrong and its contrast group's
"scored" and "all right" come from the metric's own unit table: the counts the page shows are the
card's numbers, not a second implementation of them. A vs B uses ``compare``'s paired bootstrap,
McNemar's exact test and the adjustment over the pair's whole table.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from negtrain.benchmarks.registry import get_benchmark
from negtrain.evaluation.compare import add_adjusted, mcnemar_of, metric_row
from negtrain.evaluation.predictions import read_lines, scored_metric
from negtrain.metrics.baselines import at_or_below
from negtrain.metrics.declared import role_of
from negtrain.metrics.uncertainty import UnitTable, paired
from negtrain.view.sources import EvalSet, Source

#: The fields of a prediction line a language model's card adds, shown beside each member.
LM_FIELDS = ("prompt", "response", "shots", "unparsed")
#: At most this many sources are compared with every other in A vs B; beyond it (a run of many
#: epochs) each with the next, and the first with the last.
ALL_PAIRS_UP_TO = 6


@dataclass
class Scoring:
    """One eval set scored: its metric's unit table over the split, and the split's examples."""

    table: UnitTable
    metric: Any
    values: dict[str, float]


def _finite(x: Any) -> Any:
    return None if isinstance(x, float) and not math.isfinite(x) else x


def _lines(path: Path) -> dict[str, dict[str, Any]]:
    out = {}
    for text in read_lines(path):
        if text.strip():
            obj = json.loads(text)
            out[obj["id"]] = obj
    return out


def _shown(value: Any) -> str | None:
    """A prediction or gold value as the text shown (a label, an answer, a choice index)."""
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def set_data(s: EvalSet) -> tuple[dict[str, Any], Scoring]:
    """One eval set's page data (columns, one entry per predicted example in the split's order)
    and its scoring (for A vs B)."""
    scored, metric = scored_metric(s.benchmark, s.split, s.predictions, allow_missing=True)
    table = metric.unit_table(metric.last_outcomes)
    examples = get_benchmark(s.benchmark).load(s.split)
    lines = _lines(s.predictions)
    kept = [i for i, e in enumerate(examples) if e.id in lines]
    col = {c: k for k, c in enumerate(table.columns)}
    per_group = "groups_scored" in col and "groups_right" in col and table.codes is not None
    group_index: dict[str, int] = {}
    groups: dict[str, list] = {"name": [], "members": [], "scored": [], "right": []}
    data: dict[str, Any] = {"id": [], "subset": [], "group": [], "inputs": [], "gold": [], "prediction": [], "correct": []}
    lm = [f for f in LM_FIELDS if any(f in line for line in lines.values())]
    for f in lm:
        data[f] = []
    for row, i in enumerate(kept):
        e, line = examples[i], lines[examples[i].id]
        name = e.group or e.id
        if name not in group_index:
            group_index[name] = len(groups["name"])
            groups["name"].append(name)
            groups["members"].append([])
            unit = int(table.codes[i]) if per_group else None
            groups["scored"].append(int(table.values[unit, col["groups_scored"]]) if unit is not None else None)
            groups["right"].append(int(table.values[unit, col["groups_right"]]) if unit is not None else None)
        g = group_index[name]
        groups["members"][g].append(row)
        data["id"].append(e.id)
        data["subset"].append(e.subset)
        data["group"].append(g)
        data["inputs"].append(list(e.inputs))
        data["gold"].append(_shown(line.get("label", e.label)))
        data["prediction"].append(_shown(line.get("prediction")))
        right = None if table.right is None else bool(table.right[i]) if table.seen is None or table.seen[i] else None
        data["correct"].append(None if right is None else int(right))
        for f in lm:
            value = line.get(f)
            data[f].append(value if f in ("shots", "unparsed") else _shown(value))
    page = {
        "benchmark": s.benchmark, "split": s.split, "variant": s.variant, "name": s.name,
        "grouped": any(e.group for e in examples), "has_correct": table.right is not None,
        "subsets": sorted({e.subset for e in examples if e.subset}, key=_subset_order(metric)),
        "lm_fields": lm, "examples": data, "groups": groups,
        "notes": scored.notes,
    }
    return page, Scoring(table, metric, scored.metrics)


def _subset_order(metric) -> Any:
    """The metric's own order of subsets (the paper's), alphabetical for the rest."""
    order = list(getattr(metric, "subset_names", []) or [])
    return lambda s: (order.index(s) if s in order else len(order), s)


def metric_info(benchmark: str, keys: list[str]) -> dict[str, dict[str, Any]]:
    bench = get_benchmark(benchmark)
    # detail: a number of a fine-grained breakdown (TINAD's per pattern, its authors' counts),
    # kept out of the viewer's metric tables as the report keeps it out of its own.
    return {k: {"count": bench.is_count(k), "higher": bench.is_higher_better(k), "role": role_of(k), "detail": bench.declared(k).detail}
            for k in keys}


def record_summary(s: EvalSet, key: str) -> dict[str, Any]:
    r = s.record
    return {
        "key": key, "name": s.name, "benchmark": s.benchmark, "split": s.split, "variant": s.variant,
        "metrics": {k: _finite(v) for k, v in r.metrics.items()},
        "uncertainty": r.uncertainty, "bootstrap": r.bootstrap, "note": r.get("note"),
        "info": metric_info(s.benchmark, list(r.metrics)),
        # The headline's baseline (majority, chance) and, for a cut split, how much of it was scored.
        "baseline": r.get("baseline"), "subset": r.get("subset"),
        "at_or_below": at_or_below(r),
    }


def mismatches(record_metrics: dict[str, float | None], values: dict[str, float], where: str) -> list[str]:
    """Where the predictions file does not give the number metrics.jsonl holds (a file edited
    by hand): the viewer's counts would then not be the card's, and the site says so."""
    out = []
    for k, v in record_metrics.items():
        w = values.get(k)
        if w is None or v is None or (isinstance(w, float) and math.isnan(w)):
            continue
        if not np.isclose(v, w, rtol=0, atol=1e-6):
            out.append(f"{where}: {k} is {v} in metrics.jsonl but {w:.6f} from the predictions file")
    return out


def pairs_of(n: int) -> list[tuple[int, int]]:
    if n <= ALL_PAIRS_UP_TO:
        return [(i, j) for i in range(n) for j in range(i + 1, n)]
    return sorted({*((i, i + 1) for i in range(n - 1)), (0, n - 1)})


def pair_data(sources: list[Source], a: int, b: int, scorings: dict[tuple[int, int], Scoring], resamples: int, seed: int,
              adjust: str) -> dict[str, Any] | None:
    """A vs B for two sources: per shared eval set, ``compare``'s rows (bootstrap, McNemar, p and
    p adjusted over this pair's whole table)."""
    names_b = {s.name: k for k, s in enumerate(sources[b].sets)}
    evals = []
    for ka, s in enumerate(sources[a].sets):
        kb = names_b.get(s.name)
        if kb is None:
            continue
        sa, sb = scorings[(a, ka)], scorings[(b, kb)]
        bench = get_benchmark(s.benchmark)
        if not sa.metric.supports_uncertainty:
            continue
        diffs = paired(sa.metric, sa.metric.last_outcomes, sb.metric, sb.metric.last_outcomes, resamples, seed, bench.is_count)
        exact = mcnemar_of(sa.table, sb.table)
        evals.append({"name": s.name, "a_key": f"s{a}e{ka}", "b_key": f"s{b}e{kb}", "mcnemar": exact,
                      "metrics": {k: metric_row(k, d, bench, exact) for k, d in diffs.items()}})
    if not evals:
        return None
    add_adjusted(evals, adjust)
    return {"a": a, "b": b, "evals": evals}
