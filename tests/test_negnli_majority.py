"""NegNLI's majority-baseline column (Hossain et al. 2020, Table 7, "MB"): the share of the most
frequent gold label among the scored pairs, overall and per pair type (each its own majority),
beside the model's accuracy on the same pairs."""

from __future__ import annotations

import pytest
import torch

from negtrain.core import labels as nli
from negtrain.benchmarks.base import Example
from negtrain.benchmarks.registry import get_benchmark
from negtrain.metrics.base import MISSING

#: Table 7's MB column on the new pairs with negation: Tneg-H, T-Hneg, Tneg-Hneg, All.
TABLE_7_MB = {
    "negnli-rte": (80.2, 91.0, 65.6, 78.9),
    "negnli-snli": (62.0, 41.0, 69.8, 56.5),
    "negnli-mnli": (45.8, 47.6, 47.0, 39.3),
}


def _scored(bench, examples, predicted) -> dict[str, float]:
    metric = bench.metric(examples)
    index = [i for i, p in enumerate(predicted) if p != MISSING]
    metric.update(torch.tensor(index), torch.tensor([predicted[i] for i in index]))
    return {k: float(v) for k, v in metric.compute().items()}


def test_by_hand_each_pair_type_has_its_own_majority_and_only_scored_pairs_count():
    bench = get_benchmark("negnli-snli")
    gold = ["neutral", "contradiction", "neutral", "neutral", "neutral", "neutral",
            "entailment", "contradiction", "neutral"]
    types = ["Tneg-H", "T-Hneg", "Tneg-Hneg"] * 3
    examples = [Example(f"negnli-snli/all/{i}", ("t", "h"), gold[i], subset=types[i], group=f"g{i // 3}") for i in range(9)]
    predicted = [nli.NLI3.index("entailment")] * 9
    out = _scored(bench, examples, predicted)
    assert out["majority_baseline"] == pytest.approx(6 / 9)  # neutral, 6 of 9
    assert out["majority_baseline/Tneg-H"] == pytest.approx(2 / 3)  # neutral, neutral, entailment
    assert out["majority_baseline/T-Hneg"] == pytest.approx(2 / 3)  # contradiction, its own majority (neutral: 1/3)
    assert out["majority_baseline/Tneg-Hneg"] == 1.0
    assert out["accuracy"] == pytest.approx(1 / 9)  # the model's, unchanged
    predicted[6] = MISSING  # an unscored pair is no part of the baseline either
    out = _scored(bench, examples, predicted)
    assert out["majority_baseline/Tneg-H"] == 1.0 and out["majority_baseline"] == pytest.approx(6 / 8)


@pytest.mark.parametrize("name", sorted(TABLE_7_MB))
def test_the_mirrored_pairs_give_table_7s_mb_column(name):
    bench = get_benchmark(name)
    examples = bench.load("all")
    out = _scored(bench, examples, [0] * len(examples))
    got = tuple(round(100 * out[f"majority_baseline/{t}"], 1) for t in ("Tneg-H", "T-Hneg", "Tneg-Hneg"))
    assert got + (round(100 * out["majority_baseline"], 1),) == TABLE_7_MB[name]
