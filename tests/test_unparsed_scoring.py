"""A response no answer rule could read (UNPARSED) is predicted and wrong, never dropped: checked
on hand-computed cases, for the metric and for a predictions file scored by ``evaluate``."""

from __future__ import annotations

import json

import pytest
import torch

from negtrain.evaluation.predictions import PredictionError, score_file
from negtrain.metrics.base import MISSING, UNPARSED
from negtrain.metrics.grouped import GroupedAccuracy

# Two contrast sets of three members; gold labels 0/1.
GOLD = [0, 1, 0, 1, 1, 0]
GROUPS = ["g1", "g1", "g1", "g2", "g2", "g2"]


def _scores(predictions: list[int], counts_unparsed: bool) -> dict[str, float]:
    m = GroupedAccuracy(GOLD, None, GROUPS)
    m.counts_unparsed = counts_unparsed
    m.update(torch.arange(6), torch.tensor(predictions))
    return {k: float(v) for k, v in m.compute().items()}


def test_an_unparsed_answer_is_scored_wrong_and_counted():
    # 1: unparsed (g1 has every member predicted, one wrong); 5: no prediction (g2 left out).
    out = _scores([0, UNPARSED, 0, 1, 1, MISSING], counts_unparsed=True)
    assert out["n"] == 5  # the unparsed answer is an answer; the missing one is not
    assert out["accuracy"] == pytest.approx(4 / 5)
    assert out["groups_scored"] == 1 and out["consistency"] == 0.0
    assert out["n_unparsed"] == 1


def test_n_unparsed_only_where_answers_are_generated():
    assert "n_unparsed" not in _scores(GOLD, counts_unparsed=False)
    assert _scores(GOLD, counts_unparsed=True)["n_unparsed"] == 0


def _write(path, lines):
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


def test_a_predictions_file_with_an_unparsed_line_scores_it_wrong(data_dir, tmp_path):
    # CondaQA test ids with gold answers NO, NO, NO, YES.
    path = _write(tmp_path / "p.jsonl", [
        {"id": "condaqa/test/6876", "prediction": "NO", "unparsed": False},  # right
        {"id": "condaqa/test/6879", "prediction": "YES", "unparsed": False},  # wrong
        {"id": "condaqa/test/6883", "prediction": None, "unparsed": True},  # unreadable: wrong
        {"id": "condaqa/test/6885", "prediction": "YES", "unparsed": False},  # right
    ])
    scored = score_file("condaqa", "test", path, allow_missing=True, bootstrap=0)
    assert scored.metrics["n"] == 4 and scored.metrics["n_unparsed"] == 1
    assert scored.metrics["accuracy"] == pytest.approx(2 / 4)


def test_a_null_prediction_not_marked_unparsed_is_an_error(data_dir, tmp_path):
    path = _write(tmp_path / "p.jsonl", [{"id": "condaqa/test/6876", "prediction": None}])
    with pytest.raises(PredictionError, match=r"p.jsonl:1: prediction None is not"):
        score_file("condaqa", "test", path, allow_missing=True, bootstrap=0)
