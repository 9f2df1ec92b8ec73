"""Greedy generation: the one place a language model writes text.

The request is plain data (:class:`Limits`: new-token limit and stop strings) and the answer is
plain data (:class:`Generated`: text and tokens generated per prompt), so another backend (a
served model) can answer the same request. Greedy (no sampling, one beam) with the KV cache, so
the same prompts give the same responses; left-padded batches, so every row's new tokens start at
the same column. Stop strings end a row as soon as one of them has been generated; the text is
cut before it, so batching never changes a response.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Limits:
    max_new_tokens: int = 16
    stop: tuple[str, ...] = ()


@dataclass(frozen=True)
class Generated:
    text: str  # cut before the first stop string
    tokens: int  # tokens generated (up to and including EOS or the token that completed a stop string)


def cut_at_stop(text: str, stop: Sequence[str]) -> str:
    """``text`` up to the earliest occurrence of any stop string."""
    end = len(text)
    for s in stop:
        i = text.find(s)
        if i != -1:
            end = min(end, i)
    return text[:end]


@torch.no_grad()
def greedy(model, tokenizer, input_ids: torch.Tensor, attention_mask: torch.Tensor, limits: Limits, encoder_decoder: bool) -> list[Generated]:
    """Greedy continuations of a padded batch (causal: left-padded)."""
    kwargs = dict(
        max_new_tokens=limits.max_new_tokens, do_sample=False, num_beams=1, use_cache=True,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
    )
    if limits.stop:
        kwargs.update(stop_strings=list(limits.stop), tokenizer=tokenizer)
    out = model.generate(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
    new = out[:, 1:] if encoder_decoder else out[:, input_ids.shape[1]:]  # a seq2seq output starts with the decoder start token
    texts = tokenizer.batch_decode(new, skip_special_tokens=True)
    ends = (new == tokenizer.eos_token_id) | (new == tokenizer.pad_token_id)
    # Tokens until the first EOS/pad (inclusive: EOS was generated), or the whole row.
    first_end = torch.where(ends.any(1), ends.int().argmax(1) + 1, torch.full_like(ends[:, 0], new.shape[1], dtype=torch.long))
    return [Generated(cut_at_stop(t, limits.stop), int(n)) for t, n in zip(texts, first_end.tolist())]


def respond(model, tokenizer, prompts: Sequence[str], limits: Limits, batch_size: int = 32, encoder_decoder: bool = False,
            add_special_tokens: bool = True) -> list[Generated]:
    """The string-level request: each prompt's greedy response, batched by length (longest first,
    so a batch pads little), left-padded for a causal LM, and returned in the prompts' order."""
    ids = tokenizer(list(prompts), add_special_tokens=add_special_tokens)["input_ids"]
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
        for i, g in zip(rows, greedy(model, tokenizer, batch.to(device), mask.to(device), limits, encoder_decoder)):
            out[i] = g
    return out  # type: ignore[return-value]
