"""A report card on the default backend (``hf``: the model loaded in this process) imports neither
Lightning nor the training floor: a language model's card answers the engine's requests through
the in-process backend, and the Lightning Trainer is only for training (ARCHITECTURE.md, "One
engine, and Lightning only for training"). Checked for a causal LM and a seq2seq model, each in a
process of its own (an in-process test would see what earlier tests imported), through the modules
left in ``sys.modules`` when the card has finished."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from test_served_imports import CARD, UNUSED_ON_EVALUATION, _imported
from test_table_backend import scone_cut  # noqa: F401 (a fixture: ScoNe's test split cut to 3 rows a file)

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(("model", "family"), [("llama", "causal_lm"), ("t5", "seq2seq")])
def test_a_card_on_the_default_backend_imports_no_lightning_and_nothing_of_training(lm_world, scone_cut, tmp_path, model, family):  # noqa: F811
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", "OMP_NUM_THREADS": "1"}
    out = tmp_path / "card"
    done = subprocess.run([sys.executable, "-c", CARD, "evaluate", "--model", str(lm_world[model]), "--family", family,
                           "--benchmarks", "scone", "--out", str(out), "--data.eval_batch_size=4"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["code"] == 0
    rows = [json.loads(line) for line in (out / "predictions" / "scone-test-validate.jsonl").read_text().splitlines()]
    assert len(rows) == 18 and all(set(r["response"]) == {"entailment", "not_entailment"} for r in rows)  # scored: each label's score
    # The card answered through the engine, on the model loaded here.
    for name in ("negtrain.serving.in_process", "negtrain.engine.entry_requests", "negtrain.evaluation.served", "transformers"):
        assert name in result["modules"], name
    for name in UNUSED_ON_EVALUATION:
        assert _imported(name, result["modules"]) == [], name
