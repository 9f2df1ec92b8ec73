"""Log-likelihood of full continuations given a context, for causal and encoder-decoder LMs.

The shared primitive behind multiple-choice scoring: for every (example, choice) it returns the
sum over the continuation's tokens of log p(token | context, earlier continuation tokens), and
how many tokens that is. What the continuations are (answer texts, delimiters, normalisation)
is the caller's business; this module only scores token ids.

This version runs one right-padded batch of all (example, choice) rows: causal rows are
``context + continuation`` (the prediction for token t is read at position t-1); seq2seq rows
feed the context to the encoder and the continuation as the decoder's labels (teacher forcing
from the model's decoder start token).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class ContinuationScores:
    logprob: torch.Tensor  # (n_examples, n_choices) float32: summed log-probability of the continuation
    n_tokens: torch.Tensor  # (n_examples, n_choices) int64: number of continuation tokens


def _pad(rows: list[list[int]], value: int) -> torch.Tensor:
    width = max(len(r) for r in rows)
    out = torch.full((len(rows), width), value, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r, dtype=torch.long)
    return out


def _device(model) -> torch.device:
    return next(model.parameters()).device


@torch.no_grad()
def continuation_logprobs(
    model,
    context_ids: list[list[int]],
    choice_ids: list[list[list[int]]],
    *,
    encoder_decoder: bool,
    pad_id: int,
) -> ContinuationScores:
    n_examples = len(context_ids)
    if len(choice_ids) != n_examples:
        raise ValueError(f"{n_examples} contexts but {len(choice_ids)} choice lists")
    n_choices = len(choice_ids[0]) if n_examples else 0
    if any(len(c) != n_choices for c in choice_ids):
        raise ValueError("every example must have the same number of choices")
    if any(len(c) == 0 for cs in choice_ids for c in cs):
        raise ValueError("a continuation has no tokens")
    if n_examples == 0:
        empty = torch.zeros((0, n_choices))
        return ContinuationScores(empty.float(), empty.long())
    contexts = [ctx for ctx in context_ids for _ in range(n_choices)]
    conts = [c for cs in choice_ids for c in cs]
    lengths = torch.tensor([len(c) for c in conts], dtype=torch.long)
    device = _device(model)
    if encoder_decoder:
        enc = _pad(contexts, pad_id).to(device)
        enc_mask = _pad([[1] * len(c) for c in contexts], 0).to(device)
        labels = _pad(conts, -100).to(device)
        logits = model(input_ids=enc, attention_mask=enc_mask, labels=labels).logits.float()
        targets = labels
    else:
        if any(len(c) == 0 for c in contexts):
            raise ValueError("a causal context needs at least one token (e.g. BOS) to condition on")
        rows = [ctx + cont for ctx, cont in zip(contexts, conts)]
        ids = _pad(rows, pad_id).to(device)
        mask = _pad([[1] * len(r) for r in rows], 0).to(device)
        logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1].float()
        # Target t (t >= 1) is predicted at position t-1; only continuation tokens count.
        targets = torch.full_like(ids[:, 1:], -100)
        for i, (ctx, cont) in enumerate(zip(contexts, conts)):
            targets[i, len(ctx) - 1 : len(ctx) - 1 + len(cont)] = ids[i, len(ctx) : len(ctx) + len(cont)]
    logp = torch.log_softmax(logits, dim=-1)
    keep = targets != -100
    picked = logp.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1) * keep
    total = picked.sum(-1).cpu()
    return ContinuationScores(total.view(n_examples, n_choices), lengths.view(n_examples, n_choices))
