"""Greedy generation: the one place a language model writes text.

The request is plain data (:class:`Limits`: new-token limit and stop strings) and the answer is
plain data (:class:`Generated`: text and tokens generated per prompt), so another backend (a
served model) can answer the same request. Greedy (no sampling, one beam) with the KV cache, so
the same prompts give the same responses; left-padded batches, so every row's new tokens start at
the same column; the tokens a batch's prompts share (a few-shot prompt's demonstrations) are run
once and their cache repeated for every row (perf/results/generation-*.md: same texts, faster). Stop strings end a row as soon as one of them has been generated; the text is
cut before it, so batching never changes a response.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from negtrain.models.continuation import cache_keyword, returned_cache


@dataclass(frozen=True)
class Limits:
    max_new_tokens: int = 16
    stop: tuple[str, ...] = ()


@dataclass(frozen=True)
class Generated:
    text: str  # cut before the first stop string
    tokens: int  # tokens of the response: up to the token that completed a stop string, or up to EOS, which
    # is not counted (as an OpenAI-compatible server counts completion_tokens), so every backend counts alike


def cut_at_stop(text: str, stop: Sequence[str]) -> str:
    """``text`` up to the earliest occurrence of any stop string."""
    end = len(text)
    for s in stop:
        i = text.find(s)
        if i != -1:
            end = min(end, i)
    return text[:end]


#: A causal batch whose rows share at least this many leading tokens (a few-shot prompt's
#: demonstrations, a long instruction) runs them once (see :func:`shared_prefix`).
MIN_SHARED_PREFIX = 32


def shared_prefix(input_ids: torch.Tensor, attention_mask: torch.Tensor, pad_id: int) -> tuple[int, torch.Tensor, torch.Tensor]:
    """Split a left-padded batch into the tokens every row starts with and the rest.

    Returns (P, ids, mask): ``ids`` holds the P shared tokens, then each row's remaining tokens
    left-padded after them (``[prefix][pad..][suffix]``, the padding masked out, so positions,
    which follow the mask, are as before). P = 0 when the rows share fewer than
    :data:`MIN_SHARED_PREFIX` tokens; every row keeps at least one token of its own."""
    rows = [ids[m.bool()].tolist() for ids, m in zip(input_ids.cpu(), attention_mask.cpu(), strict=False)]
    if len(rows) < 2:
        return 0, input_ids, attention_mask
    first, p = rows[0], min(len(r) for r in rows) - 1
    for r in rows[1:]:
        n = 0
        while n < p and r[n] == first[n]:
            n += 1
        p = n
    if p < MIN_SHARED_PREFIX:
        return 0, input_ids, attention_mask
    width = max(len(r) for r in rows) - p
    ids = torch.full((len(rows), p + width), pad_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    ids[:, :p], mask[:, :p] = torch.tensor(first[:p]), 1
    for i, r in enumerate(rows):
        tail = r[p:]
        ids[i, p + width - len(tail):], mask[i, p + width - len(tail):] = torch.tensor(tail), 1
    return p, ids.to(input_ids.device), mask.to(input_ids.device)


def producible(tokenizer, stop: Sequence[str]) -> tuple[str, ...]:
    """The stop strings the tokenizer can write at all (a SentencePiece vocabulary has no newline):
    a string it cannot write can never end a response, and Hugging Face's stop-string matcher
    refuses it, so it is left out (exactly: the response is the same)."""
    out = []
    for s in stop:
        probe = tokenizer.encode(f"a{s}a", add_special_tokens=False)
        if s in tokenizer.decode(probe, skip_special_tokens=True):
            out.append(s)
    return tuple(out)


@torch.no_grad()
def greedy(model, tokenizer, input_ids: torch.Tensor, attention_mask: torch.Tensor, limits: Limits, encoder_decoder: bool) -> list[Generated]:
    """Greedy continuations of a padded batch (causal: left-padded). A causal batch's shared
    leading tokens are run once, their KV cache repeated for every row (:func:`shared_prefix`)."""
    kwargs = dict(
        max_new_tokens=limits.max_new_tokens, do_sample=False, num_beams=1, use_cache=True,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
    )
    stop = producible(tokenizer, limits.stop)
    if stop:
        kwargs.update(stop_strings=list(stop), tokenizer=tokenizer)
    if not encoder_decoder:
        p, shared_ids, shared_mask = shared_prefix(input_ids, attention_mask, tokenizer.pad_token_id)
        if p:
            cache = returned_cache(model(input_ids=shared_ids[:1, :p], use_cache=True))
            cache.batch_repeat_interleave(len(shared_ids))
            input_ids, attention_mask = shared_ids, shared_mask
            # The keyword generate() takes the cache by is the one the model's forward names
            # (`cache` from transformers 5.2x, `past_key_values` before): read from the signature,
            # not from a version number (5.17 still names past_key_values and refuses `cache`).
            kwargs[cache_keyword(model)] = cache
    out = model.generate(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
    new = out[:, 1:] if encoder_decoder else out[:, input_ids.shape[1]:]  # a seq2seq output starts with the decoder start token
    texts = tokenizer.batch_decode(new, skip_special_tokens=True)
    ends = (new == tokenizer.eos_token_id) | (new == tokenizer.pad_token_id)
    # Tokens before the first EOS/pad (EOS itself not counted, as servers count), or the whole row.
    first_end = torch.where(ends.any(1), ends.int().argmax(1), torch.full_like(ends[:, 0], new.shape[1], dtype=torch.long))
    return [Generated(cut_at_stop(t, limits.stop), int(n)) for t, n in zip(texts, first_end.tolist(), strict=False)]


def respond(model, tokenizer, prompts: Sequence[str], limits: Limits, batch_size: int = 32, encoder_decoder: bool = False,
            add_special_tokens: bool = True) -> list[Generated]:
    """The string-level request: each prompt's greedy response, batched by length (longest first,
    so a batch pads little), left-padded for a causal LM, and returned in the prompts' order."""
    ids = tokenizer(list(prompts), add_special_tokens=add_special_tokens)["input_ids"]
    return respond_ids(model, tokenizer, ids, limits, batch_size, encoder_decoder)


def respond_ids(model, tokenizer, ids: Sequence[Sequence[int]], limits: Limits, batch_size: int = 32,
                encoder_decoder: bool = False) -> list[Generated]:
    """:func:`respond` for prompts already tokenized (a caller that measured them first tokenizes once)."""
    order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
    device = next(model.parameters()).device
    out: list[Generated | None] = [None] * len(ids)
    for start in range(0, len(order), batch_size):
        rows = order[start:start + batch_size]
        width = max(len(ids[i]) for i in rows)
        batch = torch.full((len(rows), width), tokenizer.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for r, i in enumerate(rows):
            n = len(ids[i])
            if encoder_decoder:
                batch[r, :n], mask[r, :n] = torch.tensor(ids[i]), 1
            else:
                batch[r, width - n:], mask[r, width - n:] = torch.tensor(ids[i]), 1
        for i, g in zip(rows, greedy(model, tokenizer, batch.to(device), mask.to(device), limits, encoder_decoder), strict=False):
            out[i] = g
    return out  # type: ignore[return-value]  # every row is filled: greedy answers each row of each batch
