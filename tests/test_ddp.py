"""DDP on two CPU processes (gloo) gives the same per-epoch evaluation as one process.

Why the runs are comparable: batches are formed globally from the seed and the epoch and dealt out
to the ranks, so with length bucketing off, two ranks at batch size 8 take, at each step, exactly
the 16 examples that one process at batch size 16 takes, and DDP's averaged gradient is the mean
over those 16. The model has no dropout. Evaluation is sharded over the ranks and gathered by the
metric, so ScoNe contrast sets whose six members were scored on different ranks are scored whole.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

import negtrain
from negtrain.data.sampler import BatchSampler
from tiny_models import fit_in_subprocess, save_tiny_bert_nli, write_recipe


def test_two_cpu_processes_match_one(tmp_path):
    mirror = os.environ.get("NEGTRAIN_DATA_DIR")
    if not mirror or not (Path(mirror) / "selenashe/ScoNe").is_dir():
        pytest.skip("needs NEGTRAIN_DATA_DIR with the ScoNe and MoNLI mirror")
    model = save_tiny_bert_nli(tmp_path / "bert")
    recipe = write_recipe(
        tmp_path / "ddp.yaml",
        {
            "description": "DDP equivalence test",
            "model": {"name": str(model), "family": "nli", "max_length": 64, "learning_rate": 5e-4, "head_labels": ["entailment", "not_entailment"]},
            "data": {
                "train": [{"benchmark": "monli", "split": "train"}],
                "eval": [{"benchmark": "scone", "split": "test"}],
                "batch_size": 16,
                "eval_batch_size": 64,
                "bucket_by_length": False,
            },
            "trainer": {"max_epochs": 2, "limit_train_batches": 6, "accelerator": "cpu", "enable_progress_bar": False, "torch_threads": 1},
            "selection": {"metric": "scone/test/consistency", "allow_test_split": True},
        },
    )
    env = dict(os.environ, NEGTRAIN_CACHE_DIR=str(tmp_path / "cache"), NEGTRAIN_OFFLINE="1")
    env["PYTHONPATH"] = os.pathsep.join([str(Path(negtrain.__file__).resolve().parents[1]), env.get("PYTHONPATH", "")])

    # The eval batches dealt to rank 0 and rank 1 split contrast sets between the ranks.
    from negtrain.benchmarks.registry import get_benchmark

    examples = get_benchmark("scone").load("test")
    lengths = np.ones(len(examples))
    rank_of = {}
    for rank in (0, 1):
        sampler = BatchSampler(lengths, 64, shuffle=False, bucket=False, num_replicas=2, rank=rank)
        for batch in sampler:
            for i in batch:
                rank_of.setdefault(i, rank)
    groups: dict[str, set[int]] = {}
    for i, ex in enumerate(examples):
        groups.setdefault(ex.group, set()).add(rank_of[i])
    assert sum(len(r) == 2 for r in groups.values()) > 100

    one = fit_in_subprocess(recipe, tmp_path / "one", env)
    # A limit counts batches of data.batch_size, whatever the number of ranks: 6 of 16 = 12 of 8.
    two = fit_in_subprocess(recipe, tmp_path / "two", env, "--trainer.devices=2", "--trainer.strategy=ddp", "--data.batch_size=8", "--trainer.limit_train_batches=12")

    def evals(records):
        return [(r["epoch"], r["benchmark"], r["split"], r["metrics"]) for r in records if r["benchmark"] != "train"]

    assert len(evals(one)) == 2
    assert evals(two) == evals(one)
    e0 = evals(one)[0][3]
    assert e0["n"] == 1200 and e0["groups_scored"] == 200
    # Training saw the same examples: 6 steps x 16 per epoch either way.
    assert [r["train_examples"] for r in one if r["benchmark"] == "train"] == [96, 96]
    assert [r["train_examples"] for r in two if r["benchmark"] == "train"] == [96, 96]
    # The epoch's training loss is averaged over both ranks' batches.
    losses = [[r["metrics"]["loss"] for r in run if r["benchmark"] == "train"] for run in (one, two)]
    assert losses[1] == pytest.approx(losses[0], rel=1e-4)
    # Per example too, and the predictions are not one constant label (the comparison means something).
    for epoch in (0, 1):
        name = f"predictions/scone-test-epoch{epoch}.jsonl"
        assert (tmp_path / "two" / name).read_text() == (tmp_path / "one" / name).read_text()
    preds = [json.loads(x)["prediction"] for x in (tmp_path / "one" / "predictions/scone-test-epoch1.jsonl").read_text().splitlines()]
    assert len(preds) == 1200 and 0 < preds.count("entailment") < 1200
    assert 0 < e0["consistency"] < 1 or 0 < evals(one)[1][3]["consistency"] < 1 or e0["accuracy"] != 0.5
