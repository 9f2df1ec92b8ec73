"""The full-continuation log-likelihood scorer (negtrain.models.continuation), checked by hand.

The verbalizers "not sure" and "not at all" share their first sub-token, so a first-token scorer
ties them; only their later tokens tell them apart. Every score is recomputed by hand from one
full forward pass per (context, choice), with no cache and no sharing.
"""

from __future__ import annotations

import pytest
import torch

from negtrain.models.continuation import ContinuationScores, continuation_logprobs
from tiny_models import lm_env, lm_world, one_thread  # noqa: F401  (fixtures)

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
    return sum(float(logp[s, t]) for s, t in zip(steps, choice))


@pytest.mark.parametrize("key,causal", [("llama", True), ("t5", False)])
def test_shared_first_subtoken_scored_by_hand(lm_env, key, causal):
    from negtrain.models.lm import continuation_ids

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
