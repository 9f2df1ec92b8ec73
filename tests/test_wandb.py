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
        # Each metric's standard error and 95% interval, as metrics.jsonl holds them.
        assert record["uncertainty"]
        rows = [h for h in history if h.get("epoch") == record["epoch"] and f"{name}/accuracy/ci95_low" in h]
        assert len(rows) == 1, (name, record["epoch"])
        for key, entry in record["uncertainty"].items():
            se = entry["stderr"]
            assert rows[0][f"{name}/{key}/stderr"] == pytest.approx(se if se is not None else math.nan, abs=1e-9, nan_ok=True)
            if entry.get("ci95") is None:  # no interval (nothing to resample): none sent either
                assert f"{name}/{key}/ci95_low" not in rows[0]
                continue
            low, high = entry["ci95"]
            assert rows[0][f"{name}/{key}/ci95_low"] == pytest.approx(low if low is not None else math.nan, abs=1e-9, nan_ok=True)
            assert rows[0][f"{name}/{key}/ci95_high"] == pytest.approx(high if high is not None else math.nan, abs=1e-9, nan_ok=True)
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
        # one eval batch of 16: ScoNe's two whole contrast sets (12 rows), MoNLI's 16 rows
        assert all(h[f"predictions/{name}/nrows"] == (12 if name == "scone/test" else 16) for h in tables)
        # Each table holds the rows of that epoch's predictions file.
        bench, split = name.split("/")
        table_files = list((wandb_run / "wandb").glob(f"offline-run-*/files/media/table/predictions/{bench}/{split}_*.table.json"))
        assert len(table_files) == 2
        for path in table_files:
            table = json.loads(path.read_text())
            assert table["columns"][:7] == ["id", "prediction", "label", "correct", "subset", "shots", "epoch"]
            epoch = table["data"][0][6]
            assert {r[5] for r in table["data"]} == {""}  # no few-shot prompts in this run
            written = (wandb_run / "predictions" / f"{bench}-{split}-epoch{epoch}.jsonl").read_text().splitlines()
            want = [json.loads(line) for line in written]
            assert [(r[0], r[1], r[2]) for r in table["data"]] == [(w["id"], w["prediction"], w["label"]) for w in want]
            assert [r[3] for r in table["data"]] == [w["prediction"] == w["label"] for w in want]
            _same_fields(table, want)
    # The summary holds the best value of the selection metric.
    best = max(r["metrics"]["accuracy"] for r in evals if (r["benchmark"], r["split"]) == ("scone", "dev10"))
    assert files["summary"]["best/scone/dev10/accuracy"] == pytest.approx(best, abs=1e-6)
    assert files["summary"]["scone/dev10/accuracy"] == pytest.approx(best, abs=1e-6)
    assert files["summary"]["best/selected_on_test"] is False  # scone_minilm selects on dev10
    assert files["summary"]["best/selected_on"] == "scone/dev10/accuracy"  # the metric, named
    assert "best/epoch" in files["summary"]
    # Two epochs selected on scone/dev10, which the run reports: the best value is optimistic.
    assert files["summary"]["best/optimistic"] is True


def _same_fields(table, lines):
    """Every field of the predictions-file lines beyond the first columns is a table column, with
    the same values (structured values as their JSON)."""
    extra = table["columns"][7:]
    assert set(extra) == {k for w in lines for k in w} - {"id", "prediction", "label", "shots"}
    for row, line in zip(table["data"], lines, strict=False):
        for k, cell in zip(extra, row[7:], strict=False):
            value = line.get(k)
            assert cell == (value if value is None or isinstance(value, (str, int, float, bool)) else json.dumps(value)), k


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
    # Epoch 0 went out before the kill: the tracker sends only the records the recorder hands it
    # from now on (test_the_tracker_logs_what_metrics_jsonl_holds below), and reads no file.
    assert not hasattr(tracker, "metrics_path")
    logger.experiment.finish()
    assert [p.name.rsplit("-", 1)[1] for p in (tmp_path / "wandb").glob("offline-run-*")] == ["negtrain0001"]


def test_fewshot_prediction_tables_carry_shot_ids_prompt_and_response(lm_env, tmp_path, monkeypatch):
    """A tiny Llama-style model evaluated with 2 shots per ScoNe prompt, W&B offline: every table
    row names the shots its prompt showed, and holds the prompt and response, as the predictions
    file does. (The tables are files the run writes itself; the run's history file is left to the
    test above: wandb-core 0.31 now and then writes nothing but its header for a run of a few
    seconds, measured in 2 of 6 bare init/log/finish runs.)"""
    from negtrain import cli
    from tiny_models import write_recipe

    monkeypatch.setenv("WANDB_MODE", "offline")
    recipe = {
        "description": "few-shot W&B tables",
        "model": {"name": str(lm_env["llama"]), "family": "causal_lm", "max_length": 256, "learning_rate": 1e-3},
        "data": {"train": [{"benchmark": "tinad", "split": "train"}], "eval": [{"benchmark": "scone", "split": "test", "shots": 2}],
                 "batch_size": 8, "eval_batch_size": 8},
        "trainer": {"max_epochs": 1, "limit_train_batches": 1, "limit_val_batches": 1, "enable_progress_bar": False,
                    "accelerator": "cpu", "torch_threads": 1, "precision": "32-true"},
        "logger": {"backend": "wandb", "log_predictions": True},
        "selection": {"metric": "scone/test/accuracy", "allow_test_split": True},  # its only eval set is a test split
    }
    run_dir = tmp_path / "run"
    assert cli.main(["fit", "--recipe", str(write_recipe(tmp_path / "r.yaml", recipe)), "--output-dir", str(run_dir)]) == 0
    written = [json.loads(line) for line in (run_dir / "predictions" / "scone-test-epoch0.jsonl").read_text().splitlines()]
    assert written and all(len(w["shots"]) == 2 for w in written)
    (path,) = (run_dir / "wandb").glob("offline-run-*/files/media/table/predictions/scone/test_*.table.json")
    table = json.loads(path.read_text())
    shots = table["columns"].index("shots")
    assert [(r[0], r[shots]) for r in table["data"]] == [(w["id"], ", ".join(w["shots"])) for w in written]
    # The exact prompt the model saw (with its two solved examples) and its response, as the file has them.
    assert {"prompt", "response"} <= set(table["columns"])
    _same_fields(table, written)
    prompt = table["columns"].index("prompt")
    assert all(r[prompt] and r[prompt] == w["prompt"] for r, w in zip(table["data"], written, strict=False))


