"""Seed groups continue and report every seed: ``fit --seeds`` again continues a killed group,
a parent that is a run is refused, a missing or NaN seed is named in ``report``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from conftest import make_fake_run
from negtrain import cli
from test_one_writer import kill_at, stamps


def test_seeds_into_a_finished_run_is_refused(fake_run, capsys):
    assert cli.main(["fit", "--recipe", "scone_minilm", "--seeds", "5", "--output-dir", str(fake_run)]) == 2
    err = capsys.readouterr().err
    assert "is a run directory (metrics.jsonl), not the parent of seed runs" in err
    assert not (fake_run / "seed5").exists() and not (fake_run / "seeds.json").exists()


@pytest.mark.slow
def test_the_same_seeds_command_continues_a_killed_group(tmp_path, capsys):
    from crash_fit import tiny_model
    from test_resume import recipe_text

    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(recipe_text(tiny_model(tmp_path / "tiny"), epoch=32).replace("max_epochs: 3", "max_epochs: 2, limit_val_batches: 1"))
    parent = tmp_path / "group"
    args = ["fit", "--recipe", str(recipe), "--seeds", "1,2", "--output-dir", str(parent)]
    # Seed 1 finishes; seed 2 is killed in its second epoch.
    kill_at(tmp_path / "killed", "train:1:0:1", *args)
    seed1 = stamps(parent / "seed1")
    assert {json.loads(line)["epoch"] for line in (parent / "seed2" / "metrics.jsonl").read_text().splitlines()} == {0}
    # Resumed by hand, as a user would: then the group, with a third seed, goes on where it is.
    assert cli.main(["fit", "--resume", str(parent / "seed2")]) == 0
    seed2 = stamps(parent / "seed2")
    capsys.readouterr()
    assert cli.main(["fit", "--recipe", str(recipe), "--seeds", "1,2,3", "--output-dir", str(parent)]) == 0
    out = capsys.readouterr().out
    assert "already holds a run" not in out
    assert stamps(parent / "seed1") == seed1 and stamps(parent / "seed2") == seed2  # kept, not trained again
    assert json.loads((parent / "seeds.json").read_text())["seeds"] == [1, 2, 3]
    for seed in (1, 2, 3):
        records = [json.loads(line) for line in (parent / f"seed{seed}" / "metrics.jsonl").read_text().splitlines()]
        assert sorted((r["epoch"], r["benchmark"]) for r in records) == sorted((e, b) for e in (0, 1) for b in ("train", "monli", "scone"))
        assert yaml.safe_load((parent / f"seed{seed}" / "recipe.yaml").read_text())["seed"] == seed
    # Another recipe in the same parent is refused.
    assert cli.main(["fit", "--recipe", str(recipe), "--seeds", "1,2,3", "--output-dir", str(parent), "--model.learning_rate=0.5"]) == 2
    assert "trained with another recipe (it differs in model.learning_rate)" in capsys.readouterr().err


@pytest.fixture(scope="module")
def group_with_a_missing_and_a_nan_seed(tmp_path_factory) -> Path:
    parent = tmp_path_factory.mktemp("group") / "seeds"
    make_fake_run(parent / "seed1")
    shutil.copytree(parent / "seed1", parent / "seed2")
    lines = [json.loads(line) for line in (parent / "seed2" / "metrics.jsonl").read_text().splitlines()]
    for line in lines:
        if line["benchmark"] == "scone":
            line["metrics"]["accuracy"] = 0.5 if line["epoch"] != 2 else float("nan")  # seed 2 diverged in epoch 2
    (parent / "seed2" / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))  # a bare NaN
    (parent / "seeds.json").write_text(json.dumps({"recipe": "scone_minilm", "seeds": [1, 2, 3], "runs": ["seed1", "seed2", "seed3"]}))
    return parent


def test_report_names_a_missing_seed_and_notes_a_nan_one(group_with_a_missing_and_a_nan_seed, capsys):
    parent = group_with_a_missing_and_a_nan_seed
    assert cli.main(["report", "--run", str(parent)]) == 0
    out = capsys.readouterr().out
    assert "seed 3 is listed in" in out and "seed3/ is missing" in out
    text = (parent / "report" / "summary.json").read_text()
    summary = json.loads(text, parse_constant=lambda bare: pytest.fail(f"summary.json holds a bare {bare}"))
    assert summary["missing_seeds"] == [{"seed": 3, "why": "seed3/ is missing"}]
    rows = {r["epoch"]: r for r in summary["metrics"]["scone/test"]["accuracy"]}
    assert rows[0]["mean"] == pytest.approx((0.61 + 0.5) / 2) and "note" not in rows[0]
    assert rows[2]["seeds"] == {"1": 0.70, "2": None}
    assert rows[2]["mean"] == pytest.approx(0.70) and rows[2]["std"] is None
    assert rows[2]["note"].startswith("seed 2: NaN") and "1 of 2 seeds count" in rows[2]["note"]
    md = (parent / "report" / "summary.md").read_text()
    assert "**Missing seeds**" in md and "seed 3: seed3/ is missing" in md
    assert "note: scone/test accuracy, epoch 2: seed 2: NaN" in md
