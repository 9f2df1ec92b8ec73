"""stderr and cluster-bootstrap intervals of benchmark metrics, on hand-made prediction sets."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import f1_score

from negtrain.core import labels as nli
from negtrain.benchmarks.base import Example
from negtrain.metrics.monli import MonliMetric
from negtrain.benchmarks.nannli import NanNli
from negtrain.benchmarks.scone import CONDITIONS
from negtrain.metrics.scone import SconeMetric
from negtrain.metrics.uncertainty import UnitTable, estimate, percentile_interval, replicates, resample_counts


def counts(name: str) -> bool:
    return name in {"n", "groups_scored"}


def scone_metric(n_sets: int = 200) -> SconeMetric:
    """n_sets contrast sets of six; every gold label 0 (entailment)."""
    return SconeMetric(
        labels=[0] * (6 * n_sets),
        subsets=[c for _ in range(n_sets) for c in CONDITIONS],
        groups=[f"set{g}" for g in range(n_sets) for _ in CONDITIONS],
        subset_order=CONDITIONS,
    )


def test_stderr_is_lm_eval_mean_stderr_on_a_hand_case():
    # 5 examples, 3 right. lm-eval: sample_stddev = sqrt(sum((x - mu)^2) / (n - 1)),
    # mean_stderr = sample_stddev / sqrt(n). mu = 0.6; squares 3 * 0.16 + 2 * 0.36 = 1.2;
    # 1.2 / 4 = 0.3; sqrt(0.3) / sqrt(5) = sqrt(0.06).
    metric = MonliMetric(labels=[0, 0, 0, 1, 1])
    result = estimate(metric, np.array([0, 0, 0, 0, 0]), resamples=0, seed=0, is_count=counts)
    assert result.metrics["accuracy"]["stderr"] == pytest.approx(math.sqrt(0.06), abs=1e-6)
    outcomes = np.array([1, 1, 1, 0, 0], dtype=float)
    lm_eval = math.sqrt(((outcomes - outcomes.mean()) ** 2).sum() / (len(outcomes) - 1)) / math.sqrt(len(outcomes))
    assert result.metrics["accuracy"]["stderr"] == pytest.approx(lm_eval, abs=1e-6)
    assert result.unit == "example" and result.units == 5


def test_counts_get_no_uncertainty_and_zero_resamples_writes_no_ci95():
    metric = scone_metric(10)
    preds = np.zeros(60, dtype=np.int64)
    off = estimate(metric, preds, resamples=0, seed=0, is_count=counts)
    assert "n" not in off.metrics and "groups_scored" not in off.metrics
    assert all("ci95" not in entry for entry in off.metrics.values())
    assert off.metrics["consistency"]["stderr"] == 0.0  # all sets right: no spread
    on = estimate(metric, preds, resamples=50, seed=0, is_count=counts)
    assert all("ci95" in entry for entry in on.metrics.values())
    assert "n" not in on.metrics


def test_scone_consistency_interval_resamples_contrast_sets_not_examples():
    metric = scone_metric(200)
    preds = np.ones(1200, dtype=np.int64)  # all wrong ...
    preds[: 6 * 100] = 0  # ... except every member of the first 100 sets
    result = estimate(metric, preds, resamples=2000, seed=7, is_count=counts)
    assert result.unit == "contrast set"
    assert result.units == 200
    lo, hi = result.metrics["consistency"]["ci95"]
    assert lo < 0.5 < hi
    # 200 independent sets at p = 0.5: the 95% interval is about 2 * 1.96 * sqrt(0.25 / 200) = 0.139 wide.
    assert 0.11 < hi - lo < 0.17
    # Accuracy is clustered the same way: its interval is as wide as consistency's, not 1/sqrt(6) of it.
    alo, ahi = result.metrics["accuracy"]["ci95"]
    assert 0.11 < ahi - alo < 0.17

    # The wrong way: every example an independent draw of its set's all-right indicator.
    set_right = (preds == 0).astype(float)  # the set of each example is all right iff the example is
    by_example = UnitTable("example", ("right", "scored"), np.stack([set_right, np.ones(1200)], axis=1))

    class Ratio:
        def from_totals(self, t):
            return {"consistency": t["right"] / t["scored"]}

    naive = replicates(Ratio(), by_example, resample_counts(by_example.units, 2000, 7))["consistency"]
    nlo, nhi = percentile_interval(naive)
    assert (hi - lo) > 2 * (nhi - nlo)  # sqrt(6) = 2.45 times wider in expectation


def nannli_case():
    """Three premises with 3, 2 and 4 hypotheses; 3-way gold labels."""
    gold = ["entailment", "neutral", "contradiction", "entailment", "entailment",
            "contradiction", "neutral", "neutral", "contradiction"]
    premise = [0, 0, 0, 1, 1, 2, 2, 2, 2]
    examples = [
        Example(f"nannli/test/{i}", ("p", "h"), g, subset="c", group=f"nannli/test/premise/{p}", meta={"operations": ()})
        for i, (g, p) in enumerate(zip(gold, premise, strict=False))
    ]
    pred = ["entailment", "contradiction", "contradiction", "neutral", "entailment",
            "contradiction", "neutral", "entailment", "neutral"]
    return examples, np.array([nli.NLI3.index(x) for x in gold]), np.array([nli.NLI3.index(x) for x in pred]), np.array(premise)


def test_nannli_f1_is_recomputed_on_each_resample():
    examples, gold, pred, premise = nannli_case()
    metric = NanNli().metric(examples)
    table = metric.unit_table(pred)
    assert table.unit == "premise" and table.units == 3
    draws = resample_counts(table.units, 40, seed=3)
    reps = replicates(metric, table, draws)
    assert np.isfinite(reps["f1"]).all()
    for r in range(len(draws)):
        # The resample written out: each premise's hypotheses repeated as often as it was drawn.
        rows = np.concatenate([np.repeat(np.flatnonzero(premise == u), int(c)) for u, c in enumerate(draws[r])])
        direct = f1_score(gold[rows], pred[rows], average="weighted", labels=sorted(set(gold[rows]) | set(pred[rows])))
        assert reps["f1"][r] == pytest.approx(direct, abs=1e-12)
        strict = np.mean([(gold[premise == u] == pred[premise == u]).all() for u in range(3) for _ in range(int(draws[r, u]))])
        assert reps["strict"][r] == pytest.approx(strict)
    # Not an average of per-premise F1 values: the resamples differ from that.
    per_premise = [f1_score(gold[premise == u], pred[premise == u], average="weighted") for u in range(3)]
    averaged = (draws * np.array(per_premise)).sum(axis=1) / draws.sum(axis=1)
    assert not np.allclose(averaged, reps["f1"])


def test_same_seed_same_interval_and_another_seed_another():
    metric = scone_metric(50)
    preds = np.random.default_rng(0).integers(0, 2, size=300)
    a = estimate(metric, preds, resamples=300, seed=11, is_count=counts)
    b = estimate(metric, preds, resamples=300, seed=11, is_count=counts)
    c = estimate(metric, preds, resamples=300, seed=12, is_count=counts)
    assert a.metrics == b.metrics
    assert a.metrics["accuracy"]["ci95"] != c.metrics["accuracy"]["ci95"]


def test_nan_nli_f1_stderr_comes_from_the_bootstrap():
    examples, _, pred, _ = nannli_case()
    metric = NanNli().metric(examples)
    on = estimate(metric, pred, resamples=200, seed=0, is_count=counts)
    off = estimate(metric, pred, resamples=0, seed=0, is_count=counts)
    assert on.metrics["f1"]["stderr"] > 0
    assert off.metrics["f1"]["stderr"] is None  # not a per-item mean: no formula, no bootstrap
    assert off.metrics["strict"]["stderr"] is not None  # a mean over premises


def test_the_epoch_table_shows_the_stderr_beside_each_value_and_none_beside_counts():
    from negtrain.data.eval_set import EvalResult
    from negtrain.training.recorder import format_table

    metric = MonliMetric(labels=[0, 0, 0, 1, 1])
    preds = np.zeros(5, dtype=np.int64)
    from negtrain.benchmarks.monli import Monli

    result = EvalResult("monli/test", metric.score(preds), preds, uncertainty=estimate(metric, preds, 100, 0, Monli.is_count))
    table = format_table("epoch 3/3 evaluation", [result], [Monli.is_count], width=100)
    assert f"accuracy  0.6000±{math.sqrt(0.06):.4f}" in table
    assert "n           5" in table.replace("0.6000±", "") or " 5" in table
    assert "5±" not in table  # a count carries no standard error


def test_large_splits_are_resampled_in_chunks_with_the_same_result(monkeypatch):
    from negtrain.metrics import uncertainty

    metric = scone_metric(50)
    preds = np.random.default_rng(1).integers(0, 2, size=300)
    whole = estimate(metric, preds, resamples=120, seed=5, is_count=counts)
    monkeypatch.setattr(uncertainty, "CHUNK_DRAWS", 50 * 7)  # 7 resamples per chunk
    assert estimate(metric, preds, resamples=120, seed=5, is_count=counts).metrics == whole.metrics


def test_a_metric_that_only_defines_score_is_scored_without_uncertainty():
    import torch

    from negtrain.metrics.base import ExampleMetric

    class Plain(ExampleMetric):
        def score(self, predictions):
            return {"accuracy": float((predictions == 1).mean())}

    metric = Plain(num_examples=4)
    metric.update(torch.arange(4), torch.tensor([1, 1, 0, 1]))
    assert float(metric.compute()["accuracy"]) == 0.75
    assert not metric.supports_uncertainty and MonliMetric(labels=[0]).supports_uncertainty
