"""``sweep --local N``: trials drawn deterministically from the recipe's sweep space, run here, ranked."""

from __future__ import annotations

import json
import math

import pytest
import yaml

from conftest import FAST
from negtrain import cli
from negtrain.config import SweepConfig
from negtrain.runs.local_sweep import Trial, override_args, rank, sample_trials
from negtrain.recipes import load_recipe
from negtrain.runs.sweeps import SweepMetric


def _space(method: str = "random") -> SweepConfig:
    return SweepConfig.model_validate({
        "method": method,
        "parameters": {
            "model.learning_rate": {"distribution": "log_uniform_values", "min": 1e-5, "max": 1e-3},
            "data.batch_size": {"values": [8, 16, 32]},
            "trainer.max_epochs": {"min": 1, "max": 3},
            "model.warmup_ratio": {"distribution": "q_uniform", "min": 0.0, "max": 0.2, "q": 0.05},
            "seed": {"value": 7},
        },
    })


def test_random_trials_are_drawn_from_the_seed_within_the_space():
    trials = sample_trials(_space(), 50, seed=3)
    assert trials == sample_trials(_space(), 50, seed=3)
    assert trials != sample_trials(_space(), 50, seed=4)
    lrs = [t["model.learning_rate"] for t in trials]
    assert all(1e-5 <= lr <= 1e-3 for lr in lrs)
    # Log-uniform: about half the draws below the geometric midpoint 1e-4 (uniform would put ~9% there).
    assert 15 <= sum(lr < 1e-4 for lr in lrs) <= 35
    assert {t["data.batch_size"] for t in trials} == {8, 16, 32}
    # Integer bounds without a distribution: W&B's int_uniform, ints inclusive of both ends.
    assert {t["trainer.max_epochs"] for t in trials} == {1, 2, 3}
    assert all(isinstance(t["trainer.max_epochs"], int) for t in trials)
    assert all(math.isclose(t["model.warmup_ratio"] / 0.05, round(t["model.warmup_ratio"] / 0.05)) for t in trials)
    assert all(t["seed"] == 7 for t in trials)


def test_grid_trials_are_the_product_in_order():
    space = SweepConfig.model_validate({
        "method": "grid",
        "parameters": {"data.batch_size": {"values": [8, 16]}, "model.learning_rate": {"values": [1e-5, 3e-5, 5e-5]}},
    })
    assert sample_trials(space, 4, seed=0) == [
        {"data.batch_size": 8, "model.learning_rate": 1e-5},
        {"data.batch_size": 8, "model.learning_rate": 3e-5},
        {"data.batch_size": 8, "model.learning_rate": 5e-5},
        {"data.batch_size": 16, "model.learning_rate": 1e-5},
    ]
    assert len(sample_trials(space, 100, seed=0)) == 6
    from negtrain.core.errors import ConfigError

    with pytest.raises(ConfigError, match="grid sweep needs 'values'"):
        sample_trials(_space("grid"), 2, seed=0)


def test_override_args_read_back_as_the_same_values():
    from negtrain.runs.local_sweep import override_args
    from negtrain.recipes import parse_overrides

    values = {"model.learning_rate": 3e-05, "data.batch_size": 16, "trainer.deterministic": True,
              "model.freeze": ["*.embeddings.*"], "model.head_labels": None}
    args = override_args(values)
    assert args[0] == "--model.learning_rate=3.0e-05" and args[2] == "--trainer.deterministic=true"
    assert parse_overrides(args) == values


def test_ranking_follows_the_metric_direction_and_puts_failures_last():
    trials = [Trial("t0", {}, "", "done", best=0.5), Trial("t1", {}, "", "failed"), Trial("t2", {}, "", "done", best=0.9)]
    assert [t.trial for t in rank(trials, SweepMetric("a/b/accuracy", "maximize"))] == ["t2", "t0", "t1"]
    assert [t.trial for t in rank(trials, SweepMetric("a/b/loss", "minimize"))] == ["t0", "t2", "t1"]


def test_local_sweep_runs_two_real_trials_and_writes_the_leaderboard(tmp_path, capsys):
    # scone_minilm with a smaller space (one epoch per trial), to keep two real trials cheap.
    raw = yaml.safe_load(load_recipe("scone_minilm").path.read_text())
    raw["trainer"]["max_epochs"] = 2
    raw["sweep"]["parameters"] = {
        "model.learning_rate": {"distribution": "log_uniform_values", "min": 2e-5, "max": 1e-4},
        "data.batch_size": {"values": [4, 8]},
    }
    recipe = tmp_path / "scone_small.yaml"
    recipe.write_text(yaml.safe_dump(raw))
    parent = tmp_path / "sweep"
    # FAST sets data.batch_size=8, which is swept too: the trial's value wins, and is given once.
    fast = [a if not a.startswith("--trainer.limit_train_batches") else "--trainer.limit_train_batches=1" for a in FAST]
    code = cli.main(["sweep", "--recipe", str(recipe), "--local", "2", "--output-dir", str(parent), *fast])
    out = capsys.readouterr().out
    assert code == 0
    board = json.loads((parent / "leaderboard.json").read_text())
    assert board["metric"] == {"name": "scone/dev10/accuracy", "goal": "maximize"}
    assert board["seed"] == 42 and len(board["trials"]) == 2
    expected = sample_trials(load_recipe(str(recipe)).recipe.sweep, 2, 42)
    assert expected[0] != expected[1]
    by_name = {t["trial"]: t for t in board["trials"]}
    for k, params in enumerate(expected):
        trial = by_name[f"trial-{k}"]
        assert trial["status"] == "done" and trial["params"] == params
        # The trial ran with its parameters, and its best is the best epoch in its own metrics.jsonl.
        resolved = yaml.safe_load((parent / f"trial-{k}" / "recipe.yaml").read_text())
        assert resolved["model"]["learning_rate"] == params["model.learning_rate"]
        assert resolved["data"]["batch_size"] == params["data.batch_size"]
        lines = [json.loads(l) for l in (parent / f"trial-{k}" / "metrics.jsonl").read_text().splitlines()]
        accs = [l["metrics"]["accuracy"] for l in lines if (l["benchmark"], l["split"]) == ("scone", "dev10")]
        assert len(accs) == 2
        assert trial["best"] == max(accs) and trial["last"] == accs[-1]
        command = (parent / f"trial-{k}" / "command.txt").read_text()
        assert override_args({"model.learning_rate": params["model.learning_rate"]})[0] in command
        assert command.count("--data.batch_size=") == 1 and f"--data.batch_size={params['data.batch_size']}" in command
    ranked = [t["best"] for t in board["trials"]]
    assert ranked == sorted(ranked, reverse=True)
    markdown = (parent / "leaderboard.md").read_text()
    assert markdown.count("| trial-") == 2 and "`model.learning_rate`" in markdown
    assert markdown in out  # printed as written


def test_local_sweep_arguments_are_checked_before_any_trial(tmp_path, capsys):
    assert cli.main(["sweep", "--recipe", "scone_minilm", "--local", "0"]) == 2
    assert "at least 1" in capsys.readouterr().err
    assert cli.main(["sweep", "--recipe", "scone_minilm", "--seed", "3"]) == 2
    assert "go with --local N" in capsys.readouterr().err
