"""NaN-NLI's analysis tables as the paper prints them (Truong et al. 2022): Table 8's nine merged
constructions, Table 9's ten operations (Quantification is not one), Table 10's F1 on NaN-Quant,
Table 13's macro-averaged precision / recall / F1 by negation type, and Table 6's class order
(Contradiction, Entailment, Neutral). Hand-computed on a seven-pair fixture, and counted on the
mirrored file."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from negtrain.core import labels as nli
from negtrain.benchmarks.base import Example
from negtrain.benchmarks.nannli import F1_ORDER, OPERATIONS, NanNli

from test_nli_metrics import GOLD, OPS, PRED, PREMISE

RAW = ["not + auxillary", "not + auxillary", "not + auxillary", "absolute negator", "absolute negator",
       "approximate negator", "approximate negator"]
QUANT = [True, True, False, False, True, False, True]
TYPES = [("hypothesis/None",), ("premise/Verbal",), ("premise/Verbal",), ("hypothesis/None",), (),
         ("premise/Verbal",), ("hypothesis/None",)]


def _examples() -> list[Example]:
    return [Example(f"nannli/test/{i}", ("p", "h"), GOLD[i], subset=RAW[i], group=f"nannli/test/premise/{PREMISE[i]}",
                    meta={"operations": OPS[i], "quantification": QUANT[i], "negation_types": TYPES[i]})
            for i in range(len(GOLD))]


def _scored(examples, predicted) -> dict[str, float]:
    metric = NanNli().metric(examples)
    metric.update(torch.arange(len(examples)), torch.tensor([nli.NLI3.index(p) for p in predicted]))
    return {k: float(v) for k, v in metric.compute().items()}


def test_table_6_orders_the_classes_c_e_n():
    assert F1_ORDER == ("contradiction", "entailment", "neutral")


def test_tables_8_10_13_by_hand():
    out = _scored(_examples(), PRED)
    # Table 8: absolute (3, 4) and approximate (5, 6) negators are one row; 4 and 6 are wrong.
    assert out["error_rate/construction/Absolute and approximate negator"] == pytest.approx(2 / 4)
    assert "error_rate/construction/absolute negator" not in out
    # a construction that is none of the paper's nine keeps its name, after them
    constructions = [k for k in out if k.startswith("error_rate/construction/")]
    assert constructions == ["error_rate/construction/Absolute and approximate negator", "error_rate/construction/not + auxillary"]
    assert out["error_rate/construction/not + auxillary"] == 0.0
    # Table 9: no "Quantification" operation
    assert not any(k.endswith("/Quantification") for k in out)
    # Table 10, NaN-Quant = pairs 0, 1, 4, 6: gold E C C N, predicted E C N E.
    # C: TP 1, FN 1 -> 2/3; E: TP 1, FP 1 -> 2/3; N: TP 0 -> 0. Their macro mean (Table 10's
    # NaN-Quant "All"): 4/9; weighted by support 2, 1, 1 it would be 0.5.
    assert out["quant/f1/contradiction"] == pytest.approx(2 / 3)
    assert out["quant/f1/entailment"] == pytest.approx(2 / 3)
    assert out["quant/f1/neutral"] == 0.0
    assert out["quant/macro_f1"] == pytest.approx(4 / 9)
    assert "quant/f1" not in out
    # Table 13, hypothesis None = pairs 0, 3, 6: gold E E N, predicted E E E. Classes present: E, N.
    # E: P 2/3, R 1, F1 0.8; N: P 0 (never predicted), R 0, F1 0. Macro: 1/3, 1/2, 0.4.
    assert out["macro_precision/hypothesis/None"] == pytest.approx(1 / 3)
    assert out["macro_recall/hypothesis/None"] == pytest.approx(1 / 2)
    assert out["macro_f1/hypothesis/None"] == pytest.approx(0.4)
    # premise Verbal = pairs 1, 2, 5: gold C N C, predicted C N C: all right.
    assert out["macro_f1/premise/Verbal"] == 1.0 and out["macro_precision/premise/Verbal"] == 1.0
    assert "macro_f1/premise/Synthetic" not in out  # no such pair


def test_table_13_equals_scikit_learns_macro_average():
    metrics = pytest.importorskip("sklearn.metrics")
    import numpy as np

    rng = np.random.default_rng(1)
    gold = [nli.NLI3[i] for i in rng.integers(0, 3, 40)]
    pred = [nli.NLI3[i] for i in rng.integers(0, 2, 40)]  # neutral never predicted
    examples = [Example(f"nannli/test/{i}", ("p", "h"), gold[i], subset="not + pp", group=f"g{i // 4}",
                        meta={"operations": (), "quantification": False, "negation_types": ("premise/Analytic",)})
                for i in range(40)]
    out = _scored(examples, pred)
    p, r, f, _ = metrics.precision_recall_fscore_support(gold, pred, average="macro", zero_division=0)
    assert (out["macro_precision/premise/Analytic"], out["macro_recall/premise/Analytic"], out["macro_f1/premise/Analytic"]) == \
        pytest.approx((p, r, f))


def test_the_mirrored_file_gives_the_papers_rows():
    ex = NanNli().load("test")
    assert sum(e.meta["quantification"] for e in ex) == 133  # §5.2: "over half of the samples (133)"
    assert sum("hypothesis/None" in e.meta["negation_types"] for e in ex) == 86
    assert sum("premise/Verbal" in e.meta["negation_types"] for e in ex) == 9
    assert list(OPERATIONS.values())[-1] == "Syntactic change" and len(OPERATIONS) == 10
    out = _scored(ex, ["contradiction"] * len(ex))
    merged = [k.split("/", 2)[2] for k in out if k.startswith("error_rate/construction/")]
    assert merged[:9] == ["not + quantifier", "not + focus particle", "not + degree expression",
                          "not + affixially-negated adjective/adverb", "not + PP", "Absolute and approximate negator",
                          "not in verbless clause", "not in coordination", "not in implicit proposition"]
    assert sorted(merged[9:]) == ["not + auxillary", "verbal vs affixal negation"]
    counts = Counter(e.subset for e in ex)
    wrong = Counter(e.subset for e in ex if e.label != "contradiction")
    affixal = ("not + affixially negated gradable adjective", "not + affixially negated adverb")
    assert counts[affixal[0]] + counts[affixal[1]] == 26  # 11 of 26 is Table 8's 0.423
    assert out["error_rate/construction/not + affixially-negated adjective/adverb"] == pytest.approx(
        (wrong[affixal[0]] + wrong[affixal[1]]) / 26)
    assert [k.split("/", 2)[2] for k in out if k.startswith("error_rate/operation/")] == list(OPERATIONS.values())
