"""GroupedAccuracy / ScoNe metrics on hand-written cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from negtrain.metrics.base import MISSING
from negtrain.metrics.grouped import GroupedAccuracy

# Two contrast sets of three members, subsets a/b/c; gold labels 0/1.
GOLD = [0, 1, 0, 1, 1, 0]
SUBSETS = ["a", "b", "c", "a", "b", "c"]
GROUPS = ["g1", "g1", "g1", "g2", "g2", "g2"]


def metric(**kw) -> GroupedAccuracy:
    return GroupedAccuracy(GOLD, SUBSETS, GROUPS, **kw)


def test_all_right():
    m = metric()
    m.update(torch.arange(6), torch.tensor(GOLD))
    out = {k: float(v) for k, v in m.compute().items()}
    assert out["accuracy"] == 1.0 and out["consistency"] == 1.0 and out["groups_scored"] == 2


def test_one_wrong_member_breaks_only_its_group():
    preds = list(GOLD)
    preds[4] = 0  # g2, subset b, wrong
    m = metric()
    m.update(torch.arange(6), torch.tensor(preds))
    out = {k: float(v) for k, v in m.compute().items()}
    assert out["accuracy"] == pytest.approx(5 / 6)
    assert out["accuracy/b"] == pytest.approx(1 / 2)
    assert out["accuracy/a"] == 1.0 and out["accuracy/c"] == 1.0
    assert out["consistency"] == pytest.approx(1 / 2)


def test_missing_member_leaves_group_out_of_consistency():
    m = metric()
    # g1 complete and right; g2 lacks index 5.
    m.update(torch.tensor([0, 1, 2, 3, 4]), torch.tensor(GOLD[:5]))
    out = {k: float(v) for k, v in m.compute().items()}
    assert out["groups_scored"] == 1
    assert out["consistency"] == 1.0
    assert out["n"] == 5
    assert out["accuracy/c"] == 1.0  # only index 2 scored in subset c


def test_duplicates_from_padding_count_once():
    m = metric()
    m.update(torch.tensor([0, 1, 2, 3, 4, 5, 0, 1]), torch.tensor(GOLD + GOLD[:2]))
    out = {k: float(v) for k, v in m.compute().items()}
    assert out["n"] == 6 and out["accuracy"] == 1.0


def test_required_group_size_excludes_short_groups():
    gold = [1, 1, 1, 1, 1]
    m = GroupedAccuracy(gold, groups=["x", "x", "x", "y", "y"], group_size=3)
    m.update(torch.arange(5), torch.tensor([1, 1, 1, 1, 1]))
    out = {k: float(v) for k, v in m.compute().items()}
    assert out["groups_scored"] == 1 and out["consistency"] == 1.0


def test_nothing_predicted_gives_nan_not_zero():
    scores = metric().score(np.full(6, MISSING))
    assert math.isnan(scores["accuracy"]) and math.isnan(scores["consistency"])
    assert scores["n"] == 0
