"""NegNLI and NaN-NLI metrics on hand-written predictions, with hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from negtrain.core import labels as nli
from negtrain.benchmarks.base import Example
from negtrain.benchmarks.nannli import NanNli
from negtrain.benchmarks.negnli import NegnliRte, NegnliSnli
from negtrain.core.errors import ConfigError
from negtrain.metrics.base import MISSING
from negtrain.models.heads import head_to_benchmark, prediction_space


def run(metric, predictions):
    """Score label-id predictions (MISSING = no prediction) through update/compute."""
    idx = [i for i, p in enumerate(predictions) if p != MISSING]
    metric.update(torch.tensor(idx), torch.tensor([predictions[i] for i in idx]))
    return {k: float(v) for k, v in metric.compute().items()}


def test_negnli_metric():
    types = ["Tneg-H", "T-Hneg", "Tneg-Hneg"]
    gold = ["neutral", "contradiction", "neutral", "entailment", "contradiction", "neutral"]
    examples = [
        Example(f"negnli-snli/all/{i}", ("p", "h"), gold[i], subset=types[i % 3], group=f"g{i // 3}") for i in range(6)
    ]
    bench = NegnliSnli()
    pred = [bench.labels.index(g) for g in gold]
    pred[4] = bench.labels.index("neutral")  # group 1, T-Hneg wrong
    out = run(bench.metric(examples), pred)
    assert out["accuracy"] == pytest.approx(5 / 6)
    assert out["accuracy/Tneg-H"] == 1.0
    assert out["accuracy/T-Hneg"] == 0.5
    assert out["accuracy/Tneg-Hneg"] == 1.0
    assert out["consistency"] == 0.5
    assert out["groups_scored"] == 2


# Three premises. Gold / 3-way prediction per hypothesis:
#   P0: E/E  C/C  N/N          all right
#   P1: E/E  C/N  C/C          one wrong (C predicted N: right in the binary view)
#   P2: N/E                    wrong in both views
GOLD = ["entailment", "contradiction", "neutral", "entailment", "contradiction", "contradiction", "neutral"]
PRED = ["entailment", "contradiction", "neutral", "entailment", "neutral", "contradiction", "entailment"]
PREMISE = [0, 0, 0, 1, 1, 1, 2]
CONSTRUCTION = ["A", "A", "A", "B", "B", "B", "A"]
OPS = [(), ("Lexical change",), (), (), ("Lexical change", "Negator position change"), (), ("Negator position change",)]


def nannli_examples():
    return [
        Example(f"nannli/test/{i}", ("p", "h"), GOLD[i], subset=CONSTRUCTION[i], group=f"nannli/test/premise/{PREMISE[i]}", meta={"operations": OPS[i]})
        for i in range(len(GOLD))
    ]


def test_nannli_three_way():
    out = run(NanNli().metric(nannli_examples()), [nli.NLI3.index(p) for p in PRED])
    # entailment: TP 2, FP 1, FN 0 -> 4/5; contradiction: TP 2, FP 0, FN 1 -> 4/5;
    # neutral: TP 1, FP 1, FN 1 -> 2/4. Weighted by support 2, 3, 2: (1.6 + 2.4 + 1.0) / 7.
    assert out["f1/entailment"] == pytest.approx(0.8)
    assert out["f1/contradiction"] == pytest.approx(0.8)
    assert out["f1/neutral"] == pytest.approx(0.5)
    assert out["f1"] == pytest.approx(5 / 7)
    # Binary: gold E E / NE x5; predicted E for 0, 3, 6. entailment: TP 2, FP 1 -> 4/5;
    # not_entailment: TP 4, FN 1 -> 8/9. Weighted (2 * 0.8 + 5 * 8/9) / 7.
    assert out["binary_f1/entailment"] == pytest.approx(0.8)
    assert out["binary_f1/not_entailment"] == pytest.approx(8 / 9)
    assert out["binary_f1"] == pytest.approx((1.6 + 40 / 9) / 7)
    # Strict: only P0 has every hypothesis right.
    assert out["strict"] == pytest.approx(1 / 3)
    assert out["groups_scored"] == 3
    # Error rates: construction A has 4 examples, 1 wrong (6); B has 3, 1 wrong (4).
    assert out["error_rate/construction/A"] == pytest.approx(1 / 4)
    assert out["error_rate/construction/B"] == pytest.approx(1 / 3)
    assert out["error_rate/operation/Lexical change"] == pytest.approx(1 / 2)  # 1 right, 4 wrong
    assert out["error_rate/operation/Negator position change"] == 1.0  # 4 and 6, both wrong
    assert math.isnan(out["error_rate/operation/Focus particle change"])  # no such example
    assert out["n"] == 7
    assert list(out)[:4] == ["f1", "f1/contradiction", "f1/entailment", "f1/neutral"]  # Table 6's order: C, E, N
    assert not NanNli.is_higher_better("error_rate/construction/A")
    assert NanNli.is_higher_better("strict")
    assert NanNli.is_count("groups_scored") and not NanNli.is_count("strict")


def test_nannli_two_way_predictions_get_the_binary_view_only():
    bench = NanNli()
    metric = bench.scorer(nannli_examples(), nli.NLI2)
    out = run(metric, [nli.NLI2.index(nli.coarsen(p)) for p in PRED])
    assert set(out) == {"binary_f1", "binary_f1/entailment", "binary_f1/not_entailment", "n"}
    assert out["binary_f1"] == pytest.approx((1.6 + 40 / 9) / 7)
    assert "binary view only" in metric.note


def test_nannli_strict_counts_only_premises_with_every_prediction():
    pred = [nli.NLI3.index(p) for p in PRED]
    pred[6] = MISSING  # P2 has no prediction: left out of strict, not counted wrong
    out = run(NanNli().metric(nannli_examples()), pred)
    assert out["strict"] == 0.5 and out["groups_scored"] == 2 and out["n"] == 6
    # Weighted F1 over the six predicted: E 2/2 right (F1 1), C 4/5 (support 3), N 2/3 (support 1).
    assert out["f1"] == pytest.approx((2 * 1.0 + 3 * 0.8 + 1 * 2 / 3) / 6)


def test_heads_choose_the_finest_space_a_head_can_express():
    nan, rte, snli = NanNli(), NegnliRte(), NegnliSnli()
    assert prediction_space(nli.NLI3, nan.spaces(), nan.name) == nli.NLI3
    assert prediction_space(["contradiction", "neutral", "entailment"], nan.spaces(), nan.name) == nli.NLI3
    assert prediction_space(nli.NLI2, nan.spaces(), nan.name) == nli.NLI2
    assert prediction_space(nli.NLI3, rte.spaces(), rte.name) == nli.NLI2
    with pytest.raises(ConfigError, match="cannot be expressed"):
        prediction_space(nli.NLI2, snli.spaces(), snli.name)
    # RoBERTa-MNLI head order (contradiction, neutral, entailment) onto the binary view:
    head = ["contradiction", "neutral", "entailment"]
    assert head_to_benchmark(head, nli.NLI2, "nannli").tolist() == [1, 1, 0]
    with pytest.raises(ConfigError, match="scores predictions in"):
        snli.scorer([], nli.NLI2)


def test_real_nannli_all_contradiction():
    """Every NaN-NLI pair predicted contradiction: values from the label counts 97/117/44."""
    import os

    if not os.environ.get("NEGTRAIN_DATA_DIR"):
        pytest.fail("set NEGTRAIN_DATA_DIR to the shared data mirror")
    bench = NanNli()
    ex = bench.load("test")
    out = run(bench.metric(ex), [nli.NLI3.index("contradiction")] * len(ex))
    assert out["f1/contradiction"] == pytest.approx(2 * 117 / (2 * 117 + 141))
    assert out["f1/entailment"] == 0 and out["f1/neutral"] == 0
    assert out["f1"] == pytest.approx(117 / 258 * 234 / 375)
    assert out["binary_f1/not_entailment"] == pytest.approx(322 / 419)
    assert out["binary_f1"] == pytest.approx(161 / 258 * 322 / 419)
    assert out["error_rate/construction/not + quantifier"] == pytest.approx(
        np.mean([e.label != "contradiction" for e in ex if e.subset == "not + quantifier"])
    )
