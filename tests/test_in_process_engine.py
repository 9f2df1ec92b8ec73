"""The in-process backend (negtrain/serving/in_process.py) as the one engine for the ``hf`` and
``transformers`` rows: tiny Llama and T5 models built here answer grouped log-likelihoods as the
``hf`` backend's scorers compute them, the next token as its cloze probe reads it, prompts cut
under ``--truncate left`` as its encoders cut them, chat contexts through the template, from the
response cache on a second call, near ties rescored in fp32, and a run's checkpoint loaded into
the model."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from negtrain.core.errors import ConfigError
from negtrain.engine.requests import Counts, Generation, Loglikelihood, NextToken
from negtrain.models.continuation import continuation_logprobs
from negtrain.serving.in_process import InProcessBackend
from tiny_models import save_tiny_llama, save_tiny_t5

CONTEXTS = ["Is the following statement True or False? A dog is an animal.\nAnswer:", "A chair is not an animal. yes no"]
CONTINUATIONS = [" True", " False", " don't know"]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("engine")
    return {"llama": save_tiny_llama(root / "llama", None), "t5": save_tiny_t5(root / "t5", None),
            "llama_chat": save_tiny_llama(root / "llama_chat", None, chat=True)}


@pytest.fixture(autouse=True)
def _one_thread(one_thread, tmp_path, monkeypatch):
    monkeypatch.setenv("NEGTRAIN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("NEGTRAIN_OFFLINE", "1")


def _load(path: Path, seq2seq: bool = False):
    from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM

    from negtrain.models.folder_checks import load_lm_tokenizer

    auto = AutoModelForSeq2SeqLM if seq2seq else AutoModelForCausalLM
    return auto.from_pretrained(path).eval(), load_lm_tokenizer(str(path), str(path))


def _backend(path: Path, seq2seq: bool = False, batch: int = 4, **settings) -> InProcessBackend:
    model, tok = _load(path, seq2seq)
    return InProcessBackend(model, tok, batch, encoder_decoder=seq2seq, **settings)


def _scored(seq2seq: bool) -> list[Loglikelihood]:
    # T5 reads a verbalizer without a leading space, as a whole answer ending in EOS (the engine sends it so).
    conts = [c.strip() for c in CONTINUATIONS] if seq2seq else CONTINUATIONS
    out = [Loglikelihood(ctx, c, example=f"b/test/{i}", eos=seq2seq) for i, ctx in enumerate(CONTEXTS) for c in conts]
    return [*out, Loglikelihood("Nobody is asleep at home.", conts[0], example="b/test/9", eos=seq2seq)]


@pytest.mark.parametrize("seq2seq", [False, True])
def test_grouped_loglikelihoods_equal_each_scored_alone_and_the_context_runs_once(models, seq2seq):
    backend = _backend(models["t5" if seq2seq else "llama"], seq2seq)
    requests = _scored(seq2seq)
    rows: list[int] = []
    part = backend.model.get_encoder() if seq2seq else backend.model
    hook = part.register_forward_hook(lambda m, args, kwargs, out: rows.append(int(kwargs["input_ids"].shape[0])), with_kwargs=True)
    counts = Counts()
    together = backend.answer(requests, counts)
    hook.remove()
    # 3 distinct contexts, in one batch of 4 rows: the 2 contexts of 3 continuations, then the lone one
    assert rows[0] == 2
    assert counts.requests == len(requests) and counts.cached == 0
    alone = [backend.answer([r], Counts())[0] for r in requests]
    for a, b in zip(together, alone, strict=True):
        assert a.n_tokens == b.n_tokens > 0 and a.logprob == pytest.approx(b.logprob, abs=1e-4) and a.logprob < 0
        assert not a.cut and a.seen is None
    tok = backend.tokenizer
    if seq2seq:
        from negtrain.models.lm_encoding import continuation_ids

        for r, a in zip(requests, together, strict=True):
            want = continuation_logprobs(backend.model, [tok(r.context)["input_ids"]], [[continuation_ids(tok, r.continuation, causal=False)]],
                                         encoder_decoder=True, pad_id=tok.pad_token_id)
            assert continuation_ids(tok, r.continuation, causal=False)[-1] == tok.eos_token_id  # the target ends in EOS
            assert a.logprob == pytest.approx(float(want.logprob[0, 0]), abs=1e-4) and a.n_tokens == int(want.n_tokens[0, 0])
    else:
        from negtrain.models.choice_inputs import split_pair

        for r, a in zip(requests, together, strict=True):
            ctx, cont = split_pair(tok, r.context, r.continuation, causal=True)
            want = continuation_logprobs(backend.model, [ctx], [[cont]], encoder_decoder=False, pad_id=tok.pad_token_id)
            assert a.logprob == pytest.approx(float(want.logprob[0, 0]), abs=1e-4)


def test_seq2seq_generation_decodes_from_the_prompt_as_the_encoders_input(models):
    from negtrain.models.generation import Limits, respond

    backend = _backend(models["t5"], seq2seq=True)
    prompts = ["Is the following statement True or False? A dog is an animal.", "yes no"]
    got = backend.answer([Generation(p, 5) for p in prompts], Counts())
    want = respond(backend.model, backend.tokenizer, prompts, Limits(5), encoder_decoder=True)
    assert [(a.text, a.tokens_out) for a in got] == [(w.text, w.tokens) for w in want]


def test_next_token_is_the_cloze_probes_distribution(models):
    backend = _backend(models["llama"], batch=2)
    tok = backend.tokenizer
    texts = ["False is", "False is not", "Yes? False is not at all a"]
    answers = backend.answer([NextToken(t, example=f"negated_lama/test/{i}") for i, t in enumerate(texts)], Counts())
    for t, a in zip(texts, answers, strict=True):
        with torch.no_grad():
            logits = backend.model(input_ids=torch.tensor([tok(t)["input_ids"]])).logits[0, -1]
        assert a.next_logprobs.dtype == torch.float32 and a.next_logprobs.shape == (len(tok),)
        assert torch.allclose(a.next_logprobs, torch.log_softmax(logits.float(), -1), atol=1e-5)


def test_next_token_needs_a_causal_lm(models):
    with pytest.raises(ConfigError, match="only for a causal LM"):
        _backend(models["t5"], seq2seq=True).answer([NextToken("A dog is", example="negated_lama/test/1")], Counts())


def test_truncate_left_cuts_as_the_hf_backend_cuts_and_says_what_the_model_saw(models, tmp_path):
    from negtrain.config import model_config
    from negtrain.models.generation import Limits, respond_ids
    from negtrain.models.lm_encoding import Fitting, encode_causal_eval, seen_prompts

    model, tok = _load(models["llama"])
    model.config.max_position_embeddings = 24
    backend = InProcessBackend(model, tok, 4, truncate="left")
    long_prompt = "Is the following statement True or False? " * 6
    ids = tok(long_prompt)["input_ids"]
    assert len(ids) > 24
    got = backend.answer([Generation(long_prompt, 4, example="b/test/7"), Generation("yes", 4, example="b/test/1")], Counts())
    cfg = model_config(name=str(models["llama"]), family="causal_lm")
    encoded, cut = encode_causal_eval(tok, None, [long_prompt, "yes"], cfg, 4, False, Fitting(backend.context, "b/test", ["7", "1"]))
    assert cut == [0]
    kept = encoded.input_ids[: int(encoded.offsets[1])].tolist()
    assert len(kept) == 20 and kept[0] == tok.bos_token_id and kept[1:] == ids[-19:]  # BOS and the prompt's end
    want = respond_ids(model, tok, [kept], Limits(4))[0]
    assert (got[0].text, got[0].tokens_out, got[0].cut) == (want.text, want.tokens, True)
    assert got[0].seen == seen_prompts(tok, [long_prompt, "yes"], encoded, cut, False)[0] == tok.decode(kept, skip_special_tokens=True)
    assert not got[1].cut and got[1].seen is None
    # A log-likelihood's context keeps room for its continuation; a next token for one token.
    scored = backend.answer([Loglikelihood(long_prompt, " True"), NextToken(long_prompt)], Counts())
    from negtrain.models.choice_inputs import split_pair

    whole, cont = split_pair(tok, long_prompt, " True", causal=True)  # the prompt's last space goes with " True"
    ctx = [tok.bos_token_id, *whole[len(whole) - (24 - len(cont) - 1):]]
    want_lp = continuation_logprobs(model, [ctx], [[cont]], encoder_decoder=False, pad_id=tok.pad_token_id)
    assert scored[0].cut and scored[0].logprob == pytest.approx(float(want_lp.logprob[0, 0]), abs=1e-4)
    assert scored[1].cut and scored[1].seen == tok.decode([tok.bos_token_id, *ids[-22:]], skip_special_tokens=True)
    # Under truncate: error, the row is named before anything is computed.
    strict = InProcessBackend(model, tok, 4)
    for request in (Loglikelihood(long_prompt, " True", example="b/test/3"), NextToken(long_prompt, example="b/test/3")):
        with pytest.raises(ConfigError, match=r"1 of 1 prompts do not fit the model's context of 24 tokens .*row b/test/3"):
            strict.answer([request], Counts())


def test_a_chat_context_is_the_rendered_template_and_the_continuation_follows_it(models):
    backend = _backend(models["llama_chat"])
    tok = backend.tokenizer
    chat = (("user", "Is a dog an animal?"),)
    got = backend.answer([Loglikelihood("Is a dog an animal?", " yes", messages=chat), Loglikelihood("Is a dog an animal?", " yes")],
                         Counts())
    text = tok.apply_chat_template([{"role": "user", "content": "Is a dog an animal?"}], add_generation_prompt=True, tokenize=False)
    assert text.startswith("<s>[INST]")
    ctx = tok(text, add_special_tokens=False)["input_ids"]
    cont = tok(text + " yes", add_special_tokens=False)["input_ids"][len(ctx):]
    want = continuation_logprobs(backend.model, [ctx], [[cont]], encoder_decoder=False, pad_id=tok.pad_token_id)
    assert got[0].logprob == pytest.approx(float(want.logprob[0, 0]), abs=1e-4) and got[0].n_tokens == len(cont)
    assert got[0].logprob != pytest.approx(got[1].logprob, abs=1e-4)  # the plain context is another prompt
    plain = _backend(models["llama"])
    for request in (Loglikelihood("q", " yes", messages=chat), Generation("q", 2, (), chat)):
        with pytest.raises(ConfigError, match="the tokenizer of the hf backend's model has no chat template; drop --chat"):
            plain.answer([request], Counts())


def _recipe(model: Path, family: str = "causal_lm", **sections):
    from negtrain.config import validate_recipe

    return validate_recipe({"description": "engine", "model": {"name": str(model), "family": family},
                            "data": {"eval": [{"benchmark": "scone", "split": "test"}], "eval_batch_size": 3}, **sections}, "test")


def test_a_second_call_is_answered_from_the_cache_and_next_tokens_never_are(models, tmp_path):
    """The response cache is one wrapper round the backend (serving/response_caching.py), put there
    by open_backend when a card has a cache; the backend says what keys an answer."""
    from negtrain.serving.backend import BackendContext, open_backend
    from negtrain.serving.cache import ResponseCache
    from negtrain.serving.response_caching import CachingBackend

    cache = ResponseCache(tmp_path / "responses")
    backend = open_backend("transformers", BackendContext(str(models["llama"]), cache=cache, recipe=_recipe(models["llama"])))
    assert isinstance(backend, CachingBackend)
    inner = backend.inner
    assert inner.cache_settings == {}  # the weights load (and key the cache) at the first answer
    assert inner.model is not None
    assert inner.cache_settings["weights"]["content_sha256"] and inner.cache_settings["precision"] == "32-true"
    requests = [*_scored(False), Generation("True False", 3, example="b/test/5"), NextToken("False is", example="c/test/0")]
    first, again = Counts(), Counts()
    answers = backend.answer(requests, first)
    assert (first.requests, first.cached) == (len(requests), 0)
    repeated = backend.answer(requests, again)
    assert (again.requests, again.cached) == (1, len(requests) - 1)  # the next token is computed again
    for a, b in zip(answers[:-1], repeated[:-1], strict=True):
        assert (a.logprob, a.n_tokens, a.text, a.tokens_out) == (b.logprob, b.n_tokens, b.text, b.tokens_out)
    assert again.tokens_out == first.tokens_out > 0
    # Other settings (another checkpoint, another precision) are another key.
    other = CachingBackend(InProcessBackend(inner.model, inner.tokenizer, 3, name="transformers",
                                            cache_settings={**inner.cache_settings, "precision": "bf16-mixed"}), cache)
    fresh = Counts()
    other.answer(requests[:2], fresh)
    assert (fresh.requests, fresh.cached) == (2, 0)
    # The same settings under the same name are the same key: answered from the cache.
    same = CachingBackend(InProcessBackend(inner.model, inner.tokenizer, 3, name="transformers", cache_settings=inner.cache_settings), cache)
    cached = Counts()
    same.answer(requests[:2], cached)
    assert (cached.requests, cached.cached) == (0, 2)
    # A live model (no settings: its weights change between calls) is never cached.
    live = CachingBackend(InProcessBackend(inner.model, inner.tokenizer, 3, name="transformers"), cache)
    again_live = Counts()
    live.answer(requests[:2], again_live)
    assert (again_live.requests, again_live.cached) == (2, 0)
    cache.close()


def test_near_ties_under_autocast_are_rescored_in_fp32(models):
    requests = _scored(False)
    fp32 = _backend(models["llama"]).answer(requests, Counts())
    rechecked = _backend(models["llama"], autocast_dtype=torch.bfloat16, fp32_recheck_margin=1e9).answer(requests, Counts())
    bf16 = _backend(models["llama"], autocast_dtype=torch.bfloat16).answer(requests, Counts())
    # The lone context has one continuation: nothing to compare it with, so it stays bf16's.
    assert [a.logprob for a in rechecked[:-1]] == [a.logprob for a in fp32[:-1]]
    assert rechecked[-1].logprob == bf16[-1].logprob
    assert [a.logprob for a in bf16] != [a.logprob for a in fp32]  # autocast did change the numbers


def _lm_prompt_scores(backend) -> list[float]:
    return [a.logprob for a in backend.answer(_scored(False), Counts())]


def test_a_runs_checkpoint_is_loaded_into_the_model(models, tmp_path):
    from negtrain.serving.backend import BackendContext
    from negtrain.serving.in_process import open_in_process

    recipe = _recipe(models["llama"])
    base = open_in_process(BackendContext(str(models["llama"]), recipe=recipe))
    state = {f"model.{k}": v.clone() for k, v in base.model.state_dict().items()}
    state["model.lm_head.weight"] += torch.randn_like(state["model.lm_head.weight"])
    ckpt = tmp_path / "last.ckpt"
    torch.save({"state_dict": state, "negtrain_recipe": {}}, ckpt)
    loaded = open_in_process(BackendContext(str(models["llama"]), recipe=recipe, checkpoint=ckpt))
    assert torch.equal(loaded.model.lm_head.weight, state["model.lm_head.weight"])
    by_hand = _backend(models["llama"], batch=3)
    by_hand.model.load_state_dict({k[len("model."):]: v for k, v in state.items()})
    assert _lm_prompt_scores(loaded) == pytest.approx(_lm_prompt_scores(by_hand), abs=1e-5)
    assert _lm_prompt_scores(loaded) != pytest.approx(_lm_prompt_scores(base), abs=1e-3)
    del state["model.lm_head.weight"]
    torch.save({"state_dict": state, "negtrain_recipe": {}}, ckpt)
    with pytest.raises(ConfigError, match="its weights do not fit the recipe's model"):
        assert open_in_process(BackendContext(str(models["llama"]), recipe=recipe, checkpoint=ckpt)).model is None  # loaded at first use


def test_an_adapter_runs_checkpoint_loads_its_adapter_weights(models, tmp_path):
    from negtrain.models.adapters import trainable_state
    from negtrain.serving.backend import BackendContext
    from negtrain.serving.in_process import open_in_process
    from negtrain.serving.in_process_load import load_model

    recipe = _recipe(models["llama"], adapter={"type": "lora", "r": 2, "target_modules": ["q_proj", "v_proj"]})
    trained = load_model(str(models["llama"]), recipe)
    with torch.no_grad():
        for name, p in trained.named_parameters():
            if "lora_B" in name:
                p.normal_()
    holder = torch.nn.Module()
    holder.model = trained
    state = trainable_state(holder, holder.state_dict())
    assert state and all(k.startswith("model.") and "lora" in k for k in state)
    ckpt = tmp_path / "adapter.ckpt"
    torch.save({"state_dict": state, "negtrain_recipe": {}, "negtrain_adapter_only": True}, ckpt)
    loaded = open_in_process(BackendContext(str(models["llama"]), recipe=recipe, checkpoint=ckpt))
    fresh = open_in_process(BackendContext(str(models["llama"]), recipe=recipe))
    want = InProcessBackend(trained.eval(), loaded.tokenizer, 3)
    assert _lm_prompt_scores(loaded) == pytest.approx(_lm_prompt_scores(want), abs=1e-5)
    assert _lm_prompt_scores(loaded) != pytest.approx(_lm_prompt_scores(fresh), abs=1e-3)


def test_a_seq2seq_recipe_loads_an_encoder_decoder_and_of_model_wraps_a_live_model(models):
    from negtrain.serving.backend import BackendContext
    from negtrain.serving.in_process import open_in_process

    backend = open_in_process(BackendContext(str(models["t5"]), recipe=_recipe(models["t5"], "seq2seq"), backend="hf"))
    assert backend.encoder_decoder and backend.name == "hf" and backend.batch_size == 3
    live = InProcessBackend.of_model(backend.model.train(), backend.tokenizer, encoder_decoder=True, batch_size=2)
    answers = live.answer(_scored(True), Counts())
    assert live.model.training  # given back in the mode it came in
    assert [a.logprob for a in answers] == pytest.approx([a.logprob for a in backend.answer(_scored(True), Counts())], abs=1e-5)


def test_a_prompt_asked_again_is_not_tokenized_again(models):
    """The fit path asks the same prompts every epoch: each text is tokenized once per backend."""

    class Counting:
        def __init__(self, tok):
            self.tok, self.calls = tok, 0

        def __call__(self, *args, **kwargs):
            self.calls += 1
            return self.tok(*args, **kwargs)

        def __getattr__(self, name):
            return getattr(self.tok, name)

    backend = _backend(models["llama"])
    counting = Counting(backend.tokenizer)
    backend.inputs.tokenizer = counting
    requests = [*_scored(False), Generation("True False", 3), NextToken("False is")]
    first = backend.answer(requests, Counts())
    calls = counting.calls
    assert calls > 0
    again = backend.answer(requests, Counts())
    assert counting.calls == calls
    assert [a.logprob for a in again] == [a.logprob for a in first]


def test_truncate_left_keeps_a_seq2seq_prompts_end_and_refuses_a_prompt_with_no_room(models, tmp_path):
    from negtrain.config import model_config
    from negtrain.models.lm_encoding import Fitting, encode_seq2seq_prompts

    model, tok = _load(models["t5"], seq2seq=True)
    tok.model_max_length = 10
    backend = InProcessBackend(model, tok, 4, encoder_decoder=True, truncate="left")
    assert backend.context.limit == 10
    prompt = "Is the following statement True or False? A dog is an animal."
    got = backend.answer([Loglikelihood(prompt, "True", eos=True), Generation(prompt, 3)], Counts())
    cfg = model_config(name=str(models["t5"]), family="seq2seq")
    encoded, cut = encode_seq2seq_prompts(tok, [prompt], cfg, False, Fitting(backend.context, "b/test", ["0"]))
    kept = encoded.input_ids.tolist()
    assert cut == [0] and len(kept) == 10 and kept[-1] == tok.eos_token_id  # no room kept: the answer is the decoder's
    want = continuation_logprobs(model, [kept], [[tok(text_target="True")["input_ids"]]], encoder_decoder=True, pad_id=tok.pad_token_id)
    assert got[0].cut and got[0].logprob == pytest.approx(float(want.logprob[0, 0]), abs=1e-4)
    assert got[0].seen == got[1].seen == tok.decode(kept, skip_special_tokens=True) and got[1].cut
    causal, ctok = _load(models["llama"])
    causal.config.max_position_embeddings = 24
    with pytest.raises(ConfigError, match="row b/test/2: its answer needs 23 tokens .* leaves no room for a prompt"):
        InProcessBackend(causal, ctok, 4, truncate="left").answer([Generation("True False " * 20, 23, example="b/test/2")], Counts())
