"""Sweeps: the generated W&B configuration, validation at creation, and the agent's argument form."""

from __future__ import annotations

from dataclasses import replace

from pathlib import Path

import pytest
import yaml

from negtrain import cli
from negtrain.benchmarks.scone import Scone
from negtrain.recipes import load_recipe
from negtrain.runs.sweeps import sweep_config



def _sweep(tmp_path: Path, capsys, *args: str) -> tuple[int, dict | None, str]:
    out = tmp_path / "sweep.yaml"
    code = cli.main(["sweep", *args, "--out", str(out)])
    captured = capsys.readouterr()
    config = yaml.safe_load(out.read_text()) if out.exists() else None
    return code, config, captured.out + captured.err


def test_minilm_sweep_config(tmp_path, capsys):
    code, config, output = _sweep(tmp_path, capsys, "--recipe", "scone_minilm")
    assert code == 0
    assert config["metric"] == {"name": "scone/dev10/accuracy", "goal": "maximize"}
    assert config["method"] == "random"
    assert set(config["parameters"]) == {"model.learning_rate", "data.batch_size", "trainer.max_epochs"}
    assert config["parameters"]["model.learning_rate"]["distribution"] == "log_uniform_values"
    # The program is `negtrain fit` on the same recipe; trials always report to W&B.
    cmd = config["command"]
    assert cmd[2:7] == ["-m", "negtrain", "fit", "--recipe", "scone_minilm"]
    assert "--logger.backend=wandb" in cmd and cmd[-1] == "${args}"
    # Offline here: the configuration is written and the agent command printed.
    assert "wandb sweep" in output and "wandb agent negtrain/<SWEEP_ID>" in output


def test_a_sweep_on_a_test_split_is_refused_unless_allowed(tmp_path, capsys):
    """A sweep picks hyperparameters (and each trial its epoch) by its metric: on a test split, the
    same rule as selection.metric."""
    code, config, output = _sweep(tmp_path, capsys, "--recipe", "scone_minilm", "--sweep.metric=scone/test/accuracy")
    assert code == 2 and config is None
    [line] = output.strip().splitlines()
    assert line.startswith("error: ") and "sweep.metric: 'scone/test/accuracy' picks on the test split scone/test" in line
    code, config, _ = _sweep(tmp_path, capsys, "--recipe", "scone_minilm", "--sweep.metric=scone/test/accuracy",
                             "--selection.allow_test_split=true")
    assert code == 0 and config["metric"]["name"] == "scone/test/accuracy"
    assert "--selection.metric=scone/test/accuracy" in config["command"] and "--selection.allow_test_split=true" in [a.lower() for a in config["command"]]


def test_goal_comes_from_the_metric_declaration(tmp_path, monkeypatch):
    recipe = tmp_path / "r.yaml"
    raw = yaml.safe_load(Path(load_recipe("scone_minilm").path).read_text())
    raw["sweep"]["metric"] = "scone/dev10/consistency"
    recipe.write_text(yaml.safe_dump(raw))
    config = sweep_config(load_recipe(str(recipe)), str(recipe), [])
    assert config["metric"] == {"name": "scone/dev10/consistency", "goal": "maximize"}
    # Trials select (and summarise) their best epoch by the swept metric.
    assert "--selection.metric=scone/dev10/consistency" in config["command"]
    declared = tuple(replace(d, higher_is_better=False) if d.name == "consistency" else d for d in Scone.reported_metrics)
    monkeypatch.setattr(Scone, "reported_metrics", declared)
    config = sweep_config(load_recipe(str(recipe)), str(recipe), [])
    assert config["metric"]["goal"] == "minimize"


@pytest.mark.parametrize(
    "param, value, message",
    [
        ("model.learnin_rate", {"values": [1e-5]}, "unknown key 'model.learnin_rate' (did you mean 'learning_rate'?)"),
        ("data.batch_size", {"values": [8, 0]}, "data.batch_size = 0 would fail every trial"),
        ("trainer.precison", {"value": "32-true"}, "did you mean 'precision'"),
    ],
)
def test_invalid_sweep_keys_fail_at_creation(tmp_path, capsys, param, value, message):
    raw = yaml.safe_load(Path(load_recipe("scone_minilm").path).read_text())
    raw["sweep"]["parameters"][param] = value
    recipe = tmp_path / "bad.yaml"
    recipe.write_text(yaml.safe_dump(raw))
    code, config, output = _sweep(tmp_path, capsys, "--recipe", str(recipe))
    assert code == 2 and config is None
    assert message in output


def test_unknown_sweep_metric_fails_at_creation(tmp_path, capsys):
    code, config, output = _sweep(tmp_path, capsys, "--recipe", "scone_minilm", "--sweep.metric=scone/test/acuracy")
    assert code == 2 and config is None
    assert "did you mean 'scone/test/accuracy'" in output


def agent_args(params: dict) -> list[str]:
    """`${args}` exactly as the W&B agent expands it."""
    from wandb.sdk.launch.sweeps.utils import create_sweep_command_args

    return create_sweep_command_args({"args": {k: {"value": v} for k, v in params.items()}})["args"]


def test_fit_with_agent_arguments_applies_overrides(agent_run):
    run_dir, params = agent_run
    resolved = yaml.safe_load((run_dir / "recipe.yaml").read_text())
    assert resolved["model"]["learning_rate"] == params["model.learning_rate"]
    assert resolved["data"]["batch_size"] == params["data.batch_size"]
    assert resolved["trainer"]["max_epochs"] == params["trainer.max_epochs"]
    assert resolved["logger"]["backend"] == "none"
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    assert sum('"benchmark": "train"' in l for l in lines) == params["trainer.max_epochs"]
    assert not (run_dir / "wandb").exists()  # logger: none writes no W&B files
    # last.ckpt is the last epoch even when that epoch did not improve on the best.
    import torch

    last = torch.load(run_dir / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    assert last["epoch"] == params["trainer.max_epochs"] - 1


def test_agent_argument_form():
    assert agent_args({"model.learning_rate": 0.0003, "data.batch_size": 8}) == [
        "--model.learning_rate=0.0003", "--data.batch_size=8"
    ]


def test_a_sweep_offers_only_metrics_the_model_reports(tmp_path, capsys):
    # The packaged MiniLM has no NLI head: it gets a 2-way head from its 2-way training data, and
    # NaN-NLI scores 2-way predictions on the binary view only, so f1 is never logged.
    recipe = tmp_path / "r.yaml"
    raw = yaml.safe_load(Path(load_recipe("scone_minilm").path).read_text())
    raw["data"]["eval"] = [{"benchmark": "scone", "split": "test"}, {"benchmark": "nannli", "split": "test"}]
    raw["sweep"]["metric"] = "nannli/test/f1"
    raw["selection"] = {"allow_test_split": True}  # NaN-NLI has a test split only
    recipe.write_text(yaml.safe_dump(raw))
    code, config, output = _sweep(tmp_path, capsys, "--recipe", str(recipe))
    assert code == 2 and config is None
    assert "sweep.metric: 'nannli/test/f1' is not reported by the eval benchmarks" in output
    code, config, _ = _sweep(tmp_path, capsys, "--recipe", str(recipe), "--sweep.metric=nannli/test/binary_f1")
    assert code == 0 and config["metric"] == {"name": "nannli/test/binary_f1", "goal": "maximize"}