@pytest.mark.parametrize("tracker_first", [False, True], ids=["recorder-first", "tracker-first"])
def test_the_tracker_logs_what_metrics_jsonl_holds_in_either_callback_order(tmp_path, monkeypatch, tracker_first):
    """A real fit of a tiny BERT with W&B offline, its callbacks in either order: every value of
    metrics.jsonl (the training line's per-source counts and throughput, every evaluation metric)
    is what the W&B run was sent. What the run is sent is taken at ``wandb.Run.log``, in front of
    the W&B server (offline here)."""
    import lightning.pytorch as pl
    import wandb

    from crash_fit import tiny_model
    from negtrain import cli
    from negtrain.training.recorder import RunRecorder
    from negtrain.training.tracking import WandbTracker
    from tiny_models import write_recipe

    monkeypatch.setenv("WANDB_MODE", "offline")
    sent: list[dict] = []
    log = wandb.sdk.wandb_run.Run.log

    def recording_log(self, data, *args, **kwargs):
        sent.append(dict(data))
        return log(self, data, *args, **kwargs)

    monkeypatch.setattr(wandb.sdk.wandb_run.Run, "log", recording_log)
    init = pl.Trainer.__init__
    seen_orders = []

    def reordered(self, *args, callbacks=None, **kwargs):
        ours = [c for c in callbacks if isinstance(c, (RunRecorder, WandbTracker))]
        rest = [c for c in callbacks if c not in ours]
        ours.sort(key=lambda c: isinstance(c, RunRecorder) == tracker_first)
        seen_orders.append([type(c).__name__ for c in ours])
        init(self, *args, callbacks=ours + rest, **kwargs)

    monkeypatch.setattr(pl.Trainer, "__init__", reordered)
    recipe = {
        "description": "W&B mirrors metrics.jsonl",
        "model": {"name": str(tiny_model(tmp_path / "bert")), "family": "nli", "max_length": 64},
        "data": {"train": [{"benchmark": "monli", "split": "train"}, {"benchmark": "scone", "split": "train"}],
                 "eval": [{"benchmark": "scone", "split": "test"}], "batch_size": 8, "eval_batch_size": 32},
        "trainer": {"max_epochs": 2, "limit_train_batches": 2, "limit_val_batches": 2, "enable_progress_bar": False,
                    "accelerator": "cpu", "torch_threads": 1, "precision": "32-true"},
        "evaluation": {"bootstrap": 0},
        "logger": "wandb",
        "selection": {"metric": "scone/test/accuracy", "allow_test_split": True},  # its only eval set is a test split
    }
    run_dir = tmp_path / "run"
    assert cli.main(["fit", "--recipe", str(write_recipe(tmp_path / "r.yaml", recipe)), "--output-dir", str(run_dir)]) == 0
    expected_order = ["WandbTracker", "RunRecorder"] if tracker_first else ["RunRecorder", "WandbTracker"]
    assert seen_orders and all(order == expected_order for order in seen_orders)

    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if r["benchmark"] == "train"]
    evals = [r for r in records if r["benchmark"] != "train"]
    assert [r["epoch"] for r in train] == [0, 1] and [r["epoch"] for r in evals] == [0, 1]
    for r in train:
        (row,) = [s for s in sent if s.get("epoch") == r["epoch"] and "train/examples" in s]
        assert row["train/examples"] == r["train_examples"]
        assert row["train/examples_per_second"] == r["train_examples_per_second"]
        assert {k: v for k, v in row.items() if k.startswith("train/sources/")} == {
            f"train/sources/{name}": info["examples"] for name, info in r["sources"].items()
        }
    for r in evals:
        logged = {}
        for s in sent:
            if s.get("epoch") == r["epoch"]:
                logged.update({k[len("scone/test/"):]: v for k, v in s.items() if k.startswith("scone/test/")})
        for key, value in r["metrics"].items():
            if value is None:
                continue
            assert key in logged, (r["epoch"], key)
            assert logged[key] == pytest.approx(value, abs=1e-6), (r["epoch"], key)
        # Each metric's standard error (no bootstrap here, so no interval), from the record itself.
        assert r["uncertainty"]
        for key, entry in r["uncertainty"].items():
            se = entry["stderr"]
            assert logged[f"{key}/stderr"] == pytest.approx(se if se is not None else math.nan, abs=1e-12, nan_ok=True), (r["epoch"], key)
            assert f"{key}/ci95_low" not in logged
