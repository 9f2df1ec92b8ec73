"""Log-likelihood of several continuations of one context, with the context run once.

A label benchmark scored by a language model asks, per example, how likely each label's
verbalizer ("yes", "no", "don't know") is as the continuation of the prompt. Scoring every token of
every verbalizer (not just its first sub-token) separates labels whose texts share a beginning
("not sure" / "not at all") and scores multi-token answers in full.

Cost: the prompt is never run once per choice.

- **Causal LM** (shared prefix): one forward pass over the left-padded contexts with the KV cache
  on. Its last position gives every choice's first token; the cache is then repeated once per
  choice and one batched forward pass over all choices' remaining tokens (right-padded) gives the
  rest. One-token choices need no second pass at all.
- **Encoder-decoder**: the encoder runs once per example; its output is repeated per choice and
  the decoder scores all choices in one padded batch (teacher forcing from the decoder start token).

``logprob[i, j]`` is the sum over choice j's tokens of log p(token | context, earlier tokens);
``n_tokens[i, j]`` its length, so a caller can take the per-token mean instead. Results equal a
naive loop that runs context + choice as one sequence per choice (tested to float tolerance).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch
from transformers.modeling_outputs import BaseModelOutput


@dataclass(frozen=True)
class ContinuationScores:
    logprob: torch.Tensor  # (n_examples, n_choices) float32: summed token log-probabilities
    n_tokens: torch.Tensor  # (n_examples, n_choices) int64: tokens per continuation

    def normalized(self, how: str) -> torch.Tensor:
        """'sum': the continuation's log-probability; 'mean': per token."""
        if how == "sum":
            return self.logprob
        if how == "mean":
            return self.logprob / self.n_tokens.to(self.logprob.dtype)
        raise ValueError(f"normalisation must be 'sum' or 'mean', not {how!r}")


def _pad(rows: list[list[int]], pad_id: int, left: bool) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        if left:
            ids[i, width - len(r) :] = torch.tensor(r, dtype=torch.long)
            mask[i, width - len(r) :] = 1
        else:
            ids[i, : len(r)] = torch.tensor(r, dtype=torch.long)
            mask[i, : len(r)] = 1
    return ids, mask


def continuation_logprobs(
    model,
    context_ids: list[list[int]],
    choice_ids: list[list[list[int]]],
    *,
    encoder_decoder: bool,
    pad_id: int,
) -> ContinuationScores:
    """Score every choice of every example as the continuation of that example's context.

    ``context_ids``: per example, the prompt's token ids (causal: with BOS if the tokenizer adds
    one). ``choice_ids``: per example, per choice, the continuation's ids (non-empty); every
    example has the same number of choices.
    """
    if len(context_ids) != len(choice_ids):
        raise ValueError(f"{len(context_ids)} contexts but {len(choice_ids)} lists of choices")
    if not context_ids:
        empty = torch.zeros((0, 0))
        return ContinuationScores(empty, empty.long())
    counts = {len(c) for c in choice_ids}
    if len(counts) != 1 or 0 in counts:
        raise ValueError(f"every example needs the same, non-zero number of choices (got {sorted(counts)})")
    if any(not c for cs in choice_ids for c in cs):
        raise ValueError("a choice has no tokens")
    if any(not c for c in context_ids):
        raise ValueError("a context has no tokens")
    device = next(model.parameters()).device
    ids, mask = _pad(context_ids, pad_id, left=not encoder_decoder)
    return score_batch(model, ids.to(device), mask.to(device), choice_ids, encoder_decoder=encoder_decoder, pad_id=pad_id)


def _positions(mask: torch.Tensor) -> torch.Tensor:
    return (mask.cumsum(-1) - 1).clamp(min=0)


def score_batch(
    model,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    choice_ids: list[list[list[int]]],
    *,
    encoder_decoder: bool,
    pad_id: int,
) -> ContinuationScores:
    """:func:`continuation_logprobs` on an already padded batch of contexts (causal: left-padded;
    encoder-decoder: any padding), as the data loader delivers it."""
    n, k = len(choice_ids), len(choice_ids[0])
    device = input_ids.device
    flat = [c for cs in choice_ids for c in cs]  # row i*k + j: example i, choice j
    cont, cont_mask = _pad(flat, pad_id, left=False)
    cont, cont_mask = cont.to(device), cont_mask.to(device)
    if encoder_decoder:
        token_lp = _encoder_decoder(model, input_ids, attention_mask, cont, cont_mask, k, pad_id)
    else:
        token_lp = _causal(model, input_ids, attention_mask, cont, cont_mask, k)
    logprob = (token_lp * cont_mask).sum(1).view(n, k)
    return ContinuationScores(logprob.float().cpu(), cont_mask.sum(1).view(n, k).cpu())


