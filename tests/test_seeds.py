"""`fit --seeds`: one run per seed under one parent, and `report` on the parent across seeds."""

from __future__ import annotations

import json
import math

import pytest
import yaml

from negtrain import cli
from negtrain.runs.seeds import parse_seeds, seed_command

from conftest import FAST


def test_parse_seeds_and_the_per_seed_command():
    assert parse_seeds("1,2,3") == [1, 2, 3]
    for bad, message in (("1,x", "integers"), ("1,1", "repeats"), ("", "at least one"), ("-1", "outside")):
        with pytest.raises(Exception, match=message):
            parse_seeds(bad)
    argv = ["fit", "--recipe", "r", "--seeds", "1,2", "--trainer.max_epochs=1"]
    assert seed_command(argv, 2) == ["fit", "--recipe", "r", "--trainer.max_epochs=1", "--seed=2"]
    assert seed_command(["fit", "--seeds=1,2"], 1) == ["fit", "--seed=1"]


def test_fit_seeds_writes_one_run_per_seed_and_report_gives_mean_and_std(tmp_path, capsys):
    from PIL import Image

    parent = tmp_path / "seeds"
    args = ["fit", "--recipe", "scone_minilm", "--seeds", "1,2", "--output-dir", str(parent), "--logger=none",
            *FAST, "--trainer.max_epochs=2", "--evaluation.bootstrap=100"]
    assert cli.main(args) == 0
    assert json.loads((parent / "seeds.json").read_text())["runs"] == ["seed1", "seed2"]
    recipes = [yaml.safe_load((parent / f"seed{s}" / "recipe.yaml").read_text()) for s in (1, 2)]
    assert [r.pop("seed") for r in recipes] == [1, 2]
    assert recipes[0] == recipes[1]  # nothing else differs
    assert (parent / "seed2" / "command.txt").read_text().strip().endswith("--seed=2")
    assert "--seeds" not in (parent / "seed2" / "command.txt").read_text()

    capsys.readouterr()
    assert cli.main(["report", "--run", str(parent)]) == 0
    summary = json.loads((parent / "report" / "summary.json").read_text())
    assert summary["seeds"] == [1, 2] and summary["recipes_differ_in"] == []
    for epoch in (0, 1):
        values = []
        for s in (1, 2):
            records = [json.loads(l) for l in (parent / f"seed{s}" / "metrics.jsonl").read_text().splitlines()]
            [rec] = [r for r in records if (r["benchmark"], r["split"]) == ("scone", "test") and r["epoch"] == epoch]
            values.append(rec["metrics"]["accuracy"])
        row = summary["metrics"]["scone/test"]["accuracy"][epoch]
        assert row["epoch"] == epoch and row["seeds"] == {"1": values[0], "2": values[1]}
        assert row["mean"] == pytest.approx(sum(values) / 2)
        assert row["std"] == pytest.approx(abs(values[0] - values[1]) / math.sqrt(2))
    assert "n" not in summary["metrics"]["scone/test"]  # counts are not averaged
    assert len(summary["metrics"]["train"]["loss"]) == 2
    md = (parent / "report" / "summary.md").read_text()
    assert "differ only in `seed`" in md and "| scone/test | accuracy |" in md
    with Image.open(parent / "report" / "metrics.png") as img:
        assert img.text["negtrain:panels"].split(",") == ["scone/dev10", "scone/test", "monli/test"]


def test_seeds_and_seed_together_is_an_error(tmp_path, capsys):
    code = cli.main(["fit", "--recipe", "scone_minilm", "--seeds", "1,2", "--seed=3", "--output-dir", str(tmp_path / "x")])
    assert code == 2 and "either --seeds or --seed" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
