"""TINAD: the reader and the coherence metric on hand-written groups (values computed by hand)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from negtrain.benchmarks.registry import get_benchmark
from negtrain.benchmarks.tinad import LABELS
from negtrain.core.errors import DataError
from negtrain.metrics.base import MISSING
from tinad_fixture import row, write_split

T, F = True, False
OTHER_NEG = ("non-verbal", "synthetic", "subclausal")

# (row, predicted label) for each sentence, group by group; the comments give the expected checks
# as (input, distractor, coherence, affirmation, negation).
CASES = [
    # A, pattern 1, all right: (1, 1, 1, 1, 1)
    (row(1, 1, "input_affirmation", T, "a1"), T),
    (row(1, 1, "input_negation", F, "a2"), F),
    (row(1, 1, "distractor_affirmation", F, "a3"), F),
    (row(1, 1, "distractor_negation", T, "a4"), T),
    # B, antonymy pattern 2 (input references swapped), all right: A == DA and N == DN -> (1, 1, 1, 1, 1)
    (row(2, 2, "input_affirmation", F, "b1"), F),
    (row(2, 2, "input_negation", T, "b2"), T),
    (row(2, 2, "distractor_affirmation", F, "b3"), F),
    (row(2, 2, "distractor_negation", T, "b4"), T),
    # C, pattern 1, a skipped input-affirmation sentence (gold False != reference True) predicted
    # wrong: the cell checks hold, but not all-right-or-all-wrong -> (1, 1, 0, 1, 1)
    (row(3, 1, "input_affirmation", T, "c1"), T),
    (row(3, 1, "input_affirmation", F, "c1-skipped"), T),
    (row(3, 1, "input_negation", F, "c2"), F),
    (row(3, 1, "distractor_affirmation", F, "c3"), F),
    (row(3, 1, "distractor_negation", T, "c4"), T),
    # D, pattern 1, the two input-affirmation sentences disagree -> (0, 1, 0, 0, 1)
    (row(4, 1, "input_affirmation", T, "d1"), T),
    (row(4, 1, "input_affirmation", T, "d1b"), F),
    (row(4, 1, "input_negation", F, "d2"), F),
    (row(4, 1, "distractor_affirmation", F, "d3"), F),
    (row(4, 1, "distractor_negation", T, "d4"), T),
    # E, pattern 3, every answer wrong but consistently so -> (1, 1, 1, 1, 1)
    (row(5, 3, "input_affirmation", T, "e1"), F),
    (row(5, 3, "input_negation", F, "e2", neg=OTHER_NEG), T),
    (row(5, 3, "distractor_affirmation", F, "e3"), T),
    (row(5, 3, "distractor_negation", T, "e4", neg=OTHER_NEG), F),
    # F, antonymy pattern 4, distractor-affirmation wrong: DA == DN, and A != DA -> (1, 0, 0, 0, 1)
    (row(6, 4, "input_affirmation", F, "f1"), F),
    (row(6, 4, "input_negation", T, "f2"), T),
    (row(6, 4, "distractor_affirmation", F, "f3"), T),
    (row(6, 4, "distractor_negation", T, "f4"), T),
    # G, pattern 1, no distractor-negation sentence: counted in groups_lacking_cell, not scored
    (row(7, 1, "input_affirmation", T, "g1"), T),
    (row(7, 1, "input_negation", F, "g2"), F),
    (row(7, 1, "distractor_affirmation", F, "g3"), F),
]


@pytest.fixture()
def tinad(tmp_path, monkeypatch):
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("NEGTRAIN_OFFLINE", "1")
    write_split(tmp_path, "validation", [r for r, _ in CASES])
    bench = get_benchmark("tinad")
    return bench, bench.load("validation")


def predictions(preds) -> np.ndarray:
    return np.array([LABELS.index("True" if p else "False") for p in preds], dtype=np.int64)


def test_reader_ids_cells_and_groups(tinad):
    bench, examples = tinad
    assert len(examples) == len(CASES)
    assert examples[0].id == "tinad/validation/0" and examples[-1].id == f"tinad/validation/{len(CASES) - 1}"
    assert [e.subset for e in examples[:4]] == ["input_affirmation", "input_negation", "distractor_affirmation", "distractor_negation"]
    assert examples[4].group == "tinad/validation/2" and examples[4].label == "False"


def test_coherence_by_hand(tinad):
    bench, examples = tinad
    out = bench.metric(examples).score(predictions([p for _, p in CASES]))
    assert out["groups_scored"] == 6 and out["groups_lacking_cell"] == 1
    assert out["coherence/input"] == pytest.approx(5 / 6)
    assert out["coherence/distractor"] == pytest.approx(5 / 6)
    assert out["coherence"] == pytest.approx(3 / 6)
    assert out["coherence/affirmation"] == pytest.approx(4 / 6)
    assert out["coherence/negation"] == pytest.approx(6 / 6)
    # 29 sentences, 22 right (E all wrong; one wrong in each of C, D, F).
    assert out["accuracy"] == pytest.approx(22 / 29) and out["n"] == 29
    assert out["accuracy/distractor_affirmation"] == pytest.approx(5 / 7)
    assert out["accuracy/input_affirmation"] == pytest.approx(6 / 9)  # A B C C D D E F G
    assert out["accuracy/non-verbal"] == 0.0 and out["accuracy/synthetic"] == 0.0
    assert out["accuracy/verbal"] == 1.0 and out["accuracy/clausal"] == 1.0
    assert out["accuracy/negation"] == pytest.approx(11 / 13)


def test_unpredicted_group_is_left_out(tinad):
    bench, examples = tinad
    preds = predictions([p for _, p in CASES])
    preds[0] = MISSING  # group A loses one sentence
    out = bench.metric(examples).score(preds)
    assert out["groups_scored"] == 5
    assert out["coherence"] == pytest.approx(2 / 5)
    assert out["n"] == 28


def test_group_lacking_every_cell_never_crashes(tinad):
    bench, examples = tinad
    out = bench.metric(examples).score(np.full(len(examples), MISSING))
    assert math.isnan(out["coherence"]) and out["groups_scored"] == 0


def test_bad_row_is_reported_with_its_line(tmp_path, monkeypatch):
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("NEGTRAIN_OFFLINE", "1")
    bad = row(1, 1, "input_affirmation", T, "x")
    bad["isDistractor"] = "maybe"
    write_split(tmp_path, "train", [row(1, 1, "input_negation", F, "y"), bad])
    with pytest.raises(DataError, match=r"train.jsonl:2: field 'isDistractor'"):
        get_benchmark("tinad").load("train")


def test_missing_split_says_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("NEGTRAIN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("NEGTRAIN_OFFLINE", "1")
    with pytest.raises(DataError, match="HiTZ/This-is-not-a-dataset/test.jsonl"):
        get_benchmark("tinad").load("test")
