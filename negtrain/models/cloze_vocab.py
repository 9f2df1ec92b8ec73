"""LAMA's common vocabulary as one model's token ids: what negated-LAMA probes are ranked over
(Kassner & Schütze's ``get_negation_metric`` restricts the distribution at the mask to it; see
:mod:`negtrain.metrics.cloze`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

#: A causal LM's word is the token it continues a short context with (a word-initial piece).
CAUSAL_CONTEXT = "The"


@dataclass(frozen=True)
class CommonVocab:
    """``ids``: the distinct vocabulary ids of the common words that are one token for this
    tokenizer, in the file's order (an uncased model maps "Paris" and "paris" onto one token,
    ranked once); ``word_id``: word -> its id; ``left_out``: words the tokenizer splits into
    several tokens, left out of the ranking."""

    ids: torch.Tensor
    word_id: dict[str, int]
    left_out: int


def common_vocab(tokenizer, words: Sequence[str], causal: bool) -> CommonVocab:
    if causal:
        ctx = tokenizer(CAUSAL_CONTEXT)["input_ids"]
        whole = tokenizer([f"{CAUSAL_CONTEXT} {w}" for w in words])["input_ids"]
        pieces = [x[len(ctx):] if x[: len(ctx)] == ctx else x for x in whole]
    else:
        pieces = tokenizer([" " + w for w in words], add_special_tokens=False)["input_ids"]
    word_id = {word: ids[0] for word, ids in zip(words, pieces, strict=False) if len(ids) == 1}
    distinct = list(dict.fromkeys(word_id.values()))
    return CommonVocab(torch.tensor(distinct, dtype=torch.long), word_id, len(words) - len(word_id))


def gold_or_skip(vocab: CommonVocab, objects: Sequence[str]) -> tuple[list[int], list[str | None]]:
    """Per probe object: its vocabulary id (-1 when skipped) and why it is skipped (None: scored)."""
    ids: list[int] = []
    reasons: list[str | None] = []
    for obj in objects:
        if obj in vocab.word_id:
            ids.append(vocab.word_id[obj])
            reasons.append(None)
        else:
            ids.append(-1)
            reasons.append(f"object {obj!r} is not a one-token word of LAMA's common vocabulary for this model")
    return ids, reasons
