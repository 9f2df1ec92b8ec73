"""A real `fit` of a few steps: packaged MiniLM, real ScoNe + MoNLI files, the real Trainer."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest
import torch
import yaml

from negtrain.cli import main


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, data_dir):
    out = tmp_path_factory.mktemp("fit") / "run"
    code = main(
        [
            "fit",
            "--recipe", "scone_minilm",
            "--output-dir", str(out),
            "--trainer.max_epochs=2",
            "--trainer.limit_train_batches=3",
            "--trainer.enable_progress_bar=false",
            "--data.batch_size=8",
        ]
    )
    assert code == 0
    return out


def _lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_run_directory_layout(run_dir):
    assert (run_dir / "recipe.yaml").is_file()
    assert (run_dir / "metrics.jsonl").is_file()
    for epoch in (0, 1):
        for name in ("scone-test", "monli-test"):
            assert (run_dir / "predictions" / f"{name}-epoch{epoch}.jsonl").is_file()
    ckpts = {p.name for p in (run_dir / "checkpoints").iterdir()}
    assert "last.ckpt" in ckpts and any(n.startswith("best-epoch") for n in ckpts)
    assert (run_dir / "model" / "config.json").is_file()
    assert (run_dir / "model" / "tokenizer.json").is_file()


def test_recipe_yaml_is_the_resolved_recipe(run_dir):
    saved = yaml.safe_load((run_dir / "recipe.yaml").read_text())
    assert saved["trainer"]["max_epochs"] == 2 and saved["trainer"]["limit_train_batches"] == 3
    assert saved["data"]["batch_size"] == 8
    assert saved["model"]["warmup_ratio"] == 0.06  # defaults and recipe values alike are spelled out
    assert saved["data"]["eval_batch_size"] == 64


def test_metrics_lines(run_dir):
    lines = _lines(run_dir / "metrics.jsonl")
    evals = [(x["epoch"], x["benchmark"], x["split"]) for x in lines if x["benchmark"] != "train"]
    assert evals == [(e, b, s) for e in (0, 1) for b, s in (("scone", "dev10"), ("scone", "test"), ("monli", "test"))]
    scone = next(x for x in lines if x["benchmark"] == "scone")
    expected = {"accuracy", "consistency", "n", "groups_scored"} | {
        f"accuracy/{c}" for c in ("no_negation", "one_not_scoped", "one_scoped", "one_scoped_one_not_scoped", "two_scoped", "two_not_scoped")
    }
    assert set(scone["metrics"]) == expected
    # Each eval set is timed on its own: ScoNe test (1,200 examples) and MoNLI test (200).
    assert all(x["eval_seconds"] > 0 for x in lines if x["benchmark"] != "train")
    train = [x for x in lines if x["benchmark"] == "train"]
    assert [t["epoch"] for t in train] == [0, 1]
    assert train[0]["train_examples"] == 3 * 8
    assert train[0]["train_seconds"] > 0 and train[0]["train_examples_per_second"] > 0


def test_metrics_agree_with_the_prediction_files(run_dir):
    """Recompute every ScoNe number from the predictions file, independently of the metric code."""
    lines = _lines(run_dir / "metrics.jsonl")
    for epoch in (0, 1):
        reported = next(x for x in lines if (x["benchmark"], x["split"]) == ("scone", "test") and x["epoch"] == epoch)["metrics"]
        preds = _lines(run_dir / "predictions" / f"scone-test-epoch{epoch}.jsonl")
        assert len(preds) == 1200
        right = defaultdict(list)
        groups = defaultdict(list)
        for p in preds:
            _, _, condition, row = p["id"].split("/")
            ok = p["prediction"] == p["label"]
            right[condition].append(ok)
            groups[row].append(ok)
        assert reported["accuracy"] == pytest.approx(sum(map(sum, right.values())) / 1200, abs=1e-6)
        for condition, oks in right.items():
            assert reported[f"accuracy/{condition}"] == pytest.approx(sum(oks) / len(oks), abs=1e-6)
        assert reported["consistency"] == pytest.approx(sum(all(g) for g in groups.values()) / 200, abs=1e-6)
        monli = next(x for x in lines if x["benchmark"] == "monli" and x["epoch"] == epoch)["metrics"]
        mp = _lines(run_dir / "predictions" / f"monli-test-epoch{epoch}.jsonl")
        assert monli["accuracy"] == pytest.approx(sum(p["prediction"] == p["label"] for p in mp) / 200, abs=1e-6)


def test_checkpoint_loads_and_validate_reproduces_the_best_epoch(run_dir, tmp_path):
    best = next((run_dir / "checkpoints").glob("best-epoch*.ckpt"))
    state = torch.load(best, map_location="cpu", weights_only=True)
    assert state["negtrain_recipe"]["data"]["batch_size"] == 8
    epoch = int(best.stem.removeprefix("best-epoch"))
    out = tmp_path / "val"
    assert main(["validate", "--recipe", str(run_dir / "recipe.yaml"), "--checkpoint", str(best), "--output-dir", str(out), "--trainer.enable_progress_bar=false"]) == 0
    again = {(x["benchmark"], x["split"]): x["metrics"] for x in _lines(out / "metrics.jsonl")}
    during = {(x["benchmark"], x["split"]): x["metrics"] for x in _lines(run_dir / "metrics.jsonl") if x["epoch"] == epoch and x["benchmark"] != "train"}
    assert again == during


def test_a_selection_metric_that_is_nan_every_epoch_is_not_reported_as_a_score(tmp_path, data_dir, capsys, monkeypatch):
    # Lightning ranks NaN as -inf; the run must not print (or log) that as the best score. A row
    # limit keeps whole contrast sets (so consistency is defined); to get a NaN every epoch, the
    # evaluation here is given four members of one set instead (of what the limit allows, the first
    # rows of the split, as the limit once took them): no set is complete, consistency is NaN.
    import negtrain.data.module as data_module

    monkeypatch.setattr(data_module, "limited_rows", lambda examples, limit, batch_size, seed, name="": list(range(min(4, len(examples)))))
    out = tmp_path / "run"
    code = main([
        "fit", "--recipe", "scone_minilm", "--output-dir", str(out), "--trainer.max_epochs=1",
        "--trainer.limit_train_batches=1", "--trainer.limit_val_batches=1", "--trainer.enable_progress_bar=false",
        "--data.batch_size=4", "--data.eval_batch_size=4", "--selection.metric=scone/test/consistency",
        "--selection.allow_test_split=true",
    ])
    assert code == 0
    scone = [x for x in _lines(out / "metrics.jsonl") if x["benchmark"] == "scone"]
    assert scone[0]["metrics"]["groups_scored"] == 0 and scone[0]["metrics"]["consistency"] is None
    printed = capsys.readouterr().out
    assert "trainer.precision auto: " in printed  # the run says what 'auto' became on this machine
    assert "best scone/test/consistency: NaN in every epoch" in printed
    assert "inf" not in printed.split("best scone/test/consistency")[1].split("\n")[0]
