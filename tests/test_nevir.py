"""NevIR (Weller et al. 2024): rows in the Hub dataset's schema read into two ranking questions per
pair, paired accuracy by hand (a tie ranks the wrong document first, as the authors' strict
comparison), a tiny causal LM's query likelihoods through `validate` against a hand computation,
and the one line that says where the files come from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from negtrain.benchmarks.nevir import DATASET, PROMPT, Nevir
from negtrain.core.errors import DataError
from negtrain.metrics.nevir import NevirMetric
from tiny_models import save_tiny_llama, validate_tiny

# the fields the authors' evaluate.py reads (q1's document is doc1, q2's doc2), and an id
ROWS = [
    {"id": 7, "q1": "Which animal is a dog?", "q2": "Which animal is not a dog?",
     "doc1": "A dog is an animal.", "doc2": "A dog is not an animal."},
    {"id": 9, "q1": "Who is playing a guitar?", "q2": "Who is not playing a guitar?",
     "doc1": "The man is playing a guitar.", "doc2": "The man is not playing a guitar."},
]


def _write(root: Path, split: str = "test", rows: list[dict] = ROWS) -> Path:
    path = root / DATASET / f"{split}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return root


def test_a_pair_becomes_two_ranking_questions(tmp_path, monkeypatch):
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(_write(tmp_path)))
    bench = Nevir()
    examples = bench.load("test")
    assert [e.id for e in examples] == ["nevir/test/7/q1", "nevir/test/7/q2", "nevir/test/9/q1", "nevir/test/9/q2"]
    q2 = examples[1]
    assert q2.group == "nevir/test/7" and q2.label == "1"
    # the query after the other document (choice 0), then after its own (choice 1)
    assert bench.choice_contexts(q2) == (PROMPT.format(document="A dog is an animal."), PROMPT.format(document="A dog is not an animal."))
    assert bench.choices(q2) == ("Which animal is not a dog?",) * 2
    assert bench.choice_label("A dog is not an animal.", q2) == "1"


def test_paired_accuracy_by_hand():
    # pair A: q1 right (-1 > -2), q2 right            -> pair right
    # pair B: q1 right, q2 a tie (-3 = -3): the other document first (index 0), wrong -> pair wrong
    # pair C: q1 wrong, q2 right                       -> pair wrong
    m = NevirMetric([1] * 6, ["A", "A", "B", "B", "C", "C"], [[5, 5]] * 6)
    ll = torch.tensor([[-2.0, -1.0], [-4.0, -1.0], [-5.0, -1.0], [-3.0, -3.0], [-1.0, -2.0], [-2.0, -1.0]])
    m.update(torch.arange(6), ll)
    v = {k: float(x) for k, x in m.compute().items()}
    assert v == pytest.approx({"paired_accuracy": 1 / 3, "query_accuracy": 4 / 6, "pairs": 3, "n": 6})
    # a pair with one query unscored is not a scored pair
    part = NevirMetric([1] * 4, ["A", "A", "B", "B"], [[5, 5]] * 4)
    part.update(torch.tensor([0, 1, 2]), ll[:3])
    v = {k: float(x) for k, x in part.compute().items()}
    assert v["pairs"] == 1 and v["paired_accuracy"] == 1.0 and v["n"] == 3


def _query_loglik(path: Path, context: str, query: str) -> float:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    ctx = tok(context)["input_ids"]
    whole = tok(context + " " + query)["input_ids"]
    assert whole[: len(ctx)] == ctx
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=torch.tensor([whole])).logits[0].double(), -1)
    return sum(logp[t - 1, whole[t]].item() for t in range(len(ctx), len(whole)))


def test_a_tiny_causal_lm_ranks_by_query_likelihood_as_by_hand(tmp_path, monkeypatch, one_thread):
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(_write(tmp_path / "data")))
    path = save_tiny_llama(tmp_path / "m", None, seed=4)
    run = validate_tiny(path, "causal_lm", [{"benchmark": "nevir", "split": "test"}], tmp_path / "run", eval_batch_size=3)
    (line,) = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    bench = Nevir()
    examples = bench.load("test")
    right = []
    for e in examples:
        other, own = (_query_loglik(path, c, e.inputs[0]) for c in bench.choice_contexts(e))
        right.append(own > other)
    predictions = [json.loads(x) for x in (run / "predictions" / "nevir-test-validate.jsonl").read_text().splitlines()]
    for e, p in zip(examples, predictions, strict=True):
        other, own = (_query_loglik(path, c, e.inputs[0]) for c in bench.choice_contexts(e))
        assert p["loglikelihoods"] == pytest.approx([other, own], abs=1e-4)
    got = line["metrics"]
    assert got["query_accuracy"] == pytest.approx(sum(right) / 4)
    assert got["paired_accuracy"] == pytest.approx(((right[0] and right[1]) + (right[2] and right[3])) / 2)
    assert line["bootstrap"]["unit"] == "pair" and line["bootstrap"]["units"] == 2


def test_offline_without_the_files_one_line_says_where_they_come_from(tmp_path, monkeypatch):
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(tmp_path))
    with pytest.raises(DataError) as err:
        Nevir().load("test")
    message = str(err.value)
    assert "\n" not in message and f"Hub dataset {DATASET} (split test)" in message and "gated" not in message


def test_a_row_whose_documents_are_the_same_names_its_line(tmp_path, monkeypatch):
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(_write(tmp_path, rows=[ROWS[0], dict(ROWS[1], doc2=ROWS[1]["doc1"])])))
    with pytest.raises(DataError, match=r"test.jsonl:2: field 'doc2': the same text as doc1"):
        Nevir().load("test")
