"""Token masking for masked-LM objectives, with negation cues masked on their own terms (CueNB).

:func:`mask_tokens` is the rule, on a padded batch:

- a *cue* token (flagged by :class:`negtrain.negation.cues.CueDetector`) is masked with probability
  ``cue_mask_prob`` and replaced by ``cue_id`` (the added ``[CUE]`` token, or the mask token);
- every other token is masked with probability ``mlm_probability``; a masked one becomes the mask
  token with probability ``mask_replace_prob``, a random vocabulary token with probability
  ``random_replace_prob``, and stays as it is otherwise (BERT's 80/10/10 by default);
- special tokens and padding are never masked; a cue token that was not drawn for cue masking is
  not masked at all (it keeps its place, so the cue rate is exactly ``cue_mask_prob``);
- labels are the original token ids at masked positions and -100 elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from negtrain.data.collate import IGNORE
from negtrain.data.encoded import EncodedSplit


@dataclass
class MaskingSpec:
    mask_id: int
    cue_id: int
    special_ids: torch.Tensor  # ids that are never masked (CLS, SEP, PAD, MASK, [CUE], ...)
    random_ids: torch.Tensor  # ids a random replacement is drawn from (the non-special vocabulary)
    cue_mask_prob: float = 1.0
    mlm_probability: float = 0.15
    mask_replace_prob: float = 0.8
    random_replace_prob: float = 0.1

    @classmethod
    def for_tokenizer(cls, tokenizer, cue_id: int | None = None, **rates) -> MaskingSpec:
        special = torch.tensor(sorted(set(tokenizer.all_special_ids)), dtype=torch.long)
        vocab = torch.arange(len(tokenizer), dtype=torch.long)
        random_ids = vocab[~torch.isin(vocab, special)]
        mask_id = tokenizer.mask_token_id
        return cls(mask_id, mask_id if cue_id is None else cue_id, special, random_ids, **rates)


def mask_tokens(
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    cue_flags: torch.Tensor,
    spec: MaskingSpec,
    generator: torch.Generator | None = None,
) -> dict[str, torch.Tensor]:
    """``{"input_ids", "labels", "cue_positions"}`` for a (B, T) batch; see the module docstring."""
    maskable = attention_mask.bool() & ~torch.isin(input_ids, spec.special_ids)
    cue = cue_flags.bool() & maskable
    other = maskable & ~cue

    def draw() -> torch.Tensor:
        return torch.rand(input_ids.shape, generator=generator)

    cue_masked = cue & (draw() < spec.cue_mask_prob)
    other_masked = other & (draw() < spec.mlm_probability)
    labels = torch.where(cue_masked | other_masked, input_ids, torch.full_like(input_ids, IGNORE))
    out = input_ids.clone()
    out[cue_masked] = spec.cue_id
    how = draw()
    to_mask = other_masked & (how < spec.mask_replace_prob)
    to_random = other_masked & (how >= spec.mask_replace_prob) & (how < spec.mask_replace_prob + spec.random_replace_prob)
    out[to_mask] = spec.mask_id
    picks = torch.randint(len(spec.random_ids), input_ids.shape, generator=generator)
    out[to_random] = spec.random_ids[picks[to_random]]
    return {"input_ids": out, "labels": labels, "cue_positions": cue_masked}


def batch_generator(seed: int, epoch: int, indices: torch.Tensor) -> torch.Generator:
    """A generator for one training batch's random draws, from (seed, epoch, its example indices).

    One shared generator would be copied into every dataloader worker (each drawing the same
    masks), restart from the seed on resume, and differ between a run and its resumed copy.
    """
    state = np.random.SeedSequence([seed, epoch, *indices.tolist()]).generate_state(1, np.uint64)[0]
    return torch.Generator().manual_seed(int(state))


def pad_flags(flags: torch.Tensor, encoded: EncodedSplit, indices: torch.Tensor, width: int) -> torch.Tensor:
    """Per-token flags stored flat alongside ``encoded`` -> (B, width), right-padded with False."""
    out = torch.zeros((len(indices), width), dtype=torch.bool)
    starts = encoded.offsets[indices]
    lengths = encoded.offsets[indices + 1] - starts
    for row, (s, n) in enumerate(zip(starts.tolist(), lengths.tolist(), strict=False)):
        out[row, :n] = flags[s : s + n]
    return out


class CueMaskingTransform:
    """Turns a padded batch into a cue-masked MLM batch.

    Training seeds each batch from (seed, epoch, example indices): the masks are the same in any
    dataloader worker, on any rank and after a resume, and new every epoch. Evaluation
    (``per_example=True``) seeds each example by its index, so the held-out masks are the same every
    epoch and on any number of ranks.
    """

    def __init__(self, encoded: EncodedSplit, flags: torch.Tensor, spec: MaskingSpec, seed: int, per_example: bool = False) -> None:
        self.encoded = encoded
        self.flags = flags
        self.spec = spec
        self.seed = seed
        self.per_example = per_example

    def __call__(self, batch: dict[str, torch.Tensor], epoch: int) -> dict[str, torch.Tensor]:
        ids, mask, idx = batch["input_ids"], batch["attention_mask"], batch["index"]
        flags = pad_flags(self.flags, self.encoded, idx, ids.shape[1])
        if not self.per_example:
            batch.update(mask_tokens(ids, mask, flags, self.spec, batch_generator(self.seed, epoch, idx)))
            return batch
        out = {"input_ids": ids.clone(), "labels": torch.full_like(ids, IGNORE), "cue_positions": torch.zeros_like(ids, dtype=torch.bool)}
        for r, (i, n) in enumerate(zip(idx.tolist(), mask.sum(1).tolist(), strict=False)):
            g = torch.Generator().manual_seed(self.seed * 1_000_003 + i)
            # Draw over the example's own tokens, not the batch's padded width: the draws would
            # otherwise depend on which examples share the batch (eval batch size, rank count).
            row = mask_tokens(ids[r : r + 1, :n], mask[r : r + 1, :n], flags[r : r + 1, :n], self.spec, g)
            for key, value in row.items():
                out[key][r, :n] = value[0]
        batch.update(out)
        return batch
