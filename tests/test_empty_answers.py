"""No answer is scored silently (docs/evaluating.md, "Empty and unreadable answers"): a model that
says nothing is still scored as its answer rule reads "" (ScoNe's "contains yes" reads "no", as the
paper's rule does), but every card counts those answers (``n_empty``) beside the score, warns above
its table when they pass a fifth of a split, and a re-score of the predictions file counts them
as the card did. The model here is the tiny Llama with its final norm's weight zeroed: every logit
is 0, so its greedy answer is token 0 (``<unk>``), a special token, decoded to nothing."""

from __future__ import annotations

import json

import pytest

from negtrain.cli import main
from tiny_models import cut_world

COMMON = ["--trainer.torch_threads=1", "--trainer.precision=32-true", "--data.eval_batch_size=4", "--model.max_new_tokens=4"]


@pytest.fixture()
def silent_model(lm_env, tmp_path, monkeypatch):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    data = cut_world(lm_env["data"], tmp_path / "data", 2, 4)  # ScoNe: 2 rows per condition (12)
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(data))
    out = tmp_path / "silent"
    model = AutoModelForCausalLM.from_pretrained(lm_env["llama"])
    with torch.no_grad():
        model.model.norm.weight.zero_()
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(lm_env["llama"]).save_pretrained(out)
    return out


def test_a_model_that_says_nothing_is_counted_and_warned_of(silent_model, tmp_path, capsys):
    out = tmp_path / "card"
    assert main(["evaluate", "--model", str(silent_model), "--family", "causal_lm", "--benchmarks", "scone",
                 "--strategy", "conditional_q", "--out", str(out), *COMMON]) == 0
    (line,) = [json.loads(s) for s in (out / "metrics.jsonl").read_text().splitlines() if '"benchmark"' in s]
    m = line["metrics"]
    assert (m["n"], m["n_empty"], m["n_unparsed"]) == (12, 12, 0)
    rows = [json.loads(s) for s in (out / "predictions" / "scone-test-validate.jsonl").read_text().splitlines()]
    assert len(rows) == 12 and all(r["empty"] is True and r["response"] == "" and r["prediction"] == "not_entailment" for r in rows)
    card = (out / "card.md").read_text()
    assert "**Answers not read.**" in card and "scone/test (empty 12, unparsed 0 of 12)" in card
    assert "(empty 12, unparsed 0 of 12)" in card.split("| scone |")[1].split("\n")[0]  # beside the score
    # How it was asked: the strategy, its shots, its rule and budget, and how many answers used it all.
    asked = card.split("## How the model was asked")[1].split("\n## ")[0]
    # (the strategy's budget, 16, not --model.max_new_tokens; every answer spent it on <unk>s, decoded to nothing)
    assert "| scone | test | generation | conditional_q | 0 | answer rule `contains_yes` on greedy text of at most 16 tokens (12 answers used all of them) |" in asked
    assert line["asked"]["at_token_limit"] == 12 and line["asked"]["max_new_tokens"] == 16
    # A re-score of the card's predictions file counts the same empty answers.
    capsys.readouterr()
    assert main(["evaluate", "--benchmark", "scone", "--split", "test", "--predictions",
                 str(out / "predictions" / "scone-test-validate.jsonl"), "--json", "--allow-missing"]) == 0
    rescored = json.loads(capsys.readouterr().out)
    assert rescored["metrics"]["n_empty"] == 12 and rescored["metrics"]["accuracy"] == m["accuracy"]


def test_a_model_that_answers_has_no_warning(lm_env, tmp_path, monkeypatch):
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(cut_world(lm_env["data"], tmp_path / "data", 2, 4)))
    out = tmp_path / "card"
    assert main(["evaluate", "--model", str(lm_env["llama"]), "--family", "causal_lm", "--benchmarks", "scone",
                 "--strategy", "conditional_q", "--out", str(out), *COMMON]) == 0
    (line,) = [json.loads(s) for s in (out / "metrics.jsonl").read_text().splitlines() if '"benchmark"' in s]
    rows = [json.loads(s) for s in (out / "predictions" / "scone-test-validate.jsonl").read_text().splitlines()]
    empty = sum(1 for r in rows if not r["response"].strip())
    assert line["metrics"]["n_empty"] == empty and all(r.get("empty", False) == (not r["response"].strip()) for r in rows)
    if empty <= 0.2 * len(rows):
        assert "**Answers not read.**" not in (out / "card.md").read_text()


def test_the_warning_counts_empty_and_unreadable_together():
    from negtrain.evaluation.card_render import silent_answers_head

    def rec(empty, unparsed, n):
        return {"benchmark": "condaqa", "split": "test", "metrics": {"n": n, "n_empty": empty, "n_unparsed": unparsed}}

    assert silent_answers_head([rec(1, 1, 10)]) is None  # 20%: not past the share
    assert "condaqa/test (empty 2, unparsed 1 of 10)" in silent_answers_head([rec(2, 1, 10)])
    assert silent_answers_head([{"benchmark": "neqa", "split": "test", "metrics": {"n": 10}}]) is None  # no generation
