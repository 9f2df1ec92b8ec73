"""A causal LM's per-epoch evaluation during ``fit`` goes through the one engine (the module's
in-process backend over the live model, each rank answering the rows Lightning's DDP sampler deals
it), and two CPU processes (gloo) give the same evaluation as one: every metric, and the
predictions files to the byte.

Why the runs are comparable (as tests/test_ddp.py): with length bucketing off, batches are formed
globally from the seed and the epoch and dealt out to the ranks, so two ranks at batch size 2 take,
at each step, the 4 examples one process at batch size 4 takes, and DDP's averaged gradient is the
mean over those 4. The tiny Llama has no dropout. The eval rows are sharded over the ranks and
gathered by the metric, so ScoNe contrast sets scored on different ranks are scored whole.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import negtrain
from negtrain.cli import main
from tiny_models import cut_world, fit_in_subprocess, write_recipe

SCONE_ROWS = 2  # per condition file: 12 examples, 2 contrast sets
CONDAQA_ROWS = 6
EPOCHS = 2


def _evals(records: list[dict]) -> list[tuple]:
    return [(r["epoch"], r["benchmark"], r["split"], r["metrics"]) for r in records if r["benchmark"] != "train"]


def test_two_cpu_processes_evaluate_a_causal_lm_through_the_engine_as_one(lm_world, tmp_path, monkeypatch, one_thread):
    data = cut_world(lm_world["data"], tmp_path / "data", SCONE_ROWS, CONDAQA_ROWS)
    recipe = write_recipe(tmp_path / "lm_ddp.yaml", {
        "description": "DDP equivalence of a causal LM's per-epoch evaluation",
        "model": {"name": str(lm_world["llama"]), "family": "causal_lm", "max_length": 64, "learning_rate": 1e-3, "max_new_tokens": 6},
        "data": {
            "train": [{"benchmark": "tinad", "split": "train"}],
            "eval": [{"benchmark": "scone", "split": "test"}, {"benchmark": "condaqa", "split": "dev"}],
            "batch_size": 4,
            "eval_batch_size": 4,
            "bucket_by_length": False,
        },
        "trainer": {"max_epochs": EPOCHS, "limit_train_batches": 3, "accelerator": "cpu", "enable_progress_bar": False,
                    "torch_threads": 1, "precision": "32-true"},
        "selection": {"metric": "scone/test/consistency", "allow_test_split": True},
        "logger": "none",
    })
    env = dict(os.environ, NEGTRAIN_DATA_DIR=str(data), NEGTRAIN_CACHE_DIR=str(tmp_path / "cache"), NEGTRAIN_OFFLINE="1", OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join([str(Path(negtrain.__file__).resolve().parents[1]), str(Path(__file__).parent), env.get("PYTHONPATH", "")])

    one = fit_in_subprocess(recipe, tmp_path / "one", env)
    # A limit counts batches of data.batch_size, whatever the number of ranks: 3 of 4 = 6 of 2.
    two = fit_in_subprocess(recipe, tmp_path / "two", env, "--trainer.devices=2", "--trainer.strategy=ddp", "--data.batch_size=2",
               "--trainer.limit_train_batches=6")

    assert [(e, b) for e, b, _, _ in _evals(one)] == [(e, b) for e in range(EPOCHS) for b in ("scone", "condaqa")]
    for (ea, ba, sa, a), (eb, bb, sb, b) in zip(_evals(two), _evals(one), strict=True):
        assert (ea, ba, sa) == (eb, bb, sb) and a.keys() == b.keys()
        for k, v in b.items():
            assert a[k] == pytest.approx(v, abs=1e-6) or (v is None and a[k] is None), (eb, bb, k)
    by = {(e, b): m for e, b, _, m in _evals(one)}
    assert by[(0, "scone")]["n"] == 6 * SCONE_ROWS and by[(0, "scone")]["groups_scored"] == SCONE_ROWS
    assert by[(0, "condaqa")]["n"] == CONDAQA_ROWS
    # Training saw the same examples and moved the model the same way on one rank and two.
    losses = [[r["metrics"]["loss"] for r in run if r["benchmark"] == "train"] for run in (one, two)]
    assert len(losses[0]) == EPOCHS and losses[1] == pytest.approx(losses[0], rel=1e-4)
    for epoch in range(EPOCHS):
        for name in ("scone-test", "condaqa-dev"):
            path = f"predictions/{name}-epoch{epoch}.jsonl"
            assert (tmp_path / "two" / path).read_text() == (tmp_path / "one" / path).read_text(), path
    # The evaluation went through the engine: the last epoch's predictions (greedy texts for CondaQA,
    # each label's log-likelihood for ScoNe) are, to the byte, what a report card answers through the
    # transformers backend (the in-process engine, no Lightning) on the run's last checkpoint.
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(data))
    monkeypatch.setenv("NEGTRAIN_CACHE_DIR", str(tmp_path / "cache"))
    card = tmp_path / "card"
    assert main(["evaluate", "--model", str(tmp_path / "one" / "checkpoints" / "last.ckpt"), "--backend", "transformers",
                 "--benchmarks", "scone,condaqa", "--data.eval=[{benchmark: scone, split: test}, {benchmark: condaqa, split: dev}]",
                 "--data.eval_batch_size=4", "--out", str(card)]) == 0
    last = EPOCHS - 1
    for name in ("scone-test", "condaqa-dev"):
        assert (card / "predictions" / f"{name}-validate.jsonl").read_text() == (tmp_path / "one" / f"predictions/{name}-epoch{last}.jsonl").read_text()
    condaqa = [json.loads(line) for line in (tmp_path / "two" / f"predictions/condaqa-dev-epoch{last}.jsonl").read_text().splitlines()]
    assert len(condaqa) == CONDAQA_ROWS and all(r["response"] == r["prediction"] and r["response"] for r in condaqa)
    # Training changed what the model answers (the epochs' predictions are not the same numbers).
    assert (tmp_path / "one" / "predictions/scone-test-epoch0.jsonl").read_text() != (tmp_path / "one" / f"predictions/scone-test-epoch{last}.jsonl").read_text()
