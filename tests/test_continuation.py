"""The full-continuation log-likelihood scorer (negtrain.models.continuation), checked by hand.

The verbalizers "not sure" and "not at all" share their first sub-token, so a first-token scorer
ties them; only their later tokens tell them apart. Every score is recomputed by hand from one
full forward pass per (context, choice), with no cache and no sharing.
"""

from __future__ import annotations

import pytest
import torch

from negtrain.models.continuation import ContinuationScores, continuation_logprobs

WORDS = ("not sure", "not at all", "yes")


def _load(path, causal):
    from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    model = (AutoModelForCausalLM if causal else AutoModelForSeq2SeqLM).from_pretrained(path).eval()
    return tok, model


def _by_hand(model, context, choice, causal, start):
    """sum_t log p(choice[t] | context, choice[:t]) from one plain forward pass."""
    if causal:
        logits = model(input_ids=torch.tensor([context + choice])).logits[0].float()
        steps = range(len(context) - 1, len(context) + len(choice) - 1)
    else:
        logits = model(input_ids=torch.tensor([context]), decoder_input_ids=torch.tensor([[start, *choice[:-1]]])).logits[0].float()
        steps = range(len(choice))
    logp = torch.log_softmax(logits, -1)
    return sum(float(logp[s, t]) for s, t in zip(steps, choice, strict=False))


@pytest.mark.parametrize("key,causal", [("llama", True), ("t5", False)])
def test_shared_first_subtoken_scored_by_hand(lm_env, key, causal):
    from negtrain.models.lm_encoding import continuation_ids

    tok, model = _load(lm_env[key], causal)
    contexts = [
        tok("A dog is not a cat. Is a dog a cat? Answer:")["input_ids"],
        tok("Is it raining? Answer:")["input_ids"],  # shorter: the batch is padded
    ]
    choices = [continuation_ids(tok, w, causal) for w in WORDS]
    # The two negated verbalizers really share their first sub-token and differ later.
    assert choices[0][0] == choices[1][0] and choices[0] != choices[1]
    assert len(choices[0]) > 1 and len(choices[1]) > 1
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    with torch.no_grad():
        scores = continuation_logprobs(model, contexts, [choices, choices], encoder_decoder=not causal, pad_id=pad)
        start = model.config.decoder_start_token_id if not causal else None
        expected = torch.tensor([[_by_hand(model, c, ch, causal, start) for ch in choices] for c in contexts])
    assert scores.logprob.shape == (2, 3) and scores.logprob.dtype == torch.float32
    assert torch.allclose(scores.logprob, expected, atol=1e-4), (scores.logprob, expected)
    assert scores.n_tokens.tolist() == [[len(ch) for ch in choices]] * 2
    # Their shared first token contributes the same to both; the sums differ by the later tokens.
    assert abs(float(scores.logprob[0, 0] - scores.logprob[0, 1])) > 1e-3
    mean = scores.normalized("mean")
    assert torch.allclose(mean, scores.logprob / scores.n_tokens, atol=1e-6)


def test_one_token_choices_and_per_example_choices(lm_env):
    """One-token choices need no second pass; examples may have different choices."""
    tok, model = _load(lm_env["llama"], True)
    ctx = [tok("Is it True?")["input_ids"], tok("Is a cat a dog? Answer:")["input_ids"]]
    true_id = tok.encode(" True", add_special_tokens=False)
    false_id = tok.encode(" False", add_special_tokens=False)
    choices = [[true_id[:1], false_id[:1]], [false_id, true_id]]
    with torch.no_grad():
        scores = continuation_logprobs(model, ctx, choices, encoder_decoder=False, pad_id=tok.eos_token_id)
        for i, c in enumerate(ctx):
            for j, ch in enumerate(choices[i]):
                assert float(scores.logprob[i, j]) == pytest.approx(_by_hand(model, c, ch, True, None), abs=1e-4)


def test_input_checks():
    class Dummy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))

    with pytest.raises(ValueError, match="same, non-zero number of choices"):
        continuation_logprobs(Dummy(), [[1], [2]], [[[1]], [[1], [2]]], encoder_decoder=False, pad_id=0)
    with pytest.raises(ValueError, match="a choice has no tokens"):
        continuation_logprobs(Dummy(), [[1]], [[[1], []]], encoder_decoder=False, pad_id=0)
    with pytest.raises(ValueError, match="must be 'sum' or 'mean'"):
        ContinuationScores(torch.zeros(1, 1), torch.ones(1, 1, dtype=torch.long)).normalized("max")


def test_sum_and_mean_can_disagree():
    """A long verbalizer with likely tokens loses on the sum and wins on the per-token mean."""
    s = ContinuationScores(torch.tensor([[-1.5, -1.2]]), torch.tensor([[3, 1]]))
    assert s.normalized("sum").argmax().item() == 1
    assert s.normalized("mean").argmax().item() == 0


def test_fallback_without_a_repeatable_cache_gives_the_same_scores(lm_env):
    from negtrain.models import continuation

    tok, model = _load(lm_env["llama"], True)
    ctx = [tok("Is a cat a dog? Answer:")["input_ids"], tok("Yes?")["input_ids"]]
    choices = [[tok.encode(" not sure", add_special_tokens=False), tok.encode(" yes", add_special_tokens=False)]] * 2
    with torch.no_grad():
        shared = continuation_logprobs(model, ctx, choices, encoder_decoder=False, pad_id=tok.eos_token_id)
        ids, mask = continuation._pad(ctx, tok.eos_token_id, left=True)
        cont, cont_mask = continuation._pad([c for cs in choices for c in cs], tok.eos_token_id, left=False)
        full = continuation._causal_full_rows(model, ids, mask, cont, cont_mask, 2)
    assert torch.allclose((full * cont_mask).sum(1).view(2, 2), shared.logprob, atol=1e-4)


