"""The ``transformers`` backend (negtrain/serving/in_process.py): a tiny Llama loaded in this
process answers the served path's requests. Its card equals the ``hf`` card (the same in-process engine) on the
same rows: ScoNe scored by verbalizer log-likelihoods, CondaQA by greedy generation; batching
its requests changes no answer; a chat request goes through the tokenizer's chat template."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from negtrain.cli import main
from negtrain.core.errors import ConfigError
from negtrain.serving.backend import BackendContext, open_backend
from negtrain.engine.requests import Counts, Generation, Loglikelihood
from tiny_models import cut_world

SCONE_ROWS = 2  # per condition file: 12 examples
CONDAQA_ROWS = 4
#: What two cards of the same numbers may differ in: time, and the requests a served card counts.
UNSTABLE = ("eval_seconds", "requests")


@pytest.fixture()
def few_rows(lm_env, tmp_path, monkeypatch):
    """The lm_world data with ScoNe's and CondaQA's test splits cut to a few rows (read from the
    mirror, written here), so both backends score every row of the same split."""
    data = cut_world(lm_env["data"], tmp_path / "data", SCONE_ROWS, CONDAQA_ROWS)
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(data))
    return lm_env


def _lines(out: Path) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if k not in UNSTABLE}
            for line in (out / "metrics.jsonl").read_text().splitlines()]


def test_a_transformers_card_equals_the_hf_card(few_rows, tmp_path):
    model = str(few_rows["llama"])
    common = ["--benchmarks", "scone,condaqa", "--data.eval_batch_size=4"]
    assert main(["evaluate", "--model", model, "--family", "causal_lm", "--out", str(tmp_path / "hf"), *common,
                 "--trainer.torch_threads=1", "--trainer.precision=32-true"]) == 0
    assert main(["evaluate", "--model", model, "--backend", "transformers", "--out", str(tmp_path / "tr"), *common]) == 0
    hf, tr = _lines(tmp_path / "hf"), _lines(tmp_path / "tr")
    assert [(r["benchmark"], r["metrics"]["n"]) for r in hf] == [("scone", 6 * SCONE_ROWS), ("condaqa", CONDAQA_ROWS)]
    assert tr == hf
    served = [json.loads(line) for line in (tmp_path / "tr" / "metrics.jsonl").read_text().splitlines()]
    assert [r["requests"]["sent"] for r in served] == [6 * SCONE_ROWS * 2, CONDAQA_ROWS]  # it did answer requests
    for name in ("scone-test-validate.jsonl", "condaqa-test-validate.jsonl"):
        assert (tmp_path / "tr" / "predictions" / name).read_bytes() == (tmp_path / "hf" / "predictions" / name).read_bytes()


@pytest.fixture()
def backend(lm_env):
    from negtrain.config import validate_recipe

    recipe = validate_recipe({"description": "transformers backend", "model": {"name": str(lm_env["llama"]), "family": "causal_lm"},
                              "data": {"eval": [{"benchmark": "scone", "split": "test"}], "eval_batch_size": 3}}, "test")
    return open_backend("transformers", BackendContext(str(lm_env["llama"]), recipe=recipe))


@pytest.mark.parametrize("threads", [None, 2])
def test_the_backend_honours_trainer_torch_threads(lm_env, threads):
    """``--trainer.torch_threads`` sets torch's intra-op threads for the transformers backend, as
    the hf backend's Trainer sets them; unset, torch's number is left as it was (one, here)."""
    import torch

    from negtrain.config import validate_recipe

    assert torch.get_num_threads() == 1  # lm_env's one_thread; it restores the number after the test
    recipe = validate_recipe({"description": "threads", "model": {"name": str(lm_env["llama"]), "family": "causal_lm"},
                              "data": {"eval": [{"benchmark": "scone", "split": "test"}]},
                              "trainer": {"torch_threads": threads}}, "test")
    open_backend("transformers", BackendContext(str(lm_env["llama"]), recipe=recipe))
    assert torch.get_num_threads() == (threads or 1)


def test_batching_changes_no_answer(backend):
    requests = [
        Loglikelihood("Is the following statement True or False?\nAnswer:", " True"),
        Generation("True False True", 4, ("\n",)),
        Loglikelihood("Is the following statement True or False?\nAnswer:", " False"),
        Loglikelihood("yes no", " don't know"),
        Generation("Is the following statement", 6),
    ]
    counts = Counts()
    together = backend.answer(requests, counts)
    alone = [backend.answer([r], Counts())[0] for r in requests]
    assert counts.requests == len(requests)
    for a, b, r in zip(together, alone, requests, strict=True):
        if isinstance(r, Generation):
            assert a.text == b.text and a.tokens_out == b.tokens_out > 0
        else:
            assert a.n_tokens == b.n_tokens > 0 and a.logprob == pytest.approx(b.logprob, abs=1e-4) and a.logprob < 0
    # Different continuations of one context are scored apart, each its own log-probability.
    assert together[0].logprob != together[2].logprob


def test_a_chat_request_goes_through_the_chat_template_as_the_hf_backend_renders_it(lm_env, backend):
    """--chat means the same here as on the hf backend: the messages through the tokenizer's chat
    template (chat_text), its text tokenized without adding special tokens; a model whose tokenizer
    has no template refuses --chat with one line."""
    from negtrain.config import validate_recipe
    from negtrain.models.chat_template import chat_text
    from negtrain.models.generation import Limits, respond
    from negtrain.prompts.strategies import Prompt

    chat = (("user", "Is a dog an animal?"),)
    with pytest.raises(ConfigError, match="has no chat template; drop --chat"):
        backend.answer([Generation("hi", 2, (), chat, example="scone/test/1")], Counts())
    name = str(lm_env["llama_chat"])
    recipe = validate_recipe({"description": "chat", "model": {"name": name, "family": "causal_lm", "chat": True},
                              "data": {"eval": [{"benchmark": "scone", "split": "test"}]}}, "test")
    chatting = open_backend("transformers", BackendContext(name, recipe=recipe))
    got = chatting.answer([Generation("Is a dog an animal?", 5, (), chat, example="scone/test/1"),
                           Generation("Is a dog an animal?", 5, (), (), example="scone/test/2")], Counts())
    text = chat_text(chatting.tokenizer, Prompt(query="Is a dog an animal?"), recipe.model)
    assert text.startswith("<s>[INST] Is a dog an animal? [/INST]")
    want = respond(chatting.model, chatting.tokenizer, [text], Limits(5), add_special_tokens=False)[0]
    plain = respond(chatting.model, chatting.tokenizer, ["Is a dog an animal?"], Limits(5))[0]
    assert (got[0].text, got[0].tokens_out) == (want.text, want.tokens)
    assert (got[1].text, got[1].tokens_out) == (plain.text, plain.tokens)
    assert chatting._prompt_ids(Generation("x", 5, (), chat)) != chatting._prompt_ids(Generation("Is a dog an animal?", 5))


def test_a_prompt_over_the_models_context_is_an_error_naming_its_row(backend):
    """As the hf card and a server do: a prompt that, with its answer's room, does not fit the
    model's own context is refused before anything runs, naming the row, never run past the
    positions the model has (nor cut)."""
    from negtrain.serving.in_process import InProcessBackend

    backend.model.config.max_position_embeddings = 24
    short = InProcessBackend(backend.model, backend.tokenizer, 3)
    assert short.context.limit == 24
    long_prompt = "Is the following statement True or False? " * 6
    n = len(short.tokenizer(long_prompt)["input_ids"])
    assert n > 24
    with pytest.raises(ConfigError, match=rf"1 of 2 prompts do not fit the model's context of 24 tokens .*row scone/test/7, is {n} tokens and its answer needs 4 more"):
        short.answer([Generation("yes", 4, example="scone/test/1"), Generation(long_prompt, 4, example="scone/test/7")], Counts())
    with pytest.raises(ConfigError, match=r"row condaqa/test/3"):
        short.answer([Loglikelihood(long_prompt, " True", example="condaqa/test/3")], Counts())
    # What fits is answered as before.
    assert short.answer([Generation("yes", 4, example="scone/test/1")], Counts())[0].tokens_out > 0
