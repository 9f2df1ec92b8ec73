"""`trainer.ema_decay`: evaluation, checkpoints and the final model use the averaged weights."""

from __future__ import annotations

import json

import lightning.pytorch as pl
import pytest
import torch

from negtrain.cli import main

FAST = [
    "--trainer.max_epochs=2", "--trainer.limit_train_batches=4", "--trainer.enable_progress_bar=false", "--data.batch_size=8",
    "--data.eval=[{benchmark: monli, split: test}]", "--selection.metric=monli/test/accuracy",
    "--selection.allow_test_split=true",
]
PROBED = "model.bert.encoder.layer.5.output.dense.weight"


class Probe(pl.Callback):
    """Copies a trained weight as the evaluation batches see it."""

    def __init__(self):
        self.seen = {}

    def on_validation_batch_end(self, trainer, pl_module, *args):
        self.seen[trainer.current_epoch] = pl_module.state_dict()[PROBED].clone()


@pytest.fixture(scope="module")
def ema_run(tmp_path_factory, data_dir):
    from negtrain.training import run

    probe = Probe()
    make = run._make_trainer
    mp = pytest.MonkeyPatch()
    mp.setattr(run, "_make_trainer", lambda t, d, callbacks, *a: make(t, d, [*callbacks, probe], *a))
    out = tmp_path_factory.mktemp("ema") / "run"
    try:
        assert main(["fit", "--recipe", "scone_minilm", "--output-dir", str(out), "--trainer.ema_decay=0.5", *FAST]) == 0
    finally:
        mp.undo()
    return out, probe.seen


def _evals(path, epoch=None):
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    return {x["benchmark"]: x["metrics"] for x in lines if x["benchmark"] != "train" and epoch in (None, x["epoch"])}


def test_checkpoint_holds_the_average_and_the_current_weights(ema_run):
    ema_run, _ = ema_run
    state = torch.load(ema_run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    average, current = state["state_dict"], state["current_model_state"]
    assert average.keys() == current.keys()
    trained = [k for k in average if "encoder.layer.5" in k and k.endswith("weight")]
    assert trained and all(not torch.equal(average[k], current[k]) for k in trained)
    # The frozen word embeddings never move, so their average is themselves.
    emb = "model.bert.embeddings.word_embeddings.weight"
    assert torch.equal(average[emb], current[emb])


def test_evaluation_during_fit_used_the_averaged_weights(ema_run, tmp_path):
    ema_run, seen = ema_run
    state = torch.load(ema_run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    assert torch.equal(seen[1], state["state_dict"][PROBED])
    assert not torch.equal(seen[1], state["current_model_state"][PROBED])
    # `validate` loads the checkpoint's state_dict (the average) and reproduces the epoch's numbers.
    out = tmp_path / "val"
    last = ema_run / "checkpoints" / "last.ckpt"
    assert main(["validate", "--recipe", str(ema_run / "recipe.yaml"), "--checkpoint", str(last), "--output-dir", str(out), "--trainer.enable_progress_bar=false"]) == 0
    assert _evals(out / "metrics.jsonl") == _evals(ema_run / "metrics.jsonl", epoch=1)


def test_the_saved_model_is_the_average(ema_run):
    ema_run, _ = ema_run
    from transformers import AutoModelForSequenceClassification

    state = torch.load(ema_run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)["state_dict"]
    exported = ema_run / "exported"
    assert main(["export", "--run", str(ema_run), "--checkpoint", "last", "--out", str(exported)]) == 0
    model = AutoModelForSequenceClassification.from_pretrained(exported)
    key = "bert.encoder.layer.5.output.dense.weight"
    assert torch.equal(model.state_dict()[key], state[f"model.{key}"])
