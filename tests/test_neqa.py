"""NeQA (Zhang et al. 2023): the real mirrored rows, lm-eval's acc / acc_norm on hand-computed
cases, the continuation scorer against a naive loop, `evaluate --predictions`, and a causal and a
seq2seq model scoring it end to end."""

from __future__ import annotations

import collections
import json
import math
from pathlib import Path

import pytest
import torch

from negtrain.benchmarks.neqa import Neqa, NeqaLettered
from negtrain.metrics.multiple_choice import MultipleChoiceMetric, choose
from tiny_models import choice_loglikelihoods_one_at_a_time, save_tiny_llama, save_tiny_t5, validate_tiny


def test_real_rows_load(data_dir):
    examples = Neqa().load("test")
    assert len(examples) == 1_718
    assert examples[0].id == "neqa/test/0" and examples[-1].id == "neqa/test/1717"
    assert examples[0].meta["choices"] == ("feathers slows heat transfer", "small flexible solar panels")
    assert examples[0].label == "1"
    assert collections.Counter(e.label for e in examples) == {"0": 859, "1": 859}
    sources = collections.Counter(e.subset for e in examples)
    assert sources == {"OpenBookQA": 500, "TREx": 594, "GoogleRE": 374, "ConceptNet": 150, "SQUAD": 100}
    rules = collections.Counter(t for e in examples for t in e.meta["tags"] if t.startswith("negation_rule/"))
    assert rules["negation_rule/not/be"] == 100 and sum(rules.values()) == 500


def test_lettered_prompt():
    from negtrain.benchmarks.base import Example

    e = Example("neqa-lettered/test/0", ("Birds cannot",), "1", meta={"choices": ("fly", "swim"), "tags": ()})
    b = NeqaLettered()
    assert b.context(e).endswith("Question: Birds cannot\nA. fly\nB. swim\nAnswer:")
    assert b.choices(e) == (" A", " B") and b.target_delimiter == ""
    assert b.choice_label("B", e) == "1" and b.choice_label("swim", e) == "1"


# ------------------------------------------------------------------------------------------------
# acc / acc_norm by hand


def test_acc_and_acc_norm_disagree_by_hand():
    # q0: choices "a" (1 char) and "bbbbbbbbbb" (10 chars), ll = -2 and -5:
    #     acc picks 0 (-2 > -5); acc_norm picks 1 (-5/10 = -0.5 > -2/1 = -2). Gold 1.
    # q1: ll = -3 and -3 (a tie) with lengths 3 and 3: both pick the first index, 0. Gold 0.
    # q2: ll = -9 and -1, lengths 2 and 4: both pick 1. Gold 0.
    logprob = torch.tensor([[-2.0, -5.0], [-3.0, -3.0], [-9.0, -1.0]])
    chars = torch.tensor([[1.0, 10.0], [3.0, 3.0], [2.0, 4.0]])
    chosen = choose(logprob, chars)
    assert chosen.tolist() == [[0, 1], [0, 0], [1, 1]]
    m = MultipleChoiceMetric([1, 0, 0], [("source/A",), ("source/A",), ("source/B",)])
    m.update(torch.arange(3), chosen)
    v = {k: float(x) for k, x in m.compute().items()}
    assert v["accuracy"] == pytest.approx(1 / 3)  # q1 only
    assert v["accuracy_norm"] == pytest.approx(2 / 3)  # q0 and q1
    assert v["accuracy/source/A"] == pytest.approx(1 / 2) and v["accuracy/source/B"] == 0.0
    assert v["n"] == 3


def test_a_single_choice_per_question_gives_no_accuracy_norm():
    m = MultipleChoiceMetric([1, 0])
    m.update(torch.arange(2), torch.tensor([1, 1]))
    v = {k: float(x) for k, x in m.compute().items()}
    assert v["accuracy"] == 0.5 and math.isnan(v["accuracy_norm"])
    assert "accuracy_norm needs" in m.note


# ------------------------------------------------------------------------------------------------
# The continuation scorer against a naive per-choice loop


def _naive(model, context, cont, encoder_decoder):
    with torch.no_grad():
        if encoder_decoder:
            logits = model(input_ids=torch.tensor([context]), labels=torch.tensor([cont])).logits[0]
            logp = torch.log_softmax(logits.float(), -1)
            return sum(logp[t, tok].item() for t, tok in enumerate(cont))
        ids = torch.tensor([context + cont])
        logp = torch.log_softmax(model(input_ids=ids).logits[0].float(), -1)
        return sum(logp[len(context) + t - 1, tok].item() for t, tok in enumerate(cont))


