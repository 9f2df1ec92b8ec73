"""`negtrain evaluate` on the language-model benchmarks: CondaQA (free text) and TINAD (True/False)."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from negtrain.benchmarks.registry import get_benchmark
from negtrain.cli import main
from tinad_fixture import row, write_split


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _evaluate(capsys, *args):
    code = main(["evaluate", *args, "--json"])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 else None), err


def test_condaqa_answers_scored_as_the_paper(tmp_path, capsys, data_dir):
    examples = get_benchmark("condaqa").load("dev")
    groups = defaultdict(list)
    for e in examples:
        groups[e.group].append(e)
    complete = [g for g, members in groups.items() if sorted(m.subset for m in members) == sorted(["original", "paraphrase", "scope", "affirmative"])]
    assert len(complete) == 196
    # Every answer right, in a different case and with padding; then one scope answer wrong.
    wrong = next(m for m in groups[complete[0]] if m.subset == "scope")
    rows = [{"id": e.id, "prediction": f"  {e.label.upper()} " if e is not wrong else "definitely not"} for e in examples]
    code, result, err = _evaluate(capsys, "--benchmark", "condaqa", "--split", "dev", "--predictions", str(_write(tmp_path / "p.jsonl", rows)))
    assert code == 0, err
    m = result["metrics"]
    assert m["accuracy"] == pytest.approx(1109 / 1110)
    assert m["consistency"] == pytest.approx(195 / 196)
    assert m["consistency/scope"] == pytest.approx(195 / 196)
    assert m["consistency/paraphrase"] == 1.0 and m["consistency/affirmative"] == 1.0


def test_condaqa_rejects_non_string_answer(tmp_path, capsys, data_dir):
    first = get_benchmark("condaqa").load("dev")[0]
    path = _write(tmp_path / "p.jsonl", [{"id": first.id, "prediction": 3}])
    code, _, err = _evaluate(capsys, "--benchmark", "condaqa", "--split", "dev", "--predictions", str(path))
    assert code == 2 and f"{path}:1: prediction 3 is not an answer string" in err


@pytest.fixture
def tinad_dir(tmp_path, monkeypatch):
    rows = [
        row(1, 1, "input_affirmation", True, "A cat is a feline."),
        row(1, 1, "input_negation", False, "A cat is not a feline."),
        row(1, 1, "distractor_affirmation", False, "A cat is a bird."),
        row(1, 1, "distractor_negation", True, "A cat is not a bird."),
    ]
    write_split(tmp_path, "validation", rows)
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(tmp_path))
    return tmp_path


def test_tinad_accepts_booleans_and_spellings(tinad_dir, tmp_path, capsys):
    preds = [True, "false", "FALSE", " True "]  # all right: coherent group
    path = _write(tmp_path / "p.jsonl", [{"id": f"tinad/validation/{i}", "prediction": p} for i, p in enumerate(preds)])
    code, result, err = _evaluate(capsys, "--benchmark", "tinad", "--split", "validation", "--predictions", str(path))
    assert code == 0, err
    assert result["metrics"]["accuracy"] == 1.0 and result["metrics"]["coherence"] == 1.0


def test_tinad_rejects_other_labels(tinad_dir, tmp_path, capsys):
    path = _write(tmp_path / "p.jsonl", [{"id": "tinad/validation/0", "prediction": "entailment"}])
    code, _, err = _evaluate(capsys, "--benchmark", "tinad", "--split", "validation", "--predictions", str(path))
    assert code == 2 and f"{path}:1: prediction 'entailment' is not True or False" in err
