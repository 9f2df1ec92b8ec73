"""A real offline W&B run: what its files hold."""

from __future__ import annotations

import json
import math

import pytest
import yaml

from conftest import SECRET_HF, SECRET_WANDB
from wandb_files import summarize




def test_offline_run_holds_recipe_config_and_metric_keys(wandb_run, capsys):
    files = summarize(wandb_run)
    resolved = yaml.safe_load((wandb_run / "recipe.yaml").read_text())
    # The run config is the resolved recipe, the same dict as recipe.yaml, plus the run's provenance
    # (versions, machine, model revision, data file hashes), the same dict as provenance.json.
    config = {k: v for k, v in files["config"].items() if not k.startswith("_")}
    recorded = json.loads((wandb_run / "provenance.json").read_text())
    assert config.pop("provenance") == recorded
    assert recorded["data"] and all(len(f["sha256"]) == 64 for e in recorded["data"] for f in e["files"])
    assert config == resolved
    assert files["run"]["project"] == "negtrain" and files["run"]["tags"] == ["ci", "minilm"]
    assert files["run"]["name"] == wandb_run.name

    history = files["history"]
    metrics = [line for line in (wandb_run / "metrics.jsonl").read_text().splitlines()]

    records = [json.loads(line) for line in metrics]
    evals = [r for r in records if r["benchmark"] != "train"]
    assert {r["epoch"] for r in evals} == {0, 1}
    for record in evals:
        name = f"{record['benchmark']}/{record['split']}"
        rows = [h for h in history if h.get("epoch") == record["epoch"] and f"{name}/accuracy" in h]
        assert len(rows) == 1, (name, record["epoch"])
        for key, value in record["metrics"].items():
            logged = rows[0][f"{name}/{key}"]
            if value is None:
                assert math.isnan(logged)
            else:
                assert logged == pytest.approx(value, abs=1e-6)
    # Per-source counts at each epoch, from the train line.
    for record in (r for r in records if r["benchmark"] == "train"):
        rows = [h for h in history if h.get("epoch") == record["epoch"] and any(k.startswith("train/sources/") for k in h)]
        assert len(rows) == 1
        for source, info in record["sources"].items():
            assert rows[0][f"train/sources/{source}"] == info["examples"]
    assert any("train/loss_epoch" in h for h in history)
    # Predictions as tables, per benchmark and epoch.
    for name in ("scone/test", "monli/test"):
        tables = [h for h in history if h.get(f"predictions/{name}/_type") == "table-file"]
        assert [h["epoch"] for h in tables] == [0, 1]
        assert all(h[f"predictions/{name}/nrows"] == 16 for h in tables)  # one eval batch of 16
        # Each table holds the rows of that epoch's predictions file.
        bench, split = name.split("/")
        table_files = list((wandb_run / "wandb").glob(f"offline-run-*/files/media/table/predictions/{bench}/{split}_*.table.json"))
        assert len(table_files) == 2
        for path in table_files:
            table = json.loads(path.read_text())
            assert table["columns"] == ["id", "prediction", "label", "correct", "subset", "epoch"]
            epoch = table["data"][0][5]
            written = (wandb_run / "predictions" / f"{bench}-{split}-epoch{epoch}.jsonl").read_text().splitlines()
            want = [json.loads(line) for line in written]
            assert [(r[0], r[1], r[2]) for r in table["data"]] == [(w["id"], w["prediction"], w["label"]) for w in want]
            assert [r[3] for r in table["data"]] == [w["prediction"] == w["label"] for w in want]
    # The summary holds the best value of the selection metric.
    best = max(r["metrics"]["accuracy"] for r in evals if r["benchmark"] == "scone")
    assert files["summary"]["best/scone/test/accuracy"] == pytest.approx(best, abs=1e-6)
    assert files["summary"]["scone/test/accuracy"] == pytest.approx(best, abs=1e-6)
    assert "best/epoch" in files["summary"]
    # Two epochs selected on scone/test, which the run reports: the best value is optimistic.
    assert files["summary"]["best/optimistic"] is True


def test_no_secret_in_any_file(wandb_run):
    for path in wandb_run.rglob("*"):
        if path.is_file() and path.suffix != ".ckpt" and path.suffix != ".safetensors":
            data = path.read_bytes()
            assert SECRET_WANDB.encode() not in data, path
            assert SECRET_HF.encode() not in data, path
    assert "g-***" in (wandb_run / "recipe.yaml").read_text()


def test_logger_none_writes_no_wandb_files(agent_run):
    run_dir, _ = agent_run
    assert not (run_dir / "wandb").exists()
    assert not list(run_dir.rglob("*.wandb"))
    assert (run_dir / "metrics.jsonl").is_file() and list((run_dir / "predictions").glob("*.jsonl"))


def test_run_id_is_recorded_and_is_the_offline_runs(wandb_run):
    run_id = (wandb_run / "wandb" / "run_id").read_text().strip()
    runs = list((wandb_run / "wandb").glob("offline-run-*"))
    assert [p.name.rsplit("-", 1)[1] for p in runs] == [run_id]


def test_a_resumed_fit_continues_the_same_run_and_skips_sent_epochs(tmp_path, monkeypatch, capsys):
    from negtrain.recipes import load_recipe
    from negtrain.training.tracking import WandbTracker, make_logger

    monkeypatch.setenv("WANDB_MODE", "offline")
    recipe = load_recipe("scone_minilm", {"logger": "wandb"}).recipe
    # A fresh fit gets a new id each time, even in the same directory.
    assert make_logger(recipe, tmp_path)._wandb_init["id"] != make_logger(recipe, tmp_path)._wandb_init["id"]

    (tmp_path / "wandb").mkdir()
    (tmp_path / "wandb" / "run_id").write_text("negtrain0001\n")
    sent = '{"epoch": 0, "benchmark": "scone", "split": "test", "metrics": {"accuracy": 0.5}}\n'
    (tmp_path / "metrics.jsonl").write_text(sent)
    logger = make_logger(recipe, tmp_path, resuming=True)
    assert logger._wandb_init["id"] == "negtrain0001" and logger._wandb_init["resume"] == "allow"
    assert "W&B: continuing run negtrain0001" in capsys.readouterr().out

    tracker = WandbTracker(logger, tmp_path, ["scone/test"])
    tracker.on_fit_start(None, None)  # opens the (offline) run for real
    with (tmp_path / "metrics.jsonl").open("a") as f:
        f.write(sent.replace('"epoch": 0', '"epoch": 1'))
    assert [r["epoch"] for r in tracker._new_records()] == [1]  # epoch 0 went out before the kill
    logger.experiment.finish()
    assert [p.name.rsplit("-", 1)[1] for p in (tmp_path / "wandb").glob("offline-run-*")] == ["negtrain0001"]