@pytest.mark.parametrize("family", ["causal_lm", "seq2seq"])
def test_continuation_logprobs_equal_a_naive_loop(family, tmp_path, one_thread):
    from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

    from negtrain.models.choice_inputs import encode_choices
    from negtrain.models.continuation import continuation_logprobs

    causal = family == "causal_lm"
    path = save_tiny_llama(tmp_path / "m", None) if causal else save_tiny_t5(tmp_path / "m", None)
    tok = AutoTokenizer.from_pretrained(path)
    model = (AutoModelForCausalLM if causal else AutoModelForSeq2SeqLM).from_pretrained(path).eval()
    contexts = ["Is the following statement True or False?", "Birds can"]
    # the two choices of the second question share their first sub-token and differ later
    options = [("True", "False"), ("True False", "True yes no")]
    ctx, conts = encode_choices(tok, contexts, options, " ", causal, 64)
    assert conts[1][0][0] == conts[1][1][0] and conts[1][0] != conts[1][1]
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    scores = continuation_logprobs(model, ctx, conts, encoder_decoder=not causal, pad_id=pad)
    for i in range(2):
        for j in range(2):
            assert scores.logprob[i, j].item() == pytest.approx(_naive(model, ctx[i], conts[i][j], not causal), abs=1e-4)
            assert scores.n_tokens[i, j].item() == len(conts[i][j])


def test_causal_split_follows_lm_eval(tmp_path):
    """Context ids with BOS; the continuation is what the whole string adds; a trailing space of
    the context moves into the continuation."""
    from transformers import AutoTokenizer

    from negtrain.models.choice_inputs import split_pair

    tok = AutoTokenizer.from_pretrained(save_tiny_llama(tmp_path / "m", None))
    ctx, cont = split_pair(tok, "Birds can ", "fly", causal=True)
    assert ctx == tok("Birds can")["input_ids"] and ctx[0] == tok.bos_token_id
    assert ctx + cont == tok("Birds can fly")["input_ids"]


# ------------------------------------------------------------------------------------------------
# evaluate --predictions


def _neqa_dir(tmp_path: Path, data_dir: Path, rows: int) -> Path:
    lines = (data_dir / "yuhui-zh15/NeQA/data_pipeline/neqa.jsonl").read_text(encoding="utf-8").splitlines()[:rows]
    target = tmp_path / "data" / "yuhui-zh15/NeQA/data_pipeline/neqa.jsonl"
    target.parent.mkdir(parents=True)
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tmp_path / "data"


def test_evaluate_takes_an_index_or_the_choice_text(data_dir, tmp_path, monkeypatch):
    from negtrain.evaluation.predictions import PredictionError, score_file

    examples = Neqa().load("test")
    preds = tmp_path / "p.jsonl"
    rows = []
    for i, e in enumerate(examples):
        gold = int(e.label)
        wrong = i % 4 == 0  # every fourth answer wrong
        pick = 1 - gold if wrong else gold
        # alternate spellings: an int, a digit string, the choice text
        value = [pick, str(pick), e.meta["choices"][pick]][i % 3]
        rows.append({"id": e.id, "prediction": value})
    preds.write_text("".join(json.dumps(r) + "\n" for r in rows))
    s = score_file("neqa", "test", preds)
    expected = 1 - sum(1 for i in range(len(examples)) if i % 4 == 0) / len(examples)
    assert s.metrics["accuracy"] == pytest.approx(expected)
    assert math.isnan(s.metrics["accuracy_norm"]) and any("accuracy_norm" in n for n in s.notes)

    rows[5]["prediction"] = "penguins"
    preds.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(PredictionError, match=r"p.jsonl:6: prediction 'penguins' for 'neqa/test/5' is neither a choice index"):
        score_file("neqa", "test", preds)


# ------------------------------------------------------------------------------------------------
# End to end: `validate` a causal and a seq2seq model on (a local copy of the first rows of) NeQA


