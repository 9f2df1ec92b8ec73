"""``report --run`` reads a run of any family (issue 36, case 20): a report needs no model, so the
run of a family kept outside negtrain and registered only in the process that trained it is
reported by a process where it is not registered, a seed group's too. What does need the family
(export) says to register it."""

from __future__ import annotations

import json

import pytest
import yaml

from negtrain.cli import main
from negtrain.config import register_family, to_dict, unregister_family, validate_recipe
from test_fixture_family import NegationWordSection

RECIPE = {
    "description": "a run of a family from outside negtrain",
    "model": {"name": "some/encoder", "family": "negation_word", "cues": ["not", "never"]},
    "data": {"eval": [{"benchmark": "scone", "split": "test"}]},
    "trainer": {"max_epochs": 3},
    "selection": {"metric": "scone/test/accuracy"},
}
ACCURACY = (0.61, 0.74, 0.70)


def _write_run(run_dir, seed: int = 42, epochs: int = 2):
    """A run directory as fit writes it for the family, written while the family is registered
    (as in the process that trained it); two of three epochs done."""
    name = register_family(NegationWordSection)
    try:
        resolved = to_dict(validate_recipe({**RECIPE, "seed": seed}, "recipe.yaml"))
    finally:
        unregister_family(name)
    run_dir.mkdir(parents=True)
    (run_dir / "recipe.yaml").write_text("# recipe: negation_word_rule\n" + yaml.safe_dump(resolved, sort_keys=False))
    lines = []
    for epoch in range(epochs):
        acc = ACCURACY[epoch] + seed / 10_000
        lines.append({"epoch": epoch, "stage": "fit", "benchmark": "scone", "split": "test", "metrics": {"accuracy": acc, "n": 1200.0}})
        lines.append({"epoch": epoch, "stage": "fit", "benchmark": "train", "split": "train", "metrics": {"loss": 0.7 - 0.1 * epoch}})
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return run_dir


def test_a_run_of_an_unregistered_family_is_reported(tmp_path, capsys):
    run = _write_run(tmp_path / "run")
    assert "negation_word" in (run / "recipe.yaml").read_text()
    assert main(["report", "--run", str(run)]) == 0, capsys.readouterr().err
    summary = (run / "report" / "summary.md").read_text()
    assert "selection `scone/test/accuracy`" in summary
    assert "is unfinished: it trained 2 of 3 epochs" in summary  # the trainer section, read alone
    assert "| scone/test | accuracy | 0.7442 |" in summary  # the best epoch, by hand: 0.74 + 42/10000
    assert (run / "report" / "metrics.png").stat().st_size > 0


def test_a_seed_group_of_an_unregistered_family_is_reported(tmp_path, capsys):
    parent = tmp_path / "seeds"
    for seed in (1, 2):
        _write_run(parent / f"seed{seed}", seed=seed)
    (parent / "seeds.json").write_text(json.dumps({"recipe": "negation_word_rule", "seeds": [1, 2], "runs": ["seed1", "seed2"]}))
    assert main(["report", "--run", str(parent)]) == 0, capsys.readouterr().err
    summary = (parent / "report" / "summary.md").read_text()
    assert "differ only in `seed`" in summary
    data = json.loads((parent / "report" / "summary.json").read_text())
    final = [row for row in data["metrics"]["scone/test"]["accuracy"] if row["epoch"] == 1][0]
    assert final["mean"] == pytest.approx(0.74 + 1.5 / 10_000)


def test_what_needs_the_family_says_to_register_it(tmp_path, capsys):
    run = _write_run(tmp_path / "run")
    (run / "checkpoints").mkdir()
    (run / "checkpoints" / "best-epoch1.ckpt").write_bytes(b"never read: the recipe is refused first")
    capsys.readouterr()
    assert main(["export", "--run", str(run), "--out", str(tmp_path / "export")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ")
    assert "(got 'negation_word')" in err[0] and "must be registered first: negtrain.config.register_family(" in err[0]
    assert not (tmp_path / "export").exists()
