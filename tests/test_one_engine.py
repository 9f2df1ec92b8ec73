"""One engine for every language-model evaluation (ARCHITECTURE.md, "One engine"): the ``hf``
and ``transformers`` rows of the backends table are the same in-process backend, so their cards
agree to the byte on every answer mode (verbalizers, a generating strategy, free-text generation,
choices, the cloze probe), with and without --chat, and under --truncate left; a served card
(``--backend openai``, the test stand-in server over the same tiny model) gives the hf card's
predictions; the refusals read the same on both rows. And the engine is right, not only
self-consistent: its predictions equal log-likelihoods and greedy loops computed here by hand from
the model's forward pass."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from negtrain.cli import main
from tiny_models import cut_world

SCONE_ROWS = 2  # per condition file: 12 examples
CONDAQA_ROWS = 4
NEQA_ROWS = 6
LAMA_ROWS = 12  # per relation file of negated LAMA's `random` variant
#: What two cards of the same numbers may differ in: time, and the requests they count.
UNSTABLE = ("eval_seconds", "requests")
COMMON = ["--trainer.torch_threads=1", "--trainer.precision=32-true", "--data.eval_batch_size=4", "--model.max_new_tokens=8"]


def _cut_file(src: Path, dest: Path, rows: int, header: int = 0) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    lines = src.read_text(encoding="utf-8").splitlines(keepends=True)
    dest.write_text("".join(lines[: header + rows]), encoding="utf-8")


@pytest.fixture()
def world(data_dir, lm_env, tmp_path, monkeypatch):
    """The lm_world data cut to a few rows of ScoNe and CondaQA (cut_world), plus the first rows of
    NeQA and of each of negated LAMA's files (read from the mirror, written here) and LAMA's common
    vocabulary (linked)."""
    mirror = data_dir
    data = cut_world(lm_env["data"], tmp_path / "data", SCONE_ROWS, CONDAQA_ROWS)
    neqa = "yuhui-zh15/NeQA/data_pipeline/neqa.jsonl"
    if not (mirror / neqa).is_file() or not (mirror / "norakassner/LAMA_primed_negated").is_dir():
        pytest.skip("needs the NeQA and negated LAMA mirror")
    _cut_file(mirror / neqa, data / neqa, NEQA_ROWS)
    lama = mirror / "norakassner/LAMA_primed_negated/data"
    for f in lama.glob("*/random/*.jsonl"):
        _cut_file(f, data / "norakassner/LAMA_primed_negated/data" / f.relative_to(lama), LAMA_ROWS)
    (data / "ncarraz").symlink_to(mirror / "ncarraz")
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(data))
    return lm_env


def _card(model, backend: str, out: Path, benchmarks: str, *extra: str) -> None:
    assert main(["evaluate", "--model", str(model), "--family", "causal_lm", "--backend", backend, "--benchmarks", benchmarks,
                 "--out", str(out), *COMMON, *extra]) == 0


def _lines(out: Path) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if k not in UNSTABLE}
            for line in (out / "metrics.jsonl").read_text().splitlines()]


def _predictions(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((out / "predictions").iterdir())}


@pytest.fixture()
def models(world, tmp_path_factory):
    """The world's tiny Llamas, and two more: one whose context (max_position_embeddings, 64) cuts
    every prompt here, and one whose tokenizer has the objects of the cut negated LAMA probes as
    one-token words (the world's tokenizer has none of LAMA's common vocabulary, so every probe
    would be skipped and the cloze path would compare nothing)."""
    import os

    from negtrain.models import tiny
    from tiny_models import corpus

    root = tmp_path_factory.mktemp("one_engine")
    data = Path(os.environ["NEGTRAIN_DATA_DIR"])
    objects = [json.loads(line)["obj_label"] for f in sorted((data / "norakassner").rglob("*.jsonl"))
               for line in f.read_text(encoding="utf-8").splitlines()]
    return {**world, "short": tiny.save_tiny_llama(root / "short", corpus(world["data"]), 0, False, 64),
            "cloze": tiny.save_tiny_llama(root / "cloze", corpus(world["data"]) + [" ".join(objects)] * 30, 0, False, 8192)}


#: (model, benchmarks, extra arguments): every answer mode, with and without --chat, cut and whole.
CASES = {
    "verbalizers, generation, choices": ("llama", "scone,condaqa,neqa", ()),
    "a generating strategy": ("llama", "scone", ("--strategy", "conditional_q")),
    "cloze": ("cloze", "negated_lama", ()),
    "chat": ("llama_chat", "scone,condaqa", ("--chat",)),
    "truncate left": ("short", "scone,condaqa,neqa", ("--truncate", "left")),
}


@pytest.mark.parametrize("case", list(CASES))
def test_hf_and_transformers_cards_are_the_same_to_the_byte(models, tmp_path, case):
    model, benchmarks, extra = CASES[case]
    for backend in ("hf", "transformers"):
        _card(models[model], backend, tmp_path / backend, benchmarks, *extra)
    hf, tr = _lines(tmp_path / "hf"), _lines(tmp_path / "transformers")
    assert [r["benchmark"] for r in hf] == benchmarks.split(",")
    assert tr == hf
    assert _predictions(tmp_path / "transformers") == _predictions(tmp_path / "hf")
    records = {r["benchmark"]: r for r in hf}
    rows = {name: [json.loads(line) for line in (tmp_path / "hf" / "predictions" / f"{name}-test-validate.jsonl").read_text().splitlines()]
            for name in records}
    # What each case is about did happen (so the equality above compares it).
    if "condaqa" in rows:  # free text: the greedy responses are the predictions
        assert all(r["response"] == r["prediction"] and r["response"] for r in rows["condaqa"])
    if case == "a generating strategy":  # yes/no read out of greedy text, each response kept
        assert records["scone"]["tokens_generated"] > 0 and all(isinstance(r["response"], str) for r in rows["scone"])
    if case in ("verbalizers, generation, choices", "chat", "truncate left"):  # each label's log-likelihood
        assert all(set(r["response"]) == {"entailment", "not_entailment"} for r in rows["scone"])
    if "neqa" in rows:
        assert all(len(r["loglikelihoods"]) == 2 for r in rows["neqa"])
    if case == "cloze":
        assert records["negated_lama"]["metrics"]["n_probes"] > 0
        assert any("gold_rank" in r for r in rows["negated_lama"])
    if case == "chat":
        assert all(r["prompt"].startswith("<s>[INST] ") for name in rows for r in rows[name])
    if case == "truncate left":
        assert records["scone"]["metrics"]["n_truncated"] > 0 and records["condaqa"]["metrics"]["n_truncated"] == CONDAQA_ROWS


#: (model, arguments, what the one error line says): refusals the engine makes whatever row asks.
REFUSALS = {
    "chat on choices": ("llama_chat", ["--benchmarks", "neqa", "--chat"],
                        "--benchmarks neqa: --chat: neqa is scored by the log-likelihood of its answers after its own context, "
                        "which no chat template shapes; drop --chat"),
    # Two verbalizers that differ as written ('Yes', 'yes') and are the same tokens once UnifiedQA's
    # normalisation lower-cases them: only the tokenizer can tell.
    "verbalizers of the same tokens": ("llama", ["--benchmarks", "scone", "--model.normalize_input=unifiedqa",
                                                 "--data.eval=[{benchmark: scone, split: test, verbalizer: {entailment: 'Yes', not_entailment: 'yes'}}]"],
                                       "benchmark 'scone': the verbalizers of 'entailment' and 'not_entailment' are the same tokens (' yes'), "
                                       "so they cannot be told apart"),
    "a prompt over the context": ("short", ["--benchmarks", "condaqa"],
                                  "condaqa/test: 4 of 4 prompts do not fit the model's context of 64 tokens (the model config's "
                                  "max_position_embeddings); the first, row condaqa/test/6876, is 489 tokens and its answer needs 8 more."),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_hf_and_transformers_refuse_alike_in_the_same_words(models, tmp_path, capsys, case):
    model, args, says = REFUSALS[case]
    lines = {}
    for backend in ("hf", "transformers"):
        out = tmp_path / backend
        code = main(["evaluate", "--model", str(models[model]), "--family", "causal_lm", "--backend", backend, "--out", str(out), *COMMON, *args])
        err = capsys.readouterr().err
        line = err.strip().splitlines()[-1]
        assert code == 2 and line.startswith("error: ") and "Traceback" not in err
        assert not (out / "predictions").exists() or not any((out / "predictions").iterdir())  # refused before scoring
        lines[backend] = line.replace(backend, "<backend>")
    assert lines["hf"] == lines["transformers"]
    assert says in lines["hf"]


def _served_card(model, url: str, out: Path, benchmarks: str, *extra: str) -> int:
    return main(["evaluate", "--model", str(model), "--backend", "openai", "--base-url", url, "--benchmarks", benchmarks,
                 "--out", str(out), "--model.max_new_tokens=8", *extra])


def test_a_served_card_gives_the_hf_cards_predictions(models, tmp_path):
    """ScoNe by verbalizer log-likelihoods (echoed prompt log-probabilities) and CondaQA by greedy
    generation, through the stand-in server over the same tiny Llama: the hf card's predictions,
    responses and metrics."""
    from served_standin import StandIn

    _card(models["llama"], "hf", tmp_path / "hf", "scone,condaqa")
    with StandIn(models["llama"]) as server:
        assert _served_card(models["llama"], server.url, tmp_path / "served", "scone,condaqa") == 0
        assert server.answered > 6 * SCONE_ROWS * 2 + CONDAQA_ROWS - 1  # every label and question went to the server
    for name in ("scone", "condaqa"):
        served = (tmp_path / "served" / "predictions" / f"{name}-test-validate.jsonl").read_bytes()
        assert served == (tmp_path / "hf" / "predictions" / f"{name}-test-validate.jsonl").read_bytes(), name
    assert all(r["response"] == r["prediction"] and r["response"] for r in _rows(tmp_path / "served", "condaqa"))
    for a, b in zip(_lines(tmp_path / "served"), _lines(tmp_path / "hf"), strict=True):
        assert a["metrics"] == b["metrics"]


def _rows(out: Path, name: str) -> list[dict]:
    return [json.loads(line) for line in (out / "predictions" / f"{name}-test-validate.jsonl").read_text().splitlines()]


@pytest.mark.parametrize(("model", "args", "says"), [
    ("llama", ["--benchmarks", "negated_lama"],
     "--benchmarks negated_lama: not scored through a server: its metrics need the whole next-token distribution, which a server does not return"),
    ("llama_chat", ["--benchmarks", "scone", "--chat"],
     "--benchmarks scone: not scored through a server: scoring its labels needs prompt log-probabilities, which a chat endpoint "
     "does not give; drop --chat"),
])
def test_what_a_server_cannot_answer_is_refused_before_any_request(models, tmp_path, capsys, model, args, says):
    from served_standin import StandIn

    with StandIn(models[model]) as server:
        code = main(["evaluate", "--model", str(models[model]), "--backend", "openai", "--base-url", server.url, "--out", str(tmp_path / "c"), *args])
        assert server.answered == 0
    err = capsys.readouterr().err
    assert code == 2 and err.strip().splitlines()[-1] == f"error: evaluate --model: {says}"


# ---- independent references: the engine's answers against the model's forward pass by hand ----

def _loglikelihood(model, tok, context: str, continuation: str) -> float:
    """lm-evaluation-harness's split: the continuation's tokens are those of context+continuation
    after the context's; their log-probabilities summed, each read from the logits one position
    before it."""
    import torch

    ctx = tok(context)["input_ids"]
    whole = tok(context + continuation)["input_ids"]
    assert whole[: len(ctx)] == ctx
    with torch.no_grad():
        logprobs = torch.log_softmax(model(input_ids=torch.tensor([whole])).logits[0].float(), -1)
    return sum(float(logprobs[i - 1, whole[i]]) for i in range(len(ctx), len(whole)))


def _greedy(model, tok, prompt: str, max_new_tokens: int) -> str:
    """One token at a time, the argmax, until EOS or the limit; the first line of the text."""
    import torch

    ids = tok(prompt)["input_ids"]
    new: list[int] = []
    with torch.no_grad():
        for _ in range(max_new_tokens):
            nxt = int(model(input_ids=torch.tensor([ids + new])).logits[0, -1].argmax())
            if nxt == tok.eos_token_id:
                break
            new.append(nxt)
            if "\n" in tok.decode(new):
                break
    return tok.decode(new, skip_special_tokens=True).split("\n", 1)[0]


def test_the_cards_answers_equal_the_models_forward_pass_by_hand(models, tmp_path, data_dir):
    import csv

    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = models["llama"]
    _card(path, "hf", tmp_path / "card", "scone,condaqa,neqa")
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    # ScoNe: the label whose verbalizer (' yes' / ' no' after the question) is likelier.
    scone = _rows(tmp_path / "card", "scone")[:3]
    with (data_dir / "selenashe/ScoNe/scone_nli/test/no_negation.csv").open(encoding="utf-8") as f:
        first = next(csv.DictReader(f))
    assert scone[0]["id"] == "scone/test/no_negation/0"
    assert scone[0]["prompt"] == f'{first["sentence1_edited"]}\nQuestion: Does this imply that "{first["sentence2_edited"]}"? Yes or no?\nAnswer:'
    for row in scone:
        by_hand = {label: _loglikelihood(model, tok, row["prompt"], verbalizer)
                   for label, verbalizer in (("entailment", " yes"), ("not_entailment", " no"))}
        assert row["response"] == pytest.approx(by_hand, abs=2e-4)
        assert abs(by_hand["entailment"] - by_hand["not_entailment"]) > 1e-3  # no tie: the choice means something
        assert row["prediction"] == max(by_hand, key=by_hand.__getitem__)
    # CondaQA: greedy, one token at a time, the first line of at most max_new_tokens (8).
    for row in _rows(tmp_path / "card", "condaqa")[:2]:
        assert row["prediction"] == row["response"] == _greedy(model, tok, row["prompt"], 8)
    # NeQA: each choice's log-likelihood after the question and lm-eval's delimiter, a space.
    lines = (data_dir / "yuhui-zh15/NeQA/data_pipeline/neqa.jsonl").read_text(encoding="utf-8").splitlines()
    for row, line in zip(_rows(tmp_path / "card", "neqa")[:2], lines, strict=False):
        raw = json.loads(line)
        by_hand = [_loglikelihood(model, tok, raw["question"], " " + c) for c in raw["choices"]]
        assert row["loglikelihoods"] == pytest.approx(by_hand, abs=1e-4)
        assert row["choice_chars"] == [len(c) for c in raw["choices"]]
        assert row["prediction"] == str(max(range(2), key=by_hand.__getitem__)) and row["label"] == str(raw["answer"])