@pytest.mark.parametrize("family", ["causal_lm", "seq2seq"])
def test_validate_scores_neqa_like_the_scorer(family, data_dir, tmp_path, monkeypatch, one_thread):
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(_neqa_dir(tmp_path, data_dir, 30)))
    path = save_tiny_llama(tmp_path / "m", None) if family == "causal_lm" else save_tiny_t5(tmp_path / "m", None)
    run = validate_tiny(path, family, [{"benchmark": "neqa", "split": "test"}], tmp_path / "run", eval_batch_size=8)
    (line,) = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    got = line["metrics"]

    # the same numbers from the scorer, called directly, one question at a time
    bench = Neqa()
    examples = bench.load("test")
    scores, chars = choice_loglikelihoods_one_at_a_time(path, family, bench, examples)
    right = right_norm = 0
    for i, (e, ll) in enumerate(zip(examples, scores, strict=True)):
        right += int(int(ll.argmax()) == int(e.label))
        right_norm += int(int((ll.double() / chars[i]).argmax()) == int(e.label))
    assert got["n"] == 30
    assert got["accuracy"] == pytest.approx(right / 30) and got["accuracy_norm"] == pytest.approx(right_norm / 30)
    assert "accuracy/source/OpenBookQA" in got and "accuracy/negation_rule/not/be" in got
    written = run / "predictions" / "neqa-test-validate.jsonl"
    rows = [json.loads(x) for x in written.read_text().splitlines()]
    assert len(rows) == 30 and {r["prediction"] for r in rows} <= {"0", "1"}
    # the written predictions (the acc choice) rescore to the same accuracy
    from negtrain.evaluation.predictions import score_file

    assert score_file("neqa", "test", written).metrics["accuracy"] == pytest.approx(got["accuracy"])
    # the lines carry every choice's log-likelihood and length, so every number re-scores, and
    # the intervals come from the same per-question outcomes
    assert all(len(r["loglikelihoods"]) == 2 and r["choice_chars"] == [len(c) for c in e.meta["choices"]]
               for r, e in zip(rows, examples, strict=False))
    rescored = score_file("neqa", "test", written)
    assert set(rescored.metrics) == set(got)
    assert all(rescored.metrics[k] == pytest.approx(v, abs=1e-6) for k, v in got.items())  # records round to 6 digits
    assert line["bootstrap"]["unit"] == "question" and line["bootstrap"]["units"] == 30
    assert line["uncertainty"]["accuracy_norm"] == rescored.uncertainty.as_json()["accuracy_norm"]
    assert line["uncertainty"]["accuracy"]["stderr"] == pytest.approx(math.sqrt(got["accuracy"] * (1 - got["accuracy"]) / 29), abs=1e-6)


# ------------------------------------------------------------------------------------------------
# Precision: under `auto` every NeQA number is fp32's, also where auto picks bf16.


def _neqa_run(tmp_path, path, name, precision, model_settings=None):
    evals = [{"benchmark": "neqa", "split": "test"}, {"benchmark": "neqa-lettered", "split": "test"}]
    run = validate_tiny(path, "causal_lm", evals, tmp_path / name, eval_batch_size=20, max_length=160, precision=precision,
                        evaluation={"bootstrap": 0}, model_settings=model_settings)
    records = {r["benchmark"]: r for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())}
    predictions = {b: [json.loads(x) for x in (run / "predictions" / f"{b}-test-validate.jsonl").read_text().splitlines()]
                   for b in records}
    return records, predictions


def test_default_precision_gives_exactly_fp32s_neqa_numbers_on_the_bf16_path(data_dir, tmp_path, monkeypatch, one_thread):
    """`precision: auto` on bf16 hardware runs bf16-mixed; NeQA and neqa-lettered must still report
    fp32's accuracy and accuracy_norm. A CPU without native bf16 would pick fp32 under auto, so
    the test makes auto pick bf16 here (the same path a bf16-capable CPU or a GPU takes)."""
    import negtrain.training.checks as checks

    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(_neqa_dir(tmp_path, data_dir, 60)))
    path = save_tiny_llama(tmp_path / "m", None, seed=3)
    fp32, fp32_preds = _neqa_run(tmp_path, path, "fp32", "32-true")
    monkeypatch.setattr(checks, "native_bf16", lambda gpu: True)
    assert checks.trainer_precision(type("T", (), {"precision": "auto", "accelerator": "cpu"})())[0] == "bf16-mixed"
    auto, auto_preds = _neqa_run(tmp_path, path, "auto", "auto")
    # Without the fp32 recheck of near ties (which rescores every close pair of this random tiny model).
    bf16, bf16_preds = _neqa_run(tmp_path, path, "bf16", "bf16-mixed", {"fp32_recheck_margin": 0})
    for bench in ("neqa", "neqa-lettered"):
        for key in ("accuracy", "accuracy_norm", "n"):
            assert auto[bench]["metrics"][key] == fp32[bench]["metrics"][key], (bench, key)
        assert auto[bench]["metrics"] == fp32[bench]["metrics"]
        assert "note" not in auto[bench] and "precision" not in (fp32[bench].get("note") or "")
        # an explicit bf16-mixed is kept (and may change the numbers); its record says so
        assert "trainer.precision bf16-mixed" in bf16[bench]["note"]
        # every choice's log-likelihood is fp32's to the bit under auto, and bf16's differ
        for a, f in zip(auto_preds[bench], fp32_preds[bench], strict=False):
            assert a["loglikelihoods"] == f["loglikelihoods"], (bench, a["id"])
        assert any(b["loglikelihoods"] != f["loglikelihoods"] for b, f in zip(bf16_preds[bench], fp32_preds[bench], strict=False))
