"""`negtrain compare`: paired cluster-bootstrap differences between two prediction sets."""

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


@pytest.fixture(scope="module")
def scone_test():
    return get_benchmark("scone").load("test")


def flip(label: str) -> str:
    return "entailment" if label != "entailment" else "not_entailment"


def predictions(examples, wrong_sets: set[int]) -> list[dict]:
    """Every example right except the one_scoped member of each set in ``wrong_sets``."""
    rows = []
    for e in examples:
        index = int(e.group.rsplit("/", 1)[1])
        bad = index in wrong_sets and e.subset == "one_scoped"
        rows.append({"id": e.id, "prediction": flip(e.label) if bad else e.label, "label": e.label})
    return rows


def write(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def compare(capsys, *args):
    code = main(["compare", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def test_identical_predictions_differ_by_zero_with_interval_zero(tmp_path, capsys, scone_test):
    rows = predictions(scone_test, set(range(0, 200, 7)))
    a, b = write(tmp_path / "a.jsonl", rows), write(tmp_path / "b.jsonl", rows)
    code, out, _ = compare(capsys, a, b, "--benchmark", "scone", "--split", "test", "--json")
    assert code == 0
    [ev] = json.loads(out)["evals"]
    assert ev["unit"] == "contrast set" and ev["units"] == 200
    assert set(ev["metrics"]) >= {"accuracy", "consistency", "accuracy/one_scoped"}
    for name, m in ev["metrics"].items():
        assert m["diff"] == 0.0 and m["ci95"] == [0.0, 0.0], name
        assert m["share_b_le_a"] == 1.0


def test_fixing_one_contrast_set_is_a_consistency_gain_of_one_in_200(tmp_path, capsys, scone_test):
    wrong = set(range(10))
    a = write(tmp_path / "a.jsonl", predictions(scone_test, wrong))
    b = write(tmp_path / "b.jsonl", predictions(scone_test, wrong - {3}))  # B fixes set 3 only
    code, out, _ = compare(capsys, a, b, "--benchmark", "scone", "--split", "test", "--json", "--bootstrap", "2000")
    assert code == 0
    m = json.loads(out)["evals"][0]["metrics"]
    assert m["consistency"]["a"] == pytest.approx(190 / 200) and m["consistency"]["b"] == pytest.approx(191 / 200)
    assert m["consistency"]["diff"] == pytest.approx(1 / 200)
    assert m["accuracy"]["diff"] == pytest.approx(1 / 1200)
    assert m["accuracy/one_scoped"]["diff"] == pytest.approx(1 / 200)
    assert m["accuracy/no_negation"]["diff"] == 0.0 and m["accuracy/no_negation"]["ci95"] == [0.0, 0.0]
    # Paired: a resample's difference is (times set 3 was drawn) / 200, never negative. Set 3 is
    # missing from a resample with probability (199/200)^200 = 0.367: then B is not better.
    lo, hi = m["consistency"]["ci95"]
    assert lo == 0.0 and 0.01 <= hi <= 0.02
    assert m["consistency"]["share_b_le_a"] == pytest.approx(0.367, abs=0.04)


def test_run_directories_and_markdown(tmp_path, capsys, scone_test):
    # Run A has two epochs; the last is compared by default, epoch 0 on request.
    run_a, run_b = tmp_path / "run_a", tmp_path / "run_b"
    write(run_a / "predictions" / "scone-test-epoch0.jsonl", predictions(scone_test, set(range(50))))
    write(run_a / "predictions" / "scone-test-epoch1.jsonl", predictions(scone_test, set(range(20))))
    write(run_b / "predictions" / "scone-test-validate.jsonl", predictions(scone_test, set(range(20))))
    code, out, _ = compare(capsys, run_a, run_b)
    assert code == 0
    assert "## scone/test (200 contrast sets)" in out
    assert "| consistency | 0.9000 | 0.9000 | +0.0000 | [+0.0000, +0.0000] | 1.0000 | 1.0000 (bootstrap) | 1.0000 | higher |" in out
    code, out, err = compare(capsys, run_a, run_b, "--epoch", "0", "--json", "--out", tmp_path / "cmp")
    assert code == 0, err
    m = json.loads(out)["evals"][0]["metrics"]["consistency"]
    assert m["diff"] == pytest.approx(30 / 200) and m["ci95"][0] > 0
    assert json.loads((tmp_path / "cmp.json").read_text()) == json.loads(out)
    assert "# Paired comparison: B − A" in (tmp_path / "cmp.md").read_text()


def test_bad_inputs_are_one_line_errors(tmp_path, capsys, scone_test):
    a = write(tmp_path / "a.jsonl", predictions(scone_test, set()))
    code, _, err = compare(capsys, a, a)
    assert code == 2 and "needs --benchmark and --split" in err
    code, _, err = compare(capsys, tmp_path, a, "--benchmark", "scone", "--split", "test")
    assert code == 2 and "no predictions/" in err
    code, _, err = compare(capsys, a, a, "--benchmark", "scone", "--split", "test", "--epoch", "first")
    assert code == 2 and "--epoch" in err


def test_partial_predictions_need_allow_missing(tmp_path, capsys, scone_test):
    rows = predictions(scone_test, set())
    a = write(tmp_path / "a.jsonl", rows[:600])
    b = write(tmp_path / "b.jsonl", rows[:300])
    code, _, err = compare(capsys, a, b, "--benchmark", "scone", "--split", "test")
    assert code == 2 and "--allow-missing" in err
    code, out, _ = compare(capsys, a, b, "--benchmark", "scone", "--split", "test", "--allow-missing", "--json")
    [ev] = json.loads(out)["evals"]
    assert code == 0 and ev["metrics"]["accuracy"]["diff"] == 0.0
    assert any("different examples" in n for n in ev["notes"])


def test_an_epoch_spelled_with_a_leading_zero_and_bounded_bootstrap(tmp_path, capsys, scone_test):
    run_a, run_b = tmp_path / "run_a", tmp_path / "run_b"
    write(run_a / "predictions" / "scone-test-epoch01.jsonl", predictions(scone_test, set(range(20))))
    write(run_b / "predictions" / "scone-test-epoch1.jsonl", predictions(scone_test, set(range(10))))
    code, out, err = compare(capsys, run_a, run_b, "--json", "--bootstrap", "0")
    assert code == 0, err
    assert json.loads(out)["evals"][0]["metrics"]["consistency"]["diff"] == pytest.approx(10 / 200)
    code, out, err = compare(capsys, run_a, run_b, "--epoch", "1", "--json", "--bootstrap", "0")
    assert code == 0, err
    write(run_a / "predictions" / "scone-test-epoch1.jsonl", predictions(scone_test, set()))
    code, _, err = compare(capsys, run_a, run_b)
    assert code == 2 and "scone-test-epoch01.jsonl and scone-test-epoch1.jsonl are both epoch1" in err
    code, _, err = compare(capsys, run_b, run_b, "--bootstrap", "1000000000")
    assert code == 2 and "--bootstrap must be between 0 and 100000" in err


def test_mcnemar_counts_and_adjusted_p_named_in_the_header(tmp_path, capsys, scone_test):
    from scipy.stats import binomtest

    # A wrong on the one_scoped member of sets 0..29, B on sets 20..34: of the 1200 examples both
    # predicted, 20 are right by B only (sets 0..19) and 5 by A only (sets 30..34).
    a = write(tmp_path / "a.jsonl", predictions(scone_test, set(range(30))))
    b = write(tmp_path / "b.jsonl", predictions(scone_test, set(range(20, 35))))
    for adjust, name in (("holm", "Holm–Bonferroni"), ("bh", "Benjamini–Hochberg")):
        code, out, _ = compare(capsys, a, b, "--benchmark", "scone", "--split", "test", "--json", "--adjust", adjust,
                               "--bootstrap", "200")
        assert code == 0
        result = json.loads(out)
        [ev] = result["evals"]
        assert result["adjust"] == adjust
        assert ev["mcnemar"] == {"pairs": 1200, "a_only": 5, "b_only": 20, "p": pytest.approx(binomtest(20, 25).pvalue, rel=1e-12)}
        acc = ev["metrics"]["accuracy"]
        assert acc["test"] == "mcnemar" and acc["p"] == ev["mcnemar"]["p"]
        assert all(m["test"] == "bootstrap" for k, m in ev["metrics"].items() if k != "accuracy")
        ps = [m["p"] for m in ev["metrics"].values()]
        assert len(ps) == 8 and all(m["p_adjusted"] >= m["p"] for m in ev["metrics"].values())
        if adjust == "holm":  # the smallest p is multiplied by m
            assert min(m["p_adjusted"] for m in ev["metrics"].values()) == pytest.approx(min(1.0, 8 * min(ps)))
        code, out, _ = compare(capsys, a, b, "--benchmark", "scone", "--split", "test", "--adjust", adjust, "--bootstrap", "200")
        assert f"| p (test) | p adjusted ({name}) |" in out and f"Adjusted: {name} over all 8 p-values" in out
        assert "5 right by A only and 20 by B only" in out
    code, _, err = compare(capsys, a, b, "--benchmark", "scone", "--split", "test", "--adjust", "sidak")
    assert code == 2 and "invalid choice: 'sidak'" in err


def _seed_group(parent, seeds: dict[int, set[int]], recipe: str = "scone_minilm"):
    """A `fit --seeds` parent by hand: per seed, a run whose epoch-0 predictions are wrong on the
    one_scoped member of the given contrast sets."""
    from negtrain.runs.seeds import MANIFEST

    scone = get_benchmark("scone").load("test")
    for s, wrong in seeds.items():
        run = parent / f"seed{s}"
        write(run / "predictions" / "scone-test-epoch0.jsonl", predictions(scone, wrong))
        (run / "recipe.yaml").write_text(f"# recipe: {recipe}\n")
        (run / "metrics.jsonl").write_text(json.dumps({"epoch": 0, "stage": "fit", "benchmark": "scone", "split": "test",
                                                       "metrics": {"accuracy": 0.5}}) + "\n")
    (parent / MANIFEST).write_text(json.dumps({"recipe": recipe, "seeds": list(seeds), "runs": [f"seed{s}" for s in seeds]}))
    return parent


def test_seed_groups_are_compared_seed_by_seed_with_one_adjustment(tmp_path, capsys):
    a = _seed_group(tmp_path / "a", {1: set(range(10)), 2: set(range(10)), 3: set()})
    b = _seed_group(tmp_path / "b", {1: set(range(4)), 2: set(range(12)), 4: set()})
    code, out, _ = compare(capsys, a, b, "--json", "--bootstrap", "100")
    assert code == 0
    result = json.loads(out)
    assert result["seeds"] == [1, 2] and result["not_in_both"] == ["seed 3", "seed 4"]
    one, two = result["evals"]
    assert (one["seed"], one["mcnemar"]["a_only"], one["mcnemar"]["b_only"]) == (1, 0, 6)
    assert (two["seed"], two["mcnemar"]["a_only"], two["mcnemar"]["b_only"]) == (2, 2, 0)
    # Holm over both seeds' rows: 16 p-values, the smallest times 16.
    ps = [m["p"] for ev in result["evals"] for m in ev["metrics"].values()]
    assert len(ps) == 16
    assert min(m["p_adjusted"] for ev in result["evals"] for m in ev["metrics"].values()) == pytest.approx(min(1.0, 16 * min(ps)))
    code, out, _ = compare(capsys, a, b, "--bootstrap", "0")
    assert "## seed 1: scone/test" in out and "## seed 2: scone/test" in out and "Not compared (in one side only): seed 3, seed 4." in out
    code, _, err = compare(capsys, a, tmp_path / "a" / "seed1")
    assert code == 2 and "is a seed group (fit --seeds); compare it with another seed group" in err
    c = _seed_group(tmp_path / "c", {7: set()})
    code, _, err = compare(capsys, a, c)
    assert code == 2 and "share no seed to pair runs by" in err


def test_a_comparison_counts_the_contrast_sets_it_scored(tmp_path, capsys, scone_test):
    # Two limited cards: ten whole sets each (every condition). The comparison rests on those ten,
    # and says so, not on the split's 200.
    kept = [r for r in predictions(scone_test, {1, 3}) if int(r["id"].rsplit("/", 1)[1]) < 10]
    a = write(tmp_path / "a.jsonl", kept)
    b = write(tmp_path / "b.jsonl", [r for r in predictions(scone_test, set()) if int(r["id"].rsplit("/", 1)[1]) < 10])
    code, out, _ = compare(capsys, a, b, "--benchmark", "scone", "--split", "test", "--allow-missing", "--json")
    [ev] = json.loads(out)["evals"]
    assert code == 0 and (ev["units"], ev["units_scored"]) == (200, 10)
    assert ev["metrics"]["consistency"]["diff"] == pytest.approx(2 / 10)
    code, out, _ = compare(capsys, a, b, "--benchmark", "scone", "--split", "test", "--allow-missing")
    assert code == 0 and "scone/test (10 of 200 contrast sets scored)" in out
    # Whole splits: the split's count, as before.
    whole = predictions(scone_test, set())
    code, out, _ = compare(capsys, write(tmp_path / "c.jsonl", whole), write(tmp_path / "d.jsonl", whole), "--benchmark", "scone", "--split", "test")
    assert code == 0 and "scone/test (200 contrast sets)" in out


def test_one_condition_is_not_tested_twice(tmp_path, capsys, scone_test):
    # Both sides predicted ScoNe's no_negation rows only (as a limit once took them): the overall
    # accuracy and accuracy/no_negation are the same data; the second is marked, not tested again.
    only = [r for r in predictions(scone_test, set()) if "/no_negation/" in r["id"]]
    flipped = [{**r, "prediction": flip(r["label"])} if i % 5 == 0 else r for i, r in enumerate(only)]
    a, b = write(tmp_path / "a.jsonl", only), write(tmp_path / "b.jsonl", flipped)
    code, out, _ = compare(capsys, a, b, "--benchmark", "scone", "--split", "test", "--allow-missing", "--json")
    [ev] = json.loads(out)["evals"]
    rows = ev["metrics"]
    assert code == 0 and rows["accuracy/no_negation"]["same_as"] == "accuracy"
    assert rows["accuracy/no_negation"]["p_adjusted"] == rows["accuracy"]["p_adjusted"]
    assert "same_as" not in rows["accuracy"] and not any(r.get("same_as") for k, r in rows.items() if k != "accuracy/no_negation")
    code, out, _ = compare(capsys, a, b, "--benchmark", "scone", "--split", "test", "--allow-missing")
    assert "same data as accuracy" in out
