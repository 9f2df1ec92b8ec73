"""The objective table and the eval set as the one owner of a benchmark split's evaluation state."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import torch

from negtrain.benchmarks.base import Example
from negtrain.benchmarks.registry import get_benchmark
from negtrain.config import ObjectiveConfig
from negtrain.data.encoded import EncodedSplit
from negtrain.data.eval_set import EvalResult, EvalSet
from negtrain.metrics.base import MISSING
from negtrain.models.base import NegtrainModule
from negtrain.objectives.base import Objective
from negtrain.objectives.table import OBJECTIVES, objective_for

EXAMPLES = [Example(f"e{i}", ("p", "h"), label) for i, label in enumerate(["entailment", "not_entailment", "entailment"])]


def test_every_objective_section_has_exactly_one_table_row():
    # A section without a row would validate and then fail to build; a row without a section
    # could never be chosen.
    assert set(OBJECTIVES) == set(ObjectiveConfig.model_fields)
    assert all(issubclass(cls, Objective) for cls in OBJECTIVES.values())


def test_the_recipe_section_picks_its_objective_with_its_settings():
    cfg = ObjectiveConfig.model_validate({"unlikelihood": {"gamma": 0.3}})
    objective = objective_for(cfg)
    assert type(objective).__name__ == "Unlikelihood" and objective.settings.gamma == 0.3
    assert objective_for(ObjectiveConfig.model_validate({"cue_masking": {}})).multi_token_objects == "reject"


def _eval_set(split: str = "test", **kw) -> EvalSet:
    bench = get_benchmark("monli")
    encoded = EncodedSplit.from_lists([[1, 2], [1, 2, 3], [4]], None)
    return EvalSet(bench, split, EXAMPLES, encoded, metric=bench.scorer(EXAMPLES), **kw)


class _Constant(NegtrainModule):
    """Predicts the eval set's label map of class 0 for every example."""

    def training_loss(self, batch):
        raise NotImplementedError

    def predict(self, batch, eval_set):
        return eval_set.label_map_on(batch["index"].device)[torch.zeros_like(batch["index"])]


def test_the_module_scores_each_eval_set_through_its_own_metric_and_label_map(tmp_path):
    a = _eval_set("test", label_map=torch.tensor([0, 1]))
    b = _eval_set("train", label_map=torch.tensor([1, 0]))
    module = _Constant(config=None, eval_sets=[a, b])
    # Registered as children by name: Lightning moves them to the device and DDP syncs them.
    assert dict(module.metrics.items()) == {"monli/test": a.metric, "monli/train": b.metric}
    module.log = lambda *args, **kwargs: None  # outside a Trainer
    for i in (0, 1):
        module.validation_step({"index": torch.tensor([0, 1])}, 0, dataloader_idx=i)
    module._finish_evaluation()
    assert a.result.name == "monli/test" and a.result.predictions.tolist() == [0, 0, MISSING]
    assert b.result.predictions.tolist() == [1, 1, MISSING]
    b.write_predictions(tmp_path, "epoch3")
    rows = [json.loads(line) for line in (tmp_path / "predictions" / "monli-train-epoch3.jsonl").read_text().splitlines()]
    assert rows == [{"id": "e0", "prediction": "not_entailment", "label": "entailment"},
                    {"id": "e1", "prediction": "not_entailment", "label": "not_entailment"}]


def test_an_eval_set_named_twice_is_refused():
    with pytest.raises(ValueError, match="named twice"):
        _Constant(config=None, eval_sets=[_eval_set(), _eval_set()])


def test_a_copy_of_the_module_shares_its_eval_sets():
    # EMA's averaged model deep-copies the module: the encoded examples must not be duplicated.
    s = _eval_set()
    module = _Constant(config=None, eval_sets=[s])
    assert copy.deepcopy(module).eval_sets[0] is s


def test_nothing_is_written_without_a_result(tmp_path):
    s = _eval_set()
    s.write_predictions(tmp_path, "test")
    s.result = EvalResult(s.name, {}, None)
    s.write_predictions(tmp_path, "test")
    assert not (tmp_path / "predictions").exists()
    s.result = EvalResult(s.name, {}, np.array([MISSING] * 3))
    s.write_predictions(tmp_path, "test")
    assert (tmp_path / "predictions" / "monli-test-test.jsonl").read_text() == ""
