"""BLiMP's NPI licensing (Warstadt et al. 2020): every mirrored row read and rendered as the
requests a causal LM answers; per-file and phenomenon accuracy by hand; and a tiny causal LM's
per-pair log-likelihoods and choices, through a report card and through `validate`, equal to a
hand computation that scores each sentence after the BOS (or EOS) token as lm-evaluation-harness
does."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from negtrain.benchmarks.blimp import FILES, BlimpNpi
from negtrain.core.errors import ConfigError, DataError
from negtrain.metrics.blimp import BlimpMetric
from tiny_models import save_tiny_gpt2_style, save_tiny_llama, validate_tiny


def _row(uid: str, pair: int, good: str, bad: str) -> dict:
    # BLiMP's schema (upstream README), as the files spell it
    return {"sentence_good": good, "sentence_bad": bad, "field": "semantics", "linguistics_term": "npi_licensing",
            "UID": uid, "simple_LM_method": True, "one_prefix_method": False, "two_prefix_method": False,
            "lexically_identical": False, "pairID": str(pair)}


#: Two files of unequal size, so that the phenomenon's mean over files differs from the pooled share.
FIXTURE = {
    "npi_present_1": [
        ("A dog is not an animal.", "A dog is ever an animal."),
        ("The man is not playing a guitar.", "The man is ever playing a guitar."),
    ],
    "only_npi_scope": [
        ("Nobody is asleep at home.", "Somebody is ever asleep at home."),
        ("No dogs are running through the field.", "Dogs are ever running through the field."),
        ("A chair is never an animal.", "A chair is ever an animal."),
    ],
    # every other file of the phenomenon one pair (the `all` split reads all seven)
    **{uid: [(f"Nobody is {word} at home.", f"Somebody is {word} ever at home.")]
       for uid, word in zip(("matrix_question_npi_licensor_present", "npi_present_2", "only_npi_licensor_present",
                             "sentential_negation_npi_licensor_present", "sentential_negation_npi_scope"),
                            ("asleep", "running", "playing", "not", "never"), strict=True)},
}


def _write_fixture(root: Path, files: dict = FIXTURE) -> Path:
    for uid, pairs in files.items():
        path = root / "alexwarstadt/blimp/data" / f"{uid}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(_row(uid, i, g, b)) + "\n" for i, (g, b) in enumerate(pairs)), encoding="utf-8")
    return root


# ------------------------------------------------------------------------------------------------
# The real rows


def test_all_7000_mirrored_rows_load_and_render(data_dir, tmp_path):
    from negtrain.config import validate_recipe
    from negtrain.engine.entry_requests import entry_requests
    from negtrain.engine.prompts import prepare_entry

    bench = BlimpNpi()
    examples = bench.load("all")
    assert len(examples) == 7_000 and len({e.id for e in examples}) == 7_000
    for uid in FILES:
        rows = [e for e in examples if e.subset == uid]
        assert [e.id for e in rows] == [f"blimp-npi/{uid}/{i}" for i in range(1_000)]
        assert [e.id for e in bench.load(uid)] == [e.id for e in rows]  # the file's split holds the same pairs
    for e in examples:
        good, bad = e.inputs
        assert good.strip() == good and bad.strip() == bad and good and bad and good != bad, e.id
        assert e.label == "0"
    assert examples[0].inputs == ("Had Bruce ever played?", "Bruce had ever played.")

    # rendered for a causal LM: two requests per pair, each sentence after a space, from the
    # context the tokenizer gives BOS for (the tiny Llama's adds it itself)
    from negtrain.models.folder_checks import load_lm_tokenizer
    from negtrain.serving.in_process import InProcessBackend
    from transformers import AutoModelForCausalLM

    path = save_tiny_llama(tmp_path / "m", None)
    backend = InProcessBackend(AutoModelForCausalLM.from_pretrained(path), load_lm_tokenizer(str(path), str(path)), 8)
    recipe = validate_recipe({"description": "blimp rows", "model": {"name": str(path), "family": "causal_lm"},
                              "data": {"eval": [{"benchmark": "blimp-npi", "split": "all"}]}}, "test")
    entry = recipe.data.eval[0]
    built = entry_requests(recipe, entry, backend, prepare_entry(recipe, entry, backend))
    assert built.shared_context and len(built.per_example) == 7_000
    for e, (good, bad) in zip(examples, built.per_example, strict=True):
        assert (good.context, good.continuation, bad.context, bad.continuation) == ("", " " + e.inputs[0], "", " " + e.inputs[1])
    ctx, cont, _ = backend.inputs.pair(built.per_example[0][0])
    assert ctx == [backend.tokenizer.bos_token_id] and cont == backend.tokenizer(" Had Bruce ever played?", add_special_tokens=False)["input_ids"]


def test_a_malformed_row_names_its_file_line_and_field(tmp_path, monkeypatch):
    root = _write_fixture(tmp_path / "data")
    path = root / "alexwarstadt/blimp/data/npi_present_1.jsonl"
    lines = path.read_text().splitlines()
    lines[1] = json.dumps(_row("npi_present_1", 1, "Same text.", "Same text."))
    path.write_text("\n".join(lines) + "\n")
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(root))
    with pytest.raises(DataError, match=r"npi_present_1.jsonl:2: field 'sentence_bad': the same text as sentence_good"):
        BlimpNpi().load("npi_present_1")


def test_without_the_files_one_line_says_where_they_come_from(tmp_path, monkeypatch):
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(tmp_path))
    with pytest.raises(DataError) as err:
        BlimpNpi().load("npi_present_2")
    message = str(err.value)
    assert "\n" not in message
    assert "alexwarstadt/blimp/main/data/npi_present_2.jsonl" in message and "NEGTRAIN_OFFLINE" in message


# ------------------------------------------------------------------------------------------------
# The metric by hand


def test_per_file_accuracy_and_the_phenomenon_mean_by_hand():
    # file A: 2 pairs; file B: 3 pairs. ll = (good, bad).
    # A0: -5 > -6 right; A1: -7 < -4 wrong          -> A = 1/2
    # B0: -3 = -3 a tie: the good sentence (index 0, numpy's argmax), right
    # B1: -2 > -9 right; B2: -8 < -1 wrong          -> B = 2/3
    # phenomenon = (1/2 + 2/3) / 2 = 7/12; pooled would be 3/5
    tags = [("A",), ("A",), ("B",), ("B",), ("B",)]
    m = BlimpMetric([0] * 5, tags, [[10, 10]] * 5)
    m.update(torch.arange(5), torch.tensor([[-5.0, -6.0], [-7.0, -4.0], [-3.0, -3.0], [-2.0, -9.0], [-8.0, -1.0]]))
    v = {k: float(x) for k, x in m.compute().items()}
    assert v == pytest.approx({"accuracy": 7 / 12, "accuracy/A": 1 / 2, "accuracy/B": 2 / 3, "n": 5})
    assert m.note is None
    # one file: its accuracy is the phenomenon's, with lm-eval's acc_stderr
    from negtrain.metrics.uncertainty import estimate

    one = BlimpMetric([0] * 3, [("B",)] * 3, [[10, 10]] * 3)
    one.update(torch.arange(3), torch.tensor([[-3.0, -3.0], [-2.0, -9.0], [-8.0, -1.0]]))
    assert float(one.compute()["accuracy"]) == pytest.approx(2 / 3)
    u = estimate(one, one.last_outcomes, 0, 0, BlimpNpi.is_count)
    assert u.metrics["accuracy/B"]["stderr"] == pytest.approx(math.sqrt((2 / 3) * (1 / 3) / 2), abs=1e-6)
    assert u.unit == "pair"


def test_predictions_files_score_by_index_or_sentence(tmp_path, monkeypatch):
    from negtrain.evaluation.predictions import score_file

    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(_write_fixture(tmp_path / "data")))
    examples = BlimpNpi().load("all")
    picks = {"blimp-npi/npi_present_1/0": 0, "blimp-npi/npi_present_1/1": "1",
             "blimp-npi/only_npi_scope/0": "Somebody is ever asleep at home.",  # the bad sentence, by its text
             "blimp-npi/only_npi_scope/1": "No dogs are running through the field.", "blimp-npi/only_npi_scope/2": 0,
             "blimp-npi/npi_present_2/0": 1}  # the other four files right (index 0)
    preds = tmp_path / "p.jsonl"
    preds.write_text("".join(json.dumps({"id": e.id, "prediction": picks.get(e.id, 0)}) + "\n" for e in reversed(examples)))
    s = score_file("blimp-npi", "all", preds)
    assert s.metrics["accuracy/npi_present_1"] == pytest.approx(1 / 2)
    assert s.metrics["accuracy/only_npi_scope"] == pytest.approx(2 / 3)
    assert s.metrics["accuracy/npi_present_2"] == 0.0 and s.metrics["accuracy/only_npi_licensor_present"] == 1.0
    # the mean of the seven files' shares, not the pooled 7/10
    assert s.metrics["accuracy"] == pytest.approx((1 / 2 + 2 / 3 + 0 + 4) / 7) and s.metrics["n"] == 10
    # a file's split alone
    only = tmp_path / "only.jsonl"
    only.write_text("".join(json.dumps({"id": e.id, "prediction": picks.get(e.id, 0)}) + "\n" for e in examples if e.subset == "only_npi_scope"))
    assert score_file("blimp-npi", "only_npi_scope", only).metrics["accuracy"] == pytest.approx(2 / 3)


# ------------------------------------------------------------------------------------------------
# A tiny causal LM: per-pair log-likelihoods and choices against a hand computation


def _by_hand(path: Path, sentences: list[str]) -> list[float]:
    """lm-eval's HFLM on an empty context: [prefix_token_id] + tok_encode(" " + sentence,
    add_special_tokens=False), every sentence token's log-probability summed, one sentence alone."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    prefix = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
    out = []
    for s in sentences:
        cont = tok.encode(" " + s, add_special_tokens=False)
        ids = torch.tensor([[prefix, *cont]])
        with torch.no_grad():
            logp = torch.log_softmax(model(input_ids=ids).logits[0].double(), -1)
        out.append(sum(logp[t, cont[t]].item() for t in range(len(cont))))
    return out


