"""Label mapping between model heads and benchmarks, by name, never by position."""

from __future__ import annotations

import math

import pytest
import torch

from negtrain.core.errors import ConfigError
from negtrain.models.heads import checkpoint_labels, choose_head_labels, head_to_benchmark, set_loss, target_mask
from tiny_models import save_tiny_bert_nli, write_recipe

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


def _checkpoint_with_head(out, id2label, fill: float):
    """A tiny BERT classifier whose head weights are all ``fill`` and whose labels are ``id2label``."""
    from transformers import AutoConfig, BertForSequenceClassification

    path = save_tiny_bert_nli(out)
    config = AutoConfig.from_pretrained(path)
    config.id2label, config.label2id = id2label, {v: k for k, v in id2label.items()}
    model = BertForSequenceClassification.from_pretrained(path, config=config)
    with torch.no_grad():
        model.classifier.weight.fill_(fill)
        model.classifier.bias.fill_(fill)
    model.save_pretrained(path)
    return path


def _built_head(tmp_path, monkeypatch, model):
    from negtrain.recipes import load_recipe
    from negtrain.training.build import build

    monkeypatch.setenv("NEGTRAIN_CACHE_DIR", str(tmp_path / "cache"))
    recipe = {
        "description": "head test",
        "model": {"name": str(model), "family": "nli", "max_length": 32, "head_labels": ["entailment", "not_entailment"]},
        "data": {"train": [{"benchmark": "monli", "split": "test"}], "eval": [{"benchmark": "monli", "split": "test"}]},
    }
    return build(load_recipe(str(write_recipe(tmp_path / "r.yaml", recipe))).recipe).module.model.classifier


def test_a_same_sized_head_without_nli_labels_is_replaced(tmp_path, monkeypatch, data_dir, capsys):
    # LABEL_0/LABEL_1 say nothing about NLI: the head was trained for something else. Its size
    # matches the new 2-way head, so from_pretrained would keep it; it must be a fresh head.
    model = _checkpoint_with_head(tmp_path / "m", {0: "LABEL_0", 1: "LABEL_1"}, fill=5.0)
    head = _built_head(tmp_path, monkeypatch, model)
    assert not (head.weight == 5.0).any()
    assert (head.bias == 0).all()
    assert 0.2 < float(head.weight.std()) < 0.4  # the checkpoint's initializer_range, 0.3
    assert "fresh 2-way head replaces ['classifier']" in capsys.readouterr().out


def test_a_head_with_nli_labels_is_kept(tmp_path, monkeypatch, data_dir):
    model = _checkpoint_with_head(tmp_path / "m", {0: "entailment", 1: "not_entailment"}, fill=5.0)
    head = _built_head(tmp_path, monkeypatch, model)
    assert (head.weight == 5.0).all() and (head.bias == 5.0).all()


def test_a_label_named_twice_is_rejected():
    with pytest.raises(ConfigError, match="names one label twice"):
        choose_head_labels(["entailment", "Entailment", "contradiction"], None, [])
