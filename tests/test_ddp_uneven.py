"""Two CPU ranks (gloo) train exactly as one process when the data does not divide evenly, and
evaluation limits mean the same examples on any number of ranks.

MoNLI train is cut to 50 and to 57 rows, with length bucketing off, so one process at batch 16
and two ranks at 8 + 8 take the same 16 examples at every step (the sampler deals the single
device's batches out to the ranks):

- 50 rows: 7 batches of 8 (the last of 2), so in the last step rank 1 has nothing left and runs a
  padding batch, which must train on nothing and count for nothing;
- 57 rows: 8 batches of 8 (the last of 1), so the last step averages rank 0's 8 examples with
  rank 1's one, and must weight them 8 : 1 (the mean over 9), not 1 : 1 (the mean of two means).

The tiny model has no dropout, so the two runs compute the same function up to float rounding.
Evaluation is limited to 2 batches of 64 (``trainer.limit_val_batches``) of ScoNe test and MoNLI
test: the same examples on one rank and on two (ScoNe's 21 whole contrast sets, MoNLI's 128 rows) (Lightning's own limit counts batches per rank:
256 on two).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

import negtrain
from tiny_models import fit_in_subprocess, save_tiny_bert_nli, write_recipe

EPOCHS = 2


@pytest.fixture(scope="module")
def world(tmp_path_factory, data_dir):
    base = tmp_path_factory.mktemp("ddp_uneven")
    model = save_tiny_bert_nli(base / "bert")
    env = dict(os.environ, NEGTRAIN_CACHE_DIR=str(base / "cache"), NEGTRAIN_OFFLINE="1")
    env["PYTHONPATH"] = os.pathsep.join([str(Path(negtrain.__file__).resolve().parents[1]), env.get("PYTHONPATH", "")])
    rows = (data_dir / "atticusg/MoNLI/nmonli_train.jsonl").read_text(encoding="utf-8").splitlines()
    return base, model, env, rows


def _recipe(base: Path, model: Path, name: str) -> Path:
    return write_recipe(
        base / f"{name}.yaml",
        {
            "description": "uneven DDP shards",
            "seed": 3,
            "model": {"name": str(model), "family": "nli", "max_length": 64, "learning_rate": 5e-4, "head_labels": ["entailment", "not_entailment"]},
            "data": {
                "train": [{"benchmark": "monli", "split": "train"}],
                "eval": [{"benchmark": "scone", "split": "test"}, {"benchmark": "monli", "split": "test"}],
                "batch_size": 16,
                "eval_batch_size": 64,
                "bucket_by_length": False,
            },
            "trainer": {
                "max_epochs": EPOCHS, "limit_val_batches": 2, "accelerator": "cpu", "enable_progress_bar": False,
                "torch_threads": 1, "precision": "32-true",
            },
            "selection": {"metric": "scone/test/accuracy", "allow_test_split": True},
        },
    )


@pytest.mark.parametrize("rows", [50, 57])
def test_two_ranks_train_as_one_on_uneven_data(world, rows):
    base, model, env, all_rows = world
    # The cut split shadows the mirror's (NEGTRAIN_DATA_DIR is searched in order).
    cut = base / f"data{rows}"
    (cut / "atticusg/MoNLI").mkdir(parents=True)
    (cut / "atticusg/MoNLI/nmonli_train.jsonl").write_text("\n".join(all_rows[:rows]) + "\n", encoding="utf-8")
    run_env = dict(env, NEGTRAIN_DATA_DIR=os.pathsep.join([str(cut), env["NEGTRAIN_DATA_DIR"]]))
    recipe = _recipe(base, model, f"uneven{rows}")
    one_dir, two_dir = base / f"one{rows}", base / f"two{rows}"
    one = fit_in_subprocess(recipe, one_dir, run_env)
    two = fit_in_subprocess(recipe, two_dir, run_env, "--trainer.devices=2", "--trainer.strategy=ddp", "--data.batch_size=8")

    def train(records):
        return [r for r in records if r["benchmark"] == "train"]

    # Real examples only: the padding batch of the 50-row run counts for nothing.
    for records in (one, two):
        assert [r["train_examples"] for r in train(records)] == [rows] * EPOCHS
        assert [r["sources"]["monli/train"]["examples"] for r in train(records)] == [rows] * EPOCHS
        assert [r["global_step"] for r in train(records)] == [4, 8]
    # The loss trajectory: each epoch's mean over its examples, and the weights it ends with.
    for a, b in zip(train(one), train(two), strict=False):
        assert b["metrics"]["loss"] == pytest.approx(a["metrics"]["loss"], rel=1e-5, abs=1e-6)
    first = torch.load(one_dir / "checkpoints/last.ckpt", map_location="cpu", weights_only=True)["state_dict"]
    second = torch.load(two_dir / "checkpoints/last.ckpt", map_location="cpu", weights_only=True)["state_dict"]
    for key, value in first.items():
        # Attention key biases get an exactly-zero gradient (softmax ignores a shift shared by all
        # keys), so AdamW turns their rounding noise into lr-sized steps: not comparable.
        if value.is_floating_point() and not key.endswith("attention.self.key.bias"):
            assert torch.allclose(second[key], value, rtol=1e-4, atol=1e-5), (key, (second[key] - value).abs().max())
    # The weights moved far more than that tolerance, so the comparison means something.
    assert not torch.allclose(first["model.classifier.weight"], _initial_classifier(model), atol=1e-3)

    # Evaluation: identical metrics and prediction files, ScoNe limited to the same examples: the 21
    # whole contrast sets (126 rows) that fit in 2 batches of 64, drawn with the seed; MoNLI's 128.
    def evals(records):
        return [(r["epoch"], r["benchmark"], r["metrics"]) for r in records if r["benchmark"] != "train"]

    assert evals(two) == evals(one)
    scone = [m for _, bench, m in evals(one) if bench == "scone"]
    monli = [m for _, bench, m in evals(one) if bench == "monli"]
    assert [m["n"] for m in scone] == [126] * EPOCHS and [m["groups_scored"] for m in scone] == [21] * EPOCHS
    assert [m["n"] for m in monli] == [128] * EPOCHS
    for epoch in range(EPOCHS):
        for name in (f"scone-test-epoch{epoch}.jsonl", f"monli-test-epoch{epoch}.jsonl"):
            assert (two_dir / "predictions" / name).read_text() == (one_dir / "predictions" / name).read_text()
    preds = [json.loads(x)["prediction"] for x in (one_dir / "predictions/monli-test-epoch1.jsonl").read_text().splitlines()]
    assert len(preds) == 128 and 0 < preds.count("entailment") < 128


def _initial_classifier(model: Path) -> torch.Tensor:
    from safetensors.torch import load_file

    return load_file(str(model / "model.safetensors"))["classifier.weight"]
