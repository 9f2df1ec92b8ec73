"""Token ids of multiple-choice prompts and continuations, split the way lm-evaluation-harness
splits them (``TemplateLM._encode_pair``), so that our log-likelihoods are the harness's.

- The continuation is ``target_delimiter + choice``; trailing whitespace of the context moves to
  the start of the continuation (it belongs to the next word's token).
- Causal LMs: ``whole = tokenize(context + continuation)``, ``context_ids = tokenize(context)``,
  and the continuation is ``whole[len(context_ids):]``: tokenized in context, so a BPE merge
  across the boundary is kept as the model would see it. Special tokens are the tokenizer's
  defaults (a BOS where the tokenizer adds one).
- Encoder-decoder LMs: the context is tokenized with the tokenizer's defaults (T5 appends EOS),
  the continuation on its own without special tokens; it is the decoder's target.

A context longer than ``max_length`` minus the longest continuation keeps its end (and its BOS),
as the harness left-truncates.
"""

from __future__ import annotations

from collections.abc import Sequence


def split_pair(tokenizer, context: str, continuation: str, causal: bool, add_special_tokens: bool = True) -> tuple[list[int], list[int]]:
    """``add_special_tokens``: False for a context that holds its own (a chat template's text)."""
    spaces = len(context) - len(context.rstrip())
    if spaces:
        context, continuation = context[:-spaces], context[-spaces:] + continuation
    if causal:
        whole = tokenizer(context + continuation, add_special_tokens=add_special_tokens)["input_ids"]
        ctx = tokenizer(context, add_special_tokens=add_special_tokens)["input_ids"]
        return ctx, whole[len(ctx) :]
    return tokenizer(context, add_special_tokens=add_special_tokens)["input_ids"], tokenizer(continuation, add_special_tokens=False)["input_ids"]


def encode_choices(
    tokenizer, contexts: Sequence[str], choices: Sequence[Sequence[str]], delimiter: str, causal: bool, max_length: int
) -> tuple[list[list[int]], list[list[list[int]]]]:
    """(context ids per example, continuation ids per example and choice)."""
    bos = tokenizer.bos_token_id
    ctx_ids, choice_ids = [], []
    for context, options in zip(contexts, choices, strict=False):
        pairs = [split_pair(tokenizer, context, delimiter + option, causal) for option in options]
        # The context string is the same for every choice, so are its ids (the harness tokenizes
        # it alone); only the continuations differ.
        shortest = pairs[0][0]
        conts = [p[1] for p in pairs]
        room = max(max_length - max(len(c) for c in conts), 2)
        if len(shortest) > room:
            keep_bos = bos is not None and shortest[0] == bos
            shortest = (shortest[:1] + shortest[len(shortest) - room + 1 :]) if keep_bos else shortest[-room:]
        ctx_ids.append(shortest)
        choice_ids.append(conts)
    return ctx_ids, choice_ids
