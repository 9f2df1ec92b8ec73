"""The held-out masked-LM numbers against hand-computed values: per-example sums from logits,
then pooled over examples (a missing example, a padded duplicate, any order)."""

from __future__ import annotations

import math

import pytest
import torch

from negtrain.metrics.mlm import HeldOutMLMMetric
from negtrain.objectives.cue_masking import heldout_mlm
from negtrain.data.collate import IGNORE

# Vocabulary of 3, two examples of 3 positions. Position 0 is never masked.
LOGITS = torch.tensor(
    [
        [[0.0, 0.0, 0.0], [2.0, 0.0, 0.0], [0.0, 1.0, 0.0]],  # masked: pos 1 (a cue, label 0: right), pos 2 (label 2: wrong)
        [[0.0, 0.0, 0.0], [0.0, 0.0, 3.0], [5.0, 0.0, 0.0]],  # masked: pos 1 (a cue, label 1: wrong); pos 2 not masked
    ]
)
BATCH = {
    "input_ids": torch.zeros(2, 3, dtype=torch.long),
    "attention_mask": torch.ones(2, 3, dtype=torch.long),
    "labels": torch.tensor([[IGNORE, 0, 2], [IGNORE, 1, IGNORE]]),
    "cue_positions": torch.tensor([[False, True, False], [False, True, False]]),
}
# Cross-entropy by hand: -log softmax(logits)[label].
CE_0 = math.log(1 + 2 * math.exp(-2)) + math.log(math.e + 2)
CE_1 = math.log(2 + math.exp(3))


class FixedLogits:
    """Stands in for the masked-LM module: heldout_mlm only asks it for logits."""

    def logits(self, input_ids, attention_mask):
        return LOGITS


def test_per_example_sums_from_logits():
    values = heldout_mlm(FixedLogits(), BATCH)
    expected = torch.tensor([[CE_0, 2, 1, 1], [CE_1, 1, 0, 1]], dtype=torch.float32)
    assert torch.allclose(values, expected, atol=1e-5), values


def test_pooled_over_tokens_not_averaged_over_examples():
    metric = HeldOutMLMMetric(num_examples=2)
    metric.update(torch.tensor([0, 1]), heldout_mlm(FixedLogits(), BATCH))
    got = {k: float(v) for k, v in metric.compute().items()}
    # Token-weighted: (CE_0 + CE_1) / 3 tokens, not the mean of per-example means.
    assert got["mlm_loss"] == pytest.approx((CE_0 + CE_1) / 3, abs=1e-5)
    assert got["mlm_loss"] != pytest.approx((CE_0 / 2 + CE_1) / 2, abs=1e-3)
    assert got["cue_recovery_accuracy"] == 0.5
    assert (got["n_masked"], got["n_cues"]) == (3, 2)
    assert metric.last_predictions is None  # no label predictions to write


def test_missing_example_duplicate_and_order():
    values = heldout_mlm(FixedLogits(), BATCH)
    metric = HeldOutMLMMetric(num_examples=3)  # example 2 is never evaluated
    # As two shards would deliver them: reversed, and example 0 again as a sampler's padding.
    metric.update(torch.tensor([1]), values[1:])
    metric.update(torch.tensor([0, 0]), torch.stack([values[0], values[0]]))
    got = {k: float(v) for k, v in metric.compute().items()}
    assert got["mlm_loss"] == pytest.approx((CE_0 + CE_1) / 3, abs=1e-5)
    assert (got["n_masked"], got["n_cues"], got["cue_recovery_accuracy"]) == (3, 2, 0.5)


def test_nothing_masked_is_nan_not_zero():
    metric = HeldOutMLMMetric(num_examples=2)
    got = {k: float(v) for k, v in metric.compute().items()}
    assert math.isnan(got["mlm_loss"]) and math.isnan(got["cue_recovery_accuracy"])
    from negtrain.objectives.cue_masking import CueCorpus

    assert CueCorpus.is_higher_better("cue_recovery_accuracy")
    assert not CueCorpus.is_higher_better("mlm_loss")
