"""The in-process response cache is keyed by what the model computes, not by its path: new
weights saved into the same folder miss the cache (and give other numbers); the same weights
hit it and compute nothing."""

from __future__ import annotations

import json
import shutil

import negtrain.serving.in_process as in_process
from negtrain.cli import main
from tiny_models import save_tiny_llama

ARGS = ["--family", "causal_lm", "--benchmarks", "condaqa", "--trainer.limit_val_batches=1", "--data.eval_batch_size=4",
        "--model.max_new_tokens=4", "--trainer.torch_threads=1", "--evaluation.bootstrap=0"]


def _responses(out):
    return [json.loads(x)["response"] for x in (out / "predictions" / "condaqa-test-validate.jsonl").read_text().splitlines()]


def test_a_cache_reused_across_a_weights_change_in_the_same_folder_misses(lm_env, tmp_path, monkeypatch):
    folder, cache = tmp_path / "model", tmp_path / "shared.sqlite"
    shutil.copytree(lm_env["llama"], folder)
    greedy, computed = in_process.respond_ids, []

    def counting(model_, tokenizer, ids, *rest):
        computed.append(len(ids))
        return greedy(model_, tokenizer, ids, *rest)

    monkeypatch.setattr(in_process, "respond_ids", counting)

    def card(name):
        computed.clear()
        assert main(["evaluate", "--model", str(folder), "--out", str(tmp_path / name), "--cache", str(cache), *ARGS]) == 0
        return _responses(tmp_path / name), list(computed)

    first, rows = card("first")
    assert rows == [4]
    save_tiny_llama(folder, lm_env["data"], seed=1)  # other weights (same tokenizer), saved over the same folder
    second, rows = card("second")
    assert rows == [4], "the answers of the old weights were served for the new ones"
    assert second != first
    third, rows = card("third")
    assert rows == [] and third == second  # same weights: every row from the cache, nothing computed
