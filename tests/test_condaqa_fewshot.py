"""CondaQA's few-shot splits (Ravichander et al. 2022, Appendix C.2): five disjoint test splits,
each with its own nine mirrored training shots; every prediction's shots are exactly its split's
nine, and the mean and standard deviation over the splits and the pooled score are checked by
hand."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from negtrain.benchmarks.condaqa import FEWSHOT_TEST, FEWSHOT_TRAIN, Condaqa
from negtrain.cli import main
from tiny_models import save_tiny_llama, validate_tiny

ROOT = "AbhilashaRavichander/CondaQA/data/few-shot"
#: Per few-shot test split of the fixture, how many of its four questions the predictions get right.
RIGHT = [1, 2, 3, 4, 2]


def _row(sample: int, passage: int, question: str, edit: int, label: str, text: str) -> dict:
    return {"SampleID": sample, "PassageID": passage, "QuestionID": question, "PassageEditID": edit,
            "sentence1": text, "sentence2": f"Is it {label.lower()}?", "label": label}


def write_fewshot(root: Path) -> None:
    """Five train files of nine shots and five test files of one question on four passage edits."""
    for k in range(1, 6):
        train = root / ROOT / f"train_splits/sampling_c_shots_9/conda_fewshot_train_{k}.json"
        test = root / ROOT / f"test_splits/conda_fewshot_test_{k}.json"
        train.parent.mkdir(parents=True, exist_ok=True)
        test.parent.mkdir(parents=True, exist_ok=True)
        shots = [_row(50_000 + 10 * k + i, 500 + 10 * k + i, "q10", i % 4, ("YES", "NO")[i % 2], f"Shot {i} of {k} is not red.") for i in range(9)]
        train.write_text("".join(json.dumps(r) + "\n" for r in shots))
        rows = [_row(1000 * k + e, 100 + k, "q20", e, ("YES", "NO", "YES", "NO")[e], f"Passage {k} edit {e} is not blue.") for e in range(4)]
        test.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture
def fewshot_data(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "data"
    write_fewshot(root)
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(root))
    return root


def test_the_five_mirrored_splits_partition_the_test_set(data_dir):
    bench = Condaqa()
    tests = [{e.meta["sample_id"] for e in bench.load(s)} for s in FEWSHOT_TEST]
    assert [len(t) for t in tests] == [1441, 1454, 1449, 1446, 1450]
    assert sum(map(len, tests)) == len(set().union(*tests)) == 7240
    assert set().union(*tests) == {e.meta["sample_id"] for e in bench.load("test")}
    for test, train in zip(FEWSHOT_TEST, FEWSHOT_TRAIN, strict=False):
        assert bench.default_shots_split(test) == train and len(bench.load(train)) == 9
    assert [e.meta["sample_id"] for e in bench.load("fewshot_train_1")][:3] == [3933, 2607, 2733]


def test_every_prediction_has_exactly_its_splits_nine_shots(fewshot_data, tmp_path, one_thread):
    evals = [{"benchmark": "condaqa", "split": s, "shots": 9} for s in FEWSHOT_TEST]
    run = validate_tiny(save_tiny_llama(tmp_path / "m", None), "causal_lm", evals, tmp_path / "run", eval_batch_size=4,
                        max_length=512, model_settings={"max_new_tokens": 2})
    files = []
    for test, train in zip(FEWSHOT_TEST, FEWSHOT_TRAIN, strict=False):
        nine = [f"condaqa/{train}/{50_000 + 10 * int(train[-1]) + i}" for i in range(9)]  # the train file's ids, in file order
        written = run / "predictions" / f"condaqa-{test}-validate.jsonl"
        lines = [json.loads(x) for x in written.read_text().splitlines()]
        assert len(lines) == 4
        for line in lines:
            assert line["shots"] == nine, (test, line["id"])
        files.append(str(written))
    # the five files score through evaluate --split a,b,...
    assert main(["evaluate", "--benchmark", "condaqa", "--split", ",".join(FEWSHOT_TEST), *[a for f in files for a in ("--predictions", f)], "--json"]) == 0


def _predictions(tmp_path: Path) -> list[str]:
    bench = Condaqa()
    paths = []
    for split, right in zip(FEWSHOT_TEST, RIGHT, strict=False):
        lines = [{"id": e.id, "prediction": e.label if e.meta["passage_edit"] < right else "maybe"} for e in bench.load(split)]
        path = tmp_path / f"{split}.jsonl"
        path.write_text("".join(json.dumps(x) + "\n" for x in lines))
        paths.append(str(path))
    return paths


def test_mean_and_std_over_splits_and_pooled_by_hand(fewshot_data, tmp_path, capsys):
    paths = _predictions(tmp_path)
    args = ["evaluate", "--benchmark", "condaqa", "--split", ",".join(FEWSHOT_TEST), *[a for p in paths for a in ("--predictions", p)]]
    assert main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    acc = out["across_splits"]["accuracy"]
    # accuracies 1/4, 2/4, 3/4, 4/4, 2/4: mean 0.6; squared deviations .1225 .01 .0225 .16 .01 sum to .325
    assert acc["values"] == [0.25, 0.5, 0.75, 1.0, 0.5]
    assert acc["mean"] == pytest.approx(0.6)
    assert acc["std"] == pytest.approx(math.sqrt(0.325 / 4), abs=1e-6)  # sample: n - 1
    assert acc["std_population"] == pytest.approx(math.sqrt(0.325 / 5), abs=1e-6)
    # consistency: only split 4 has all four edits right: 0, 0, 0, 1, 0
    cons = out["across_splits"]["consistency"]
    assert cons["mean"] == pytest.approx(0.2) and cons["std"] == pytest.approx(math.sqrt((4 * 0.04 + 0.64) / 4), abs=1e-6)
    assert "n" not in out["across_splits"] and "groups_scored" not in out["across_splits"]
    # pooled: 12 of 20 answers right, 1 of 5 question groups all right, intervals over the 5 groups
    pooled = out["pooled"]
    assert pooled["metrics"]["accuracy"] == pytest.approx(12 / 20) and pooled["metrics"]["consistency"] == pytest.approx(1 / 5)
    assert pooled["metrics"]["n"] == 20 and pooled["metrics"]["groups_scored"] == 5
    assert pooled["bootstrap"]["unit"] == "question group" and pooled["bootstrap"]["units"] == 5
    assert pooled["uncertainty"]["accuracy"]["ci95"] is not None
    assert [s["split"] for s in out["splits"]] == list(FEWSHOT_TEST)
    # the text form names the statistic
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "mean ± standard deviation (sample, n-1)" in text and re.search(r"\n  accuracy +0\.6000 ± 0\.2850\n", text)


def test_split_and_file_counts_must_match(fewshot_data, tmp_path, capsys):
    paths = _predictions(tmp_path)
    assert main(["evaluate", "--benchmark", "condaqa", "--split", "fewshot_test_1,fewshot_test_2", "--predictions", paths[0]]) == 2
    assert "2 split(s) but 1 predictions file(s)" in capsys.readouterr().err


def test_a_fixed_shot_set_is_the_same_for_every_example_in_file_order():
    from negtrain.benchmarks.base import Example
    from negtrain.core.errors import ConfigError
    from negtrain.models.fewshot import draw_shots

    pool = [Example(f"t{i}", ("p", "q"), "YES", group=f"g{i}") for i in range(9)]
    scored = [Example(f"s{i}", ("p", "q"), "NO", group=f"h{i}") for i in range(5)]
    for seed in (0, 1):
        assert draw_shots(scored, pool, 9, seed, fixed=True) == [list(range(9))] * 5
    assert draw_shots(scored, pool, 4, 0, fixed=True) == [[0, 1, 2, 3]] * 5
    with pytest.raises(ConfigError, match="10 shots asked, but the fixed shot set has 9"):
        draw_shots(scored, pool, 10, 0, fixed=True)
    with pytest.raises(ConfigError, match="the fixed shots include t3 or a member of its group"):
        draw_shots([Example("t3", ("p", "q"), "NO", group="g3")], pool, 9, 0, fixed=True)
