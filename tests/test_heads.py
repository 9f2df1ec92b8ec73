"""Label mapping between model heads and benchmarks, by name, never by position."""

from __future__ import annotations

import math

import pytest
import torch

from negtrain.errors import ConfigError
from negtrain.models.heads import checkpoint_labels, choose_head_labels, head_to_benchmark, set_loss, target_mask

ROBERTA_MNLI = {0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"}


def test_checkpoint_labels_follow_id2label_order():
    assert checkpoint_labels(ROBERTA_MNLI) == ["contradiction", "neutral", "entailment"]
    assert checkpoint_labels({0: "LABEL_0", 1: "LABEL_1"}) is None


def test_three_way_head_predicts_two_way_benchmark():
    head = ["contradiction", "neutral", "entailment"]
    mapping = head_to_benchmark(head, ("entailment", "not_entailment"), "scone")
    assert mapping.tolist() == [1, 1, 0]


def test_two_way_head_cannot_predict_three_way_benchmark():
    with pytest.raises(ConfigError, match="cannot predict"):
        head_to_benchmark(["entailment", "not_entailment"], ("entailment", "neutral", "contradiction"), "x")


def test_target_sets():
    head = ["contradiction", "neutral", "entailment"]
    mask = target_mask(["not_entailment", "entailment", "neutral"], head)
    assert mask.tolist() == [[True, True, False], [False, False, True], [False, True, False]]
    two = target_mask(["contradiction", "entailment"], ["entailment", "not_entailment"])
    assert two.tolist() == [[False, True], [True, False]]


def test_set_loss_is_minus_log_of_the_target_mass():
    logits = torch.log(torch.tensor([[0.2, 0.3, 0.5]]))
    targets = torch.tensor([[True, True, False]])
    assert set_loss(logits, targets).item() == pytest.approx(-math.log(0.5), rel=1e-6)


def test_fresh_head_size_from_training_data():
    assert choose_head_labels(None, None, [("entailment", "not_entailment")]) == ["entailment", "not_entailment"]
    assert choose_head_labels(None, None, [("entailment", "not_entailment"), ("entailment", "neutral", "contradiction")]) == [
        "entailment",
        "neutral",
        "contradiction",
    ]
    assert choose_head_labels(["Entailment", "non-entailment"], None, []) == ["entailment", "not_entailment"]
