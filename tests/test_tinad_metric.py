"""TINAD: the reader and the coherence metric on hand-written groups (values computed by hand)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from negtrain.benchmarks.registry import get_benchmark
from negtrain.benchmarks.tinad import LABELS
from negtrain.core.errors import DataError
from negtrain.metrics.base import MISSING
from tinad_fixture import row, write_split

T, F = True, False
OTHER_NEG = ("non_verbal", "synthetic", "subclausal")

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
    assert out["accuracy/non_verbal"] == 0.0 and out["accuracy/synthetic"] == 0.0
    assert out["accuracy/verbal"] == 1.0 and out["accuracy/clausal"] == 1.0
    assert out["accuracy/negation"] == pytest.approx(11 / 13)


def test_accuracy_per_pattern_by_hand(tinad):
    """Figure 2's accuracy per pattern: every sentence of the pattern (affirmative and negated,
    with and without a distractor), by its own pattern_id."""
    bench, examples = tinad
    out = bench.metric(examples).score(predictions([p for _, p in CASES]))
    # pattern 1: A (4 right), C (5, c1-skipped wrong), D (5, d1b wrong), G (3 right) -> 15 / 17
    assert out["accuracy/pattern/01"] == pytest.approx(15 / 17)
    assert out["accuracy/pattern/02"] == 1.0  # B, all right
    assert out["accuracy/pattern/03"] == 0.0  # E, every answer wrong: a real 0
    assert out["accuracy/pattern/04"] == pytest.approx(3 / 4)  # F, one wrong member (f3)
    # Patterns #05 to #11 are absent from the data: not reported (undefined), never 0.
    assert out.get("accuracy/pattern/05") is None
    assert sorted(k for k in out if k.startswith("accuracy/pattern/")) == [f"accuracy/pattern/0{p}" for p in (1, 2, 3, 4)]
    # A pattern present but without any prediction is NaN, not 0.
    preds = predictions([p for _, p in CASES])
    preds[[i for i, (r, _) in enumerate(CASES) if r["pattern_id"] == 2]] = MISSING
    assert math.isnan(bench.metric(examples).score(preds)["accuracy/pattern/02"])
    declared = bench.declared_in(LABELS)
    from negtrain.metrics.declared import find

    found = find(declared, "accuracy/pattern/01")
    assert found is not None and found.name == "accuracy/pattern/<NN>"
    assert found.higher_is_better and found.role == "score" and bench.is_count("accuracy/pattern/01") is False


def test_accuracy_per_pattern_merged_from_two_shards_equals_one_process(tinad):
    """Two DDP ranks each score part of the split (one example on both, as a padded last batch
    repeats it); merging their states as a DDP sync gathers them gives the one-process values."""
    bench, examples = tinad
    preds = torch.as_tensor(predictions([p for _, p in CASES]))
    n = len(CASES)
    single = bench.metric(examples)
    single.update(torch.arange(n), preds)
    reference = {k: float(v) for k, v in single.compute().items()}
    shards = [torch.arange(0, n, 2), torch.cat([torch.arange(1, n, 2), torch.tensor([0])])]
    merged = bench.metric(examples)
    for idx in shards:
        rank = bench.metric(examples)
        rank.update(idx, preds[idx])
        merged.merge_state(rank)
    values = {k: float(v) for k, v in merged.compute().items()}
    assert values["accuracy/pattern/01"] == pytest.approx(15 / 17) and values["n"] == n
    assert values.keys() == reference.keys()
    assert all(values[k] == pytest.approx(reference[k], nan_ok=True) for k in reference)
    # One shard alone is not the whole: pattern 1 on the even rows only.
    alone = bench.metric(examples)
    alone.update(shards[0], preds[shards[0]])
    assert float(alone.compute()["n"]) < n


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


def test_the_authors_counts_by_hand(tinad):
    """Confusion counts (gold True is positive) and coherent/incoherent groups, on the whole split
    and per pattern; an unparsed answer is wrong: FN for a gold True, FP for a gold False."""
    from negtrain.metrics.base import UNPARSED

    bench, examples = tinad
    preds = predictions([p for _, p in CASES])
    out = bench.metric(examples).score(preds)
    # E (pattern 3) all wrong: e1 (gold T) and e4 (gold T) FN, e2 and e3 (gold F) FP; E is coherent
    assert [out[f"pattern/03/confusion/all/{c}"] for c in ("TP", "FP", "FN", "TN")] == [0, 2, 2, 0]
    assert out["pattern/03/coherent/all"] == 1 and out["pattern/03/incoherent/all"] == 0
    assert out["pattern/03/confusion/non_verbal/FP"] == 1 and out["pattern/03/confusion/non_verbal_input/FP"] == 1
    assert out["pattern/03/confusion/non_verbal_distractor/FN"] == 1
    # 29 sentences, 22 right: the four counts add up, TP + TN being the right ones
    counts = [out[f"confusion/all/{c}"] for c in ("TP", "FP", "FN", "TN")]
    assert sum(counts) == 29 and counts[0] + counts[3] == 22
    # 6 groups scored, 3 coherent (A, B, E); input coherence 5 of 6
    assert (out["coherent/all"], out["incoherent/all"], out["coherent/input"], out["incoherent/input"]) == (3, 3, 5, 1)
    # pattern 1's G lacks a cell: pattern 1 scores A, C, D, of which A is coherent
    assert (out["pattern/01/coherent/all"], out["pattern/01/incoherent/all"]) == (1, 2)
    assert out["pattern/01/coherence"] == pytest.approx(1 / 3)
    preds[0] = UNPARSED  # a1, gold True: from TP to FN
    again = bench.metric(examples).score(preds)
    assert again["confusion/all/TP"] == out["confusion/all/TP"] - 1 and again["confusion/all/FN"] == out["confusion/all/FN"] + 1
