"""Thunder-NUBench (So et al. 2025): rows in the Hub dataset's published schema read into four-way
questions, accuracy and the share of each distractor chosen by hand, a tiny causal LM's choices
through `validate` against one-question-at-a-time scoring, and the one-line errors of a gated Hub
dataset without its files or the user's token."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from negtrain.benchmarks.nubench import CHOICE_TYPES, DATASET, Nubench
from negtrain.core.errors import DataError
from tiny_models import choice_loglikelihoods_one_at_a_time, save_tiny_llama, validate_tiny


def _row(index: int, sentence: str, neg: str, local: str, kind: str, contra: str, para: str) -> dict:
    # the `multiple-choice` configuration's fields, as the dataset card lists them
    return {"wikipedia_index": 100 + index, "index": index, "sentence": sentence, "choice1": neg, "choice2": local,
            "choice2_type": kind, "choice2_element": "temporal" if kind == "temporal" else "object", "choice3": contra,
            "choice4": para}


ROWS = [
    _row(0, "A dog is an animal.", "A dog is not an animal.", "A dog is an animal but not in the field.", "temporal",
         "A dog is a chair.", "An animal is what a dog is."),
    _row(1, "The man is playing a guitar.", "The man is not playing a guitar.", "The man is playing a non-guitar.", "relative_part",
         "The man is asleep at home.", "A guitar is being played by the man."),
    _row(2, "Nobody is asleep at home.", "Somebody is asleep at home.", "Nobody is asleep at a non-home.", "temporal",
         "Everybody is running through the field.", "No one sleeps at home."),
]


def _write(root: Path, split: str = "test", rows: list[dict] = ROWS) -> Path:
    path = root / DATASET / f"{split}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return root


def test_rows_become_four_way_questions(tmp_path, monkeypatch):
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(_write(tmp_path)))
    bench = Nubench()
    examples = bench.load("test")
    assert [e.id for e in examples] == ["nubench/test/0", "nubench/test/1", "nubench/test/2"]
    e = examples[1]
    assert e.label == "0" and bench.choices(e)[0] == "The man is not playing a guitar."
    assert bench.choices(e)[3] == "A guitar is being played by the man."
    assert bench.context(e) == "Sentence: The man is playing a guitar.\nThe negation of this sentence:"
    assert e.meta["tags"] == ("local_negation_type/relative_part",)
    assert bench.choice_label("The man is asleep at home.", e) == "2"


def test_a_malformed_row_names_its_line_and_field(tmp_path, monkeypatch):
    bad = dict(ROWS[0], choice3=ROWS[0]["choice1"])
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(_write(tmp_path, rows=[ROWS[1], bad])))
    with pytest.raises(DataError, match=r"test.jsonl:2: field 'choice1': two of the four choices are the same text"):
        Nubench().load("test")


def test_accuracy_and_the_share_of_each_distractor_by_hand():
    # q0 picks 0 (right), q1 picks 1 (local negation), q2 picks 3 (paraphrase), q3 picks 1 again.
    from negtrain.metrics.nubench import NubenchMetric

    m = NubenchMetric([0] * 4, [("local_negation_type/a",), ("local_negation_type/a",), ("local_negation_type/b",), ("local_negation_type/b",)],
                      [[10, 10, 10, 10]] * 4, CHOICE_TYPES)
    ll = torch.tensor([[-1.0, -2, -3, -4], [-5.0, -1, -3, -4], [-5.0, -6, -3, -2], [-9.0, -1, -3, -4]])
    m.update(torch.arange(4), ll)
    v = {k: float(x) for k, x in m.compute().items()}
    assert v["accuracy"] == 0.25 and v["n"] == 4
    assert v["chosen/local_negation"] == 0.5 and v["chosen/contradiction"] == 0.0 and v["chosen/paraphrase"] == 0.25
    assert v["accuracy"] + v["chosen/local_negation"] + v["chosen/contradiction"] + v["chosen/paraphrase"] == 1.0
    assert v["accuracy/local_negation_type/a"] == 0.5 and v["accuracy/local_negation_type/b"] == 0.0


def test_a_tiny_causal_lm_is_scored_as_one_question_at_a_time(tmp_path, monkeypatch, one_thread):
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(_write(tmp_path / "data")))
    path = save_tiny_llama(tmp_path / "m", None, seed=2)
    run = validate_tiny(path, "causal_lm", [{"benchmark": "nubench", "split": "test"}], tmp_path / "run", eval_batch_size=2)
    (line,) = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    bench = Nubench()
    examples = bench.load("test")
    scores, _ = choice_loglikelihoods_one_at_a_time(path, "causal_lm", bench, examples)
    picks = [int(s.argmax()) for s in scores]
    got = line["metrics"]
    assert got["n"] == 3 and got["accuracy"] == pytest.approx(picks.count(0) / 3)
    for k, kind in enumerate(CHOICE_TYPES[1:], start=1):
        assert got[f"chosen/{kind}"] == pytest.approx(picks.count(k) / 3), kind


def test_offline_without_the_files_one_line_says_where_they_come_from(tmp_path, monkeypatch):
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(tmp_path))
    with pytest.raises(DataError) as err:
        Nubench().load("test")
    message = str(err.value)
    assert "\n" not in message
    assert f"Hub dataset {DATASET} (split test, configuration multiple-choice; gated" in message and "HF_TOKEN" in message


def test_a_gated_dataset_without_a_token_says_so_in_one_line(tmp_path, monkeypatch):
    import negtrain.benchmarks.files as files

    # The Hub is unreachable here: its reachability check is stubbed to say it answers.
    monkeypatch.setattr(files, "check_hub_dataset", lambda: None)
    monkeypatch.delenv("NEGTRAIN_OFFLINE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # no token saved by `hf auth login` either
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(tmp_path / "empty"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError) as err:
        Nubench().load("validation")
    message = str(err.value)
    assert "\n" not in message
    assert "is gated and no Hugging Face token was found" in message and "set HF_TOKEN" in message
