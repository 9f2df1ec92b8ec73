"""A run directory written before the config package (and before the model section was typed per
family) still loads, resumes, exports, scores a report card and is read by `report` and `compare`.

The fixture ``tests/fixtures/run_before_config_package`` was written by the release before that
change (commit e225a24): ``run/`` is ``negtrain fit`` of a 1-layer, 16-wide BERT classifier
(``tiny-bert/``, made by ``make_tiny_bert.py``) on ScoNe for two epochs of three steps, killed
with SIGKILL before the second epoch's first batch. Its ``recipe.yaml`` lists every field of the
old single model section, those of other families included (``verbalizer_score`` on an NLI
model). ``scone_minilm_recipe.yaml`` and ``causal_lm_recipe.yaml`` are the recipe.yaml of a
``scone_minilm`` run and of a tiny causal LM's run of the same release.
"""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from conftest import FIXTURES
from negtrain.cli import main
from negtrain.recipes import load_recipe

OLD = FIXTURES / "run_before_config_package"


def _as_old(new, old):
    """``new`` cut to the keys ``old`` has (settings added since then are not in an old file)."""
    if isinstance(old, dict) and isinstance(new, dict):
        return {k: _as_old(new.get(k), v) for k, v in old.items()}
    if isinstance(old, list) and isinstance(new, list):
        return [_as_old(n, o) for n, o in zip(new, old, strict=False)]
    return new


@pytest.fixture
def old_run(tmp_path, monkeypatch):
    """A copy of the old run, in a working directory where its relative model name resolves."""
    shutil.copytree(OLD / "tiny-bert", tmp_path / "tiny-bert")
    shutil.copytree(OLD / "run", tmp_path / "run")
    monkeypatch.chdir(tmp_path)
    return tmp_path / "run"


@pytest.mark.parametrize("name", ["run/recipe.yaml", "scone_minilm_recipe.yaml", "causal_lm_recipe.yaml"])
def test_an_old_recipe_yaml_loads_to_the_same_settings(name):
    recipe = load_recipe(str(OLD / name)).recipe
    old = yaml.safe_load((OLD / name).read_text(encoding="utf-8"))
    dumped = recipe.model_dump(mode="json")
    for section in ("data", "trainer", "selection", "evaluation", "logger", "adapter"):
        assert _as_old(dumped[section], old[section]) == old[section], section  # settings added since take defaults
    own = {key: value for key, value in old["model"].items() if key in dumped["model"]}
    assert _as_old(dumped["model"], own) == own
    assert set(own) >= {"name", "family", "learning_rate"}


def test_an_old_run_resumes_exports_and_is_reported_and_compared(old_run, tmp_path, capsys):
    lines = (old_run / "metrics.jsonl").read_text().splitlines()
    assert {json.loads(line)["epoch"] for line in lines} == {0}
    assert main(["fit", "--resume", str(old_run)]) == 0
    records = [json.loads(line) for line in (old_run / "metrics.jsonl").read_text().splitlines()]
    assert (old_run / "metrics.jsonl").read_text().splitlines()[: len(lines)] == lines  # epoch 0 kept as it was
    assert sorted({r["epoch"] for r in records}) == [0, 1]
    assert (old_run / "predictions" / "scone-test-epoch1.jsonl").exists()

    out = tmp_path / "exported"
    assert main(["export", "--run", str(old_run), "--out", str(out)]) == 0
    assert (out / "config.json").exists() and (out / "README.md").exists()

    assert main(["report", "--run", str(old_run)]) == 0
    assert "scone/test" in (old_run / "report" / "summary.md").read_text()

    card = tmp_path / "card"
    assert main(["evaluate", "--model", str(old_run), "--benchmarks", "scone", "--out", str(card), "--trainer.limit_val_batches=1"]) == 0
    assert (card / "card.md").exists()

    untouched = tmp_path / "untouched"
    shutil.copytree(OLD / "run", untouched)
    capsys.readouterr()
    assert main(["compare", str(untouched), str(old_run), "--bootstrap", "50", "--allow-missing", "--json"]) == 0
    assert "scone" in capsys.readouterr().out
