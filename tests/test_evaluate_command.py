"""`negtrain evaluate`: scoring a predictions file, and every way such a file can be wrong."""

from __future__ import annotations

import json
import os

import pytest

from negtrain.benchmarks.registry import get_benchmark
from negtrain.cli import main


@pytest.fixture(autouse=True)
def mirror(monkeypatch):
    if not os.environ.get("NEGTRAIN_DATA_DIR"):
        pytest.fail("set NEGTRAIN_DATA_DIR to the shared data mirror")
    monkeypatch.setenv("NEGTRAIN_OFFLINE", "1")


def write(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


def evaluate(capsys, *args):
    code = main(["evaluate", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def rte_test():
    return get_benchmark("negnli-rte").load("test")


def test_scores_a_complete_file_with_any_spelling(tmp_path, capsys, rte_test):
    spell = {"entailment": "Entailment", "not_entailment": "non-entailment"}
    rows = [{"id": e.id, "prediction": spell[e.label]} for e in rte_test]
    rows[0]["prediction"] = "entailment" if rte_test[0].label != "entailment" else "NOT_ENTAILMENT"
    code, out, _ = evaluate(capsys, "--benchmark", "negnli-rte", "--split", "test", "--predictions", write(tmp_path / "p.jsonl", rows), "--json")
    assert code == 0
    result = json.loads(out)
    assert result["complete"] and result["scored"] == result["examples"] == 450
    assert result["metrics"]["accuracy"] == pytest.approx(449 / 450)
    assert result["metrics"]["accuracy/Tneg-H"] == pytest.approx(149 / 150)  # row 0 is a Tneg-H row
    assert result["metrics"]["consistency"] == pytest.approx(149 / 150)
    assert result["notes"] == []
    # The table form carries the same names.
    code, out, _ = evaluate(capsys, "--benchmark", "negnli-rte", "--split", "test", "--predictions", tmp_path / "p.jsonl")
    assert code == 0 and "accuracy/Tneg-Hneg" in out and "450 of 450 examples scored" in out


def test_three_way_predictions_are_coarsened_on_a_two_way_benchmark(tmp_path, capsys, rte_test):
    rows = [{"id": e.id, "prediction": "entailment" if e.label == "entailment" else "contradiction"} for e in rte_test]
    code, out, _ = evaluate(capsys, "--benchmark", "negnli-rte", "--split", "test", "--predictions", write(tmp_path / "p.jsonl", rows), "--json")
    result = json.loads(out)
    assert code == 0 and result["metrics"]["accuracy"] == 1.0
    assert any("coarsened" in n for n in result["notes"])


def test_missing_ids_are_an_error_naming_them(tmp_path, capsys, rte_test):
    rows = [{"id": e.id, "prediction": e.label} for e in rte_test[2:]]
    code, _, err = evaluate(capsys, "--benchmark", "negnli-rte", "--split", "test", "--predictions", write(tmp_path / "p.jsonl", rows))
    assert code == 2
    assert f"2 of 450 examples of negnli-rte/test have no prediction: '{rte_test[0].id}', '{rte_test[1].id}'" in err
    assert "--allow-missing" in err


def test_allow_missing_scores_the_subset_and_says_so(tmp_path, capsys, rte_test):
    rows = [{"id": e.id, "prediction": e.label} for e in rte_test[3:]]
    path = write(tmp_path / "p.jsonl", rows)
    code, out, _ = evaluate(capsys, "--benchmark", "negnli-rte", "--split", "test", "--predictions", path, "--allow-missing", "--json")
    result = json.loads(out)
    assert code == 0 and not result["complete"] and result["scored"] == 447
    assert result["metrics"]["groups_scored"] == 149  # the first group lost its members
    assert any("scored 447 of 450" in n for n in result["notes"])
    code, out, _ = evaluate(capsys, "--benchmark", "negnli-rte", "--split", "test", "--predictions", path, "--allow-missing")
    assert "note: --allow-missing: scored 447 of 450" in out


def test_duplicate_ids_are_an_error_naming_them_and_their_lines(tmp_path, capsys, rte_test):
    rows = [{"id": e.id, "prediction": e.label} for e in rte_test] + [{"id": rte_test[5].id, "prediction": "entailment"}]
    code, _, err = evaluate(capsys, "--benchmark", "negnli-rte", "--split", "test", "--predictions", write(tmp_path / "p.jsonl", rows))
    assert code == 2 and f"1 duplicate id(s): '{rte_test[5].id}' (lines 6, 451)" in err


def test_unknown_ids_are_an_error_naming_them(tmp_path, capsys, rte_test):
    rows = [{"id": e.id, "prediction": e.label} for e in rte_test] + [{"id": "negnli-rte/test/0", "prediction": "entailment"}]
    code, _, err = evaluate(capsys, "--benchmark", "negnli-rte", "--split", "test", "--predictions", write(tmp_path / "p.jsonl", rows))
    assert code == 2 and "1 id(s) not in negnli-rte/test" in err and "'negnli-rte/test/0'" in err and "line 451" in err


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"id": "x", "prediction": "maybe"}', "p.jsonl:2: prediction 'maybe' is not an NLI label"),
        ('{"id": "x", "prediction": 1}', "p.jsonl:2: prediction 1 is not an NLI label"),
        ('{"id": "x"}', "p.jsonl:2: no 'prediction' field"),
        ('{"id": "x", "prediction": "entailment"', "p.jsonl:2: invalid JSON"),
    ],
)
def test_bad_lines_are_rejected_naming_the_line(tmp_path, capsys, line, message):
    path = write(tmp_path / "p.jsonl", [{"id": "negnli-rte/all/0", "prediction": "entailment"}, line])
    code, _, err = evaluate(capsys, "--benchmark", "negnli-rte", "--split", "test", "--predictions", path)
    assert code == 2 and message in err