def _scored_by_full_rows(model, contexts, choices):
    """The pre-cache-API reference: every (context, choice) as one plain, unpadded forward pass."""
    return torch.tensor([[_by_hand(model, c, ch, True, None) for ch in choices] for c in contexts])


def test_cache_api_scores_unchanged_and_not_deprecated(lm_env, caplog):
    """The shared-prefix scorer hands its KV cache back through the keyword the installed
    transformers names (``cache``; ``past_key_values`` is deprecated there), the scores equal a
    plain full forward pass per choice to 1e-6 relative (a float32 sum near -20 has a step of
    1.9e-6), and no deprecation warning is raised."""
    import inspect
    import logging
    import warnings

    from negtrain.models.continuation import cache_keyword
    from negtrain.models.lm_encoding import continuation_ids

    tok, model = _load(lm_env["llama"], True)
    params = inspect.signature(model.forward).parameters
    assert cache_keyword(model) == ("cache" if "cache" in params else "past_key_values")
    contexts = [tok("A dog is not a cat. Is a dog a cat? Answer:")["input_ids"], tok("Is it raining? Answer:")["input_ids"]]
    choices = [continuation_ids(tok, w, True) for w in WORDS]
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING):
        warnings.simplefilter("always")
        scores = continuation_logprobs(model, contexts, [choices, choices], encoder_decoder=False, pad_id=tok.eos_token_id)
        expected = _scored_by_full_rows(model, contexts, choices)
    assert torch.allclose(scores.logprob, expected, atol=0, rtol=1e-6), (scores.logprob - expected).abs().max()
    said = [str(w.message) for w in caught] + [r.getMessage() for r in caplog.records]
    assert not [m for m in said if "past_key_values" in m], said


def test_oldercache_keyword_still_served(lm_env):
    """A model whose forward still takes ``past_key_values`` (older transformers, or a model class
    that has not moved) gets the cache under that name, and its scores, which are what the scorer
    computed before the move to ``cache``, equal the new path's to 1e-6 on the same weights."""
    from transformers import LlamaForCausalLM

    from negtrain.models.continuation import cache_keyword
    from negtrain.models.lm_encoding import continuation_ids

    seen = []

    class OldStyle(LlamaForCausalLM):
        def forward(self, input_ids=None, attention_mask=None, position_ids=None, past_key_values=None, use_cache=None):
            seen.append(past_key_values is not None)
            new = {"cache": past_key_values} if past_key_values is not None else {}
            return super().forward(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=use_cache, **new)

    tok = _load(lm_env["llama"], True)[0]
    model = OldStyle.from_pretrained(lm_env["llama"]).eval()
    assert cache_keyword(model) == "past_key_values"
    contexts = [tok("Is a cat a dog? Answer:")["input_ids"]]
    choices = [continuation_ids(tok, w, True) for w in WORDS]
    new_style = _load(lm_env["llama"], True)[1]
    with torch.no_grad():
        before = continuation_logprobs(model, contexts, [choices], encoder_decoder=False, pad_id=tok.eos_token_id)
        after = continuation_logprobs(new_style, contexts, [choices], encoder_decoder=False, pad_id=tok.eos_token_id)
    assert seen == [False, True]  # the prompt pass, then the choices' pass fed from the cache
    assert torch.allclose(before.logprob, after.logprob, atol=1e-6, rtol=0), (before.logprob - after.logprob).abs().max()


def test_generation_hands_the_shared_prefix_cache_by_the_models_own_keyword(lm_env):
    """Greedy generation feeds the shared prefix's KV cache to ``generate()`` under the keyword the
    model's forward names, not one guessed from the transformers version: transformers 5.17 names
    ``past_key_values`` and refuses ``cache`` ("model_kwargs are not used by the model"), which
    stopped every few-shot protocol on a GPU machine with that version. The texts are the same."""
    from transformers import LlamaForCausalLM

    from negtrain.models.generation import Limits, greedy

    class OldStyle(LlamaForCausalLM):
        def forward(self, input_ids=None, attention_mask=None, position_ids=None, past_key_values=None, use_cache=None, **rest):
            new = {"cache": past_key_values} if past_key_values is not None else {}
            return super().forward(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                                   use_cache=use_cache, **new, **rest)

    tok, new_style = _load(lm_env["llama"], True)
    old_style = OldStyle.from_pretrained(lm_env["llama"]).eval()
    tok.padding_side = "left"
    tok.pad_token = tok.pad_token or tok.eos_token
    prefix = "One long instruction that every row of the batch starts with, so its keys are computed once. " * 2
    enc = tok([prefix + "Is a dog a cat?", prefix + "Is it not raining today?"], return_tensors="pt", padding=True)
    keywords = []
    for model in (old_style, new_style):
        plain = model.generate

        def spy(*args, _plain=plain, **kwargs):
            keywords.append({"cache", "past_key_values"} & set(kwargs))
            return _plain(*args, **kwargs)

        model.generate = spy
    limits = Limits(max_new_tokens=6)
    old = greedy(old_style, tok, enc.input_ids, enc.attention_mask, limits, encoder_decoder=False)
    new = greedy(new_style, tok, enc.input_ids, enc.attention_mask, limits, encoder_decoder=False)
    assert keywords == [{"past_key_values"}, {"cache"}]
    assert old == new