def _token_logprobs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return torch.log_softmax(logits.float(), dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def _causal(model, ids, mask, cont, cont_mask, k) -> torch.Tensor:
    out = model(input_ids=ids, attention_mask=mask, position_ids=_positions(mask), use_cache=cont.shape[1] > 1)
    # Left-padded: the last position of every row predicts the first continuation token.
    first = _token_logprobs(out.logits[:, -1].repeat_interleave(k, 0), cont[:, 0]).unsqueeze(1)
    if cont.shape[1] == 1:
        return first
    cache = returned_cache(out)
    if not hasattr(cache, "batch_repeat_interleave"):  # a model without a repeatable cache
        return _causal_full_rows(model, ids, mask, cont, cont_mask, k)
    cache.batch_repeat_interleave(k)  # in place: each example's prompt keys/values, once per choice
    feed, feed_mask = cont[:, :-1], cont_mask[:, :-1]
    full_mask = torch.cat([mask.repeat_interleave(k, 0), feed_mask], dim=1)
    start = mask.sum(1).repeat_interleave(k, 0).unsqueeze(1)
    positions = start + torch.arange(feed.shape[1], device=ids.device).unsqueeze(0)
    rest = model(input_ids=feed, attention_mask=full_mask, position_ids=positions, use_cache=False, **{cache_keyword(model): cache})
    return torch.cat([first, _token_logprobs(rest.logits, cont[:, 1:])], dim=1)


def cache_keyword(model) -> str:
    """The forward keyword that takes a KV cache: ``cache`` where the model's forward names it
    (transformers 5.x, where ``past_key_values`` is deprecated and goes in 5.40), else the older
    ``past_key_values``. Read from the signature, not a version number, so a model class that
    moved early or late is served too; a peft wrapper is looked through to the model it wraps."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"


def returned_cache(out):
    """The cache a forward pass returned, under its new name (``cache``) or its old one."""
    cache = getattr(out, "cache", None)
    return cache if cache is not None else getattr(out, "past_key_values", None)


def _causal_full_rows(model, ids, mask, cont, cont_mask, k) -> torch.Tensor:
    """Fallback: one padded batch of (context + choice) rows, the context repeated per choice."""
    rows = torch.cat([ids.repeat_interleave(k, 0), cont], dim=1)
    row_mask = torch.cat([mask.repeat_interleave(k, 0), cont_mask], dim=1)
    logits = model(input_ids=rows, attention_mask=row_mask, position_ids=_positions(row_mask)).logits
    width = ids.shape[1]
    # Position width - 1 + t predicts continuation token t (the context is left-padded).
    return _token_logprobs(logits[:, width - 1 : width - 1 + cont.shape[1]], cont)


def decoder_start_id(model, pad_id: int) -> int:
    start = getattr(model.config, "decoder_start_token_id", None)
    return pad_id if start is None else int(start)


def _encoder_decoder(model, ids, mask, cont, cont_mask, k, pad_id) -> torch.Tensor:
    encoded = model.get_encoder()(input_ids=ids, attention_mask=mask).last_hidden_state
    start = torch.full((cont.shape[0], 1), decoder_start_id(model, pad_id), dtype=torch.long, device=ids.device)
    decoder_ids = torch.cat([start, cont[:, :-1]], dim=1)
    decoder_mask = torch.cat([torch.ones_like(start), cont_mask[:, :-1]], dim=1)
    out = model(
        encoder_outputs=BaseModelOutput(last_hidden_state=encoded.repeat_interleave(k, 0)),
        attention_mask=mask.repeat_interleave(k, 0),
        decoder_input_ids=decoder_ids,
        decoder_attention_mask=decoder_mask,
        use_cache=False,
    )
    return _token_logprobs(out.logits, cont)
