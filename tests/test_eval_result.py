"""What a run writes per example: the prediction rows shared by predictions files and W&B tables."""

from __future__ import annotations

import numpy as np
import pytest

from negtrain.benchmarks.base import Example
from negtrain.metrics.base import MISSING
from negtrain.data.eval_set import EvalResult

EXAMPLES = [Example(f"e{i}", ("p", "h"), label) for i, label in enumerate(["entailment", "not_entailment", "entailment"])]


def test_label_predictions_index_the_predicted_space_not_the_gold_labels():
    # A 3-way head on a 2-way benchmark: id 2 is 'contradiction', which the 2-way gold labels
    # (entailment, not_entailment) do not have; reading ids through them would crash or mislabel.
    result = EvalResult("monli/test", {}, np.array([0, 2, MISSING]))
    rows = result.predicted(EXAMPLES, ("entailment", "neutral", "contradiction"))
    assert [(ex.id, pred, ok) for ex, pred, ok in rows] == [("e0", "entailment", True), ("e1", "contradiction", False)]


def test_generative_predictions_are_the_generated_texts_with_the_metrics_verdict():
    # Generative benchmarks have no label space: the id says right (1) or wrong (0).
    result = EvalResult("condaqa/test", {}, np.array([1, 0, MISSING]), texts=["yes", "no", None])
    rows = result.predicted(EXAMPLES, ())
    assert [(ex.id, pred, ok) for ex, pred, ok in rows] == [("e0", "yes", True), ("e1", "no", False)]


def test_nothing_to_write():
    assert EvalResult("cue_corpus/heldout", {}, None).predicted(EXAMPLES, ()) == []


def test_metric_values_are_written_as_valid_json():
    import json

    from negtrain.data.eval_set import json_number as _json_number

    values = [_json_number(v) for v in (float("nan"), float("inf"), -float("inf"), 0.12345678)]
    assert values == [None, None, None, 0.123457]
    assert json.loads(json.dumps(values), parse_constant=lambda c: pytest.fail(c)) == values
