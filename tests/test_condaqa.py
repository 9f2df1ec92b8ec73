"""CondaQA: hand-written groups and the real mirrored dev/test files."""

from __future__ import annotations

import json

import numpy as np
import pytest

from negtrain.benchmarks.registry import get_benchmark
from negtrain.metrics.base import MISSING


def _rec(sample, passage, question, edit, label):
    return {"SampleID": sample, "PassageID": passage, "QuestionID": question, "PassageEditID": edit,
            "sentence1": f"passage {passage} edit {edit}", "sentence2": f"question {question}?", "label": label}


@pytest.fixture()
def hand(tmp_path, monkeypatch):
    # G1: four edits, all answered right. G2: four edits, the scope edit answered wrong.
    # G3: the affirmative edit is missing from the data (an incomplete group).
    recs = [_rec(10 + e, 1, "q1", e, "YES") for e in range(4)]
    recs += [_rec(20 + e, 2, "q1", e, "NO") for e in range(4)]
    recs += [_rec(30 + e, 3, "q1", e, "DON'T KNOW") for e in range(3)]
    path = tmp_path / "AbhilashaRavichander/CondaQA/data/condaqa_dev.json"
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(tmp_path))
    bench = get_benchmark("condaqa")
    return bench, bench.load("dev")


def test_answers_compared_lowercased_and_stripped(hand):
    bench, ex = hand
    assert ex[0].id == "condaqa/dev/10" and ex[0].subset == "original" and ex[3].subset == "affirmative"
    assert bench.is_correct("  yes\n", ex[0]) and bench.is_correct("Don't Know", ex[8])
    assert not bench.is_correct("no", ex[0]) and not bench.is_correct("yes.", ex[0])


def test_metric_by_hand(hand):
    bench, ex = hand
    answers = ["yes", "Yes", "YES ", "yes", "no", "no", "yes", "no", "don't know", "don't know", "don't know"]
    correct = np.array([int(bench.is_correct(a, e)) for a, e in zip(answers, ex, strict=False)])
    out = bench.metric(ex).score(correct)
    assert out["accuracy"] == pytest.approx(10 / 11)
    assert out["groups_scored"] == 2  # G3 lacks an edit
    assert out["consistency"] == pytest.approx(1 / 2)
    assert out["consistency/paraphrase"] == 1.0
    assert out["consistency/scope"] == pytest.approx(1 / 2)
    assert out["consistency/affirmative"] == 1.0
    assert out["accuracy/scope"] == pytest.approx(2 / 3)
    assert out["accuracy/affirmative"] == 1.0
    # A complete group with an unpredicted member is left out, not counted wrong.
    correct[1] = MISSING
    out = bench.metric(ex).score(correct)
    assert out["groups_scored"] == 1 and out["consistency"] == 0.0 and out["consistency/paraphrase"] == 1.0


def test_real_test_split_counts():
    bench = get_benchmark("condaqa")
    ex = bench.load("test")
    assert len(ex) == 7240
    out = bench.metric(ex).score(np.ones(len(ex), dtype=np.int64))
    assert out["groups_scored"] == 1402 and out["consistency"] == 1.0
    assert {e.subset for e in ex} == {"original", "paraphrase", "scope", "affirmative"}


def test_real_dev_split_loads():
    bench = get_benchmark("condaqa")
    ex = bench.load("dev")
    assert len(ex) == 1110 and len({e.id for e in ex}) == 1110
    out = bench.metric(ex).score(np.zeros(len(ex), dtype=np.int64))
    assert out["accuracy"] == 0.0 and out["groups_scored"] == 196