@pytest.mark.parametrize("tokenizer", ["adds_bos", "gpt2_style"])
def test_a_tiny_causal_lm_scores_each_pair_as_by_hand(tokenizer, tmp_path, monkeypatch, capsys, one_thread):
    from negtrain.cli import main

    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(_write_fixture(tmp_path / "data")))
    path = save_tiny_llama(tmp_path / "llama", None, seed=1)
    if tokenizer == "gpt2_style":
        path = save_tiny_gpt2_style(path, tmp_path / "gpt2_style")
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(path)
        assert tok("")["input_ids"] == [] and tok.bos_token_id == tok.eos_token_id
    examples = BlimpNpi().load("all")
    hand = _by_hand(path, [s for e in examples for s in e.inputs])
    hand_pairs = [(hand[2 * i], hand[2 * i + 1]) for i in range(len(examples))]
    right = {uid: [g >= b for (g, b), e in zip(hand_pairs, examples, strict=True) if e.subset == uid] for uid in FIXTURE}
    per_file = {uid: sum(r) / len(r) for uid, r in right.items()}

    # a report card (the hf backend), two rows a call
    out = tmp_path / "card"
    code = main(["evaluate", "--model", str(path), "--family", "causal_lm", "--benchmarks", "blimp-npi", "--out", str(out),
                 "--data.eval_batch_size=2"])
    assert code == 0, capsys.readouterr().err
    (record,) = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines() if '"blimp-npi"' in x]
    (predictions,) = (out / "predictions").glob("blimp-npi-all*.jsonl")
    lines = [json.loads(x) for x in predictions.read_text().splitlines()]
    assert [r["id"] for r in lines] == [e.id for e in examples]
    for r, (g, b) in zip(lines, hand_pairs, strict=True):
        assert r["loglikelihoods"] == pytest.approx([g, b], abs=1e-4)
        assert r["prediction"] == ("0" if g >= b else "1")
    got = record["metrics"]
    for uid, acc in per_file.items():
        assert got[f"accuracy/{uid}"] == pytest.approx(acc)
    assert got["accuracy"] == pytest.approx(sum(per_file.values()) / 7) and got["n"] == 10
    said = "'</s>' token" if tokenizer == "gpt2_style" else "BOS token the tokenizer adds"
    assert said in record["note"] and "lm-evaluation-harness" in record["note"]

    # `validate` (the family's per-epoch evaluation) gives the same numbers
    run = validate_tiny(path, "causal_lm", [{"benchmark": "blimp-npi", "split": "only_npi_scope"}], tmp_path / "run", eval_batch_size=2)
    (line,) = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert line["metrics"]["accuracy"] == pytest.approx(per_file["only_npi_scope"])
    assert line["metrics"]["accuracy/only_npi_scope"] == pytest.approx(per_file["only_npi_scope"])


def test_families_that_cannot_score_it_are_refused_with_the_reason():
    from negtrain.benchmarks.matrix import unsupported_reason

    bench = BlimpNpi()
    assert unsupported_reason(bench, "causal_lm") is None
    assert "pseudo-log-likelihood" in (unsupported_reason(bench, "mlm") or "")
    assert "encoder-decoder" in (unsupported_reason(bench, "seq2seq") or "")


def test_a_server_backend_is_refused_in_one_line():
    from negtrain.engine.empty_context import empty_context_text
    from negtrain.serving.backend import BackendBase

    class Server(BackendBase):  # a server's backend declares no tokenizer (BackendBase)
        name = "openai"

    with pytest.raises(ConfigError, match="--backend hf") as err:
        empty_context_text(Server(), "blimp-npi/all")
    assert "\n" not in str(err.value)