def test_two_way_labels_on_a_three_way_benchmark_name_the_line(tmp_path, capsys):
    ex = get_benchmark("negnli-snli").load("test")
    rows = [{"id": e.id, "prediction": e.label} for e in ex]
    rows[7]["prediction"] = "not entailment"
    code, _, err = evaluate(capsys, "--benchmark", "negnli-snli", "--split", "test", "--predictions", write(tmp_path / "p.jsonl", rows))
    assert code == 2 and "p.jsonl:8: prediction 'not entailment' cannot be scored on negnli-snli" in err


def test_two_way_labels_on_nannli_get_the_binary_view(tmp_path, capsys):
    ex = get_benchmark("nannli").load("test")
    rows = [{"id": e.id, "prediction": "entailment" if e.label == "entailment" else "not_entailment"} for e in ex]
    code, out, _ = evaluate(capsys, "--benchmark", "nannli", "--split", "test", "--predictions", write(tmp_path / "p.jsonl", rows), "--json")
    result = json.loads(out)
    assert code == 0 and result["predicted_labels"] == ["entailment", "not_entailment"]
    assert result["metrics"] == {"binary_f1": 1.0, "binary_f1/entailment": 1.0, "binary_f1/not_entailment": 1.0, "n": 258.0}
    assert any("binary view only" in n for n in result["notes"])


def test_unknown_benchmark_and_split(tmp_path, capsys):
    path = write(tmp_path / "p.jsonl", [{"id": "a", "prediction": "entailment"}])
    code, _, err = evaluate(capsys, "--benchmark", "nanli", "--split", "test", "--predictions", path)
    assert code == 2 and "did you mean 'nannli'" in err
    code, _, err = evaluate(capsys, "--benchmark", "nannli", "--split", "dev", "--predictions", path)
    assert code == 2 and "unknown split of benchmark 'nannli' 'dev'" in err


def test_list(capsys):
    code, out, _ = evaluate(capsys, "--list", "--json")
    listing = {b["benchmark"]: b for b in json.loads(out)}
    assert code == 0
    assert {"scone", "monli", "mnli", "negnli-rte", "negnli-snli", "negnli-mnli", "nannli"} <= set(listing)
    assert listing["monli"]["splits"] == ["train", "test", "pmonli"]
    assert "strict" in listing["nannli"]["metrics"] and "accuracy/T-Hneg" in listing["negnli-mnli"]["metrics"]
    code, out, _ = evaluate(capsys, "--list")
    assert code == 0 and "negnli-snli" in out and "train85" in out


def test_json_and_table_carry_stderr_and_the_cluster_interval(tmp_path, capsys, rte_test):
    rows = [{"id": e.id, "prediction": e.label} for e in rte_test]
    for r in rows[:30]:  # the first ten original pairs entirely wrong
        r["prediction"] = "entailment" if r["prediction"] != "entailment" else "not_entailment"
    path = write(tmp_path / "p.jsonl", rows)
    code, out, _ = evaluate(capsys, "--benchmark", "negnli-rte", "--split", "test", "--predictions", path, "--json")
    result = json.loads(out)
    assert code == 0 and result["metrics"]["consistency"] == pytest.approx(140 / 150)
    assert result["bootstrap"] == {"unit": "original pair", "units": 150, "resamples": 1000, "seed": 0}
    entry = result["uncertainty"]["consistency"]
    assert entry["stderr"] == pytest.approx((140 / 150 * 10 / 150 / 149) ** 0.5, abs=1e-6)
    lo, hi = entry["ci95"]
    assert lo < 140 / 150 < hi
    assert "n" not in result["uncertainty"] and "groups_scored" not in result["uncertainty"]
    code, out, _ = evaluate(capsys, "--benchmark", "negnli-rte", "--split", "test", "--predictions", path)
    assert "consistency" in out and f"[{lo:.4f}, {hi:.4f}]" in out and "150 resampled original pairs" in out
    # --bootstrap 0: the stderr stays, the interval goes.
    code, out, _ = evaluate(capsys, "--benchmark", "negnli-rte", "--split", "test", "--predictions", path, "--json", "--bootstrap", "0")
    off = json.loads(out)["uncertainty"]
    assert off["consistency"]["stderr"] == entry["stderr"] and "ci95" not in off["consistency"]
