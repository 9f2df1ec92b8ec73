"""Multiple-choice accuracy from log-likelihoods, as lm-evaluation-harness defines it.

For one question with choices c_1..c_k, ``ll_i`` is the summed log-likelihood of choice i's
continuation tokens given the prompt (:func:`negtrain.models.continuation.continuation_logprobs`).
lm-evaluation-harness (``ConfigurableTask.process_results``, ``output_type: multiple_choice``):

- ``acc``: 1 if ``argmax_i ll_i`` is the gold choice;
- ``acc_norm``: 1 if ``argmax_i ll_i / len(c_i)`` is the gold choice, where ``len(c_i)`` is the
  number of *characters* of the choice string as ``doc_to_choice`` returns it (without the
  target delimiter placed between prompt and choice).

Both break ties towards the lower index (numpy's argmax). Scores are averaged over questions.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torchmetrics.utilities import dim_zero_cat

from negtrain.metrics.base import MISSING, ExampleMetric, ratio


def first_argmax(scores: torch.Tensor) -> torch.Tensor:
    """Index of the first maximum along the last dimension (numpy's tie rule, on any device)."""
    is_max = scores == scores.max(dim=-1, keepdim=True).values
    width = is_max.shape[-1]
    position = torch.arange(width, device=is_max.device).expand_as(is_max)
    return torch.where(is_max, position, torch.full_like(position, width)).min(dim=-1).values



def choose(logprob: torch.Tensor, char_lengths: torch.Tensor) -> torch.Tensor:
    """(n, 2): per question the ``acc`` choice (highest log-likelihood) and the ``acc_norm``
    choice (highest log-likelihood per character of the choice string)."""
    raw = first_argmax(logprob.double())
    norm = first_argmax(logprob.double() / char_lengths.double())
    return torch.stack([raw, norm], dim=-1)


class MultipleChoiceMetric(ExampleMetric):
    """``accuracy`` (lm-eval ``acc``), ``accuracy_norm`` (lm-eval ``acc_norm``), ``accuracy/<subset>``
    for every value of the example's subset tags, and ``n``.

    ``update`` takes per question either the chosen index (a predictions file: then only
    ``accuracy`` is defined, and ``accuracy_norm`` is NaN with a note) or the pair
    (acc choice, acc_norm choice) that :func:`choose` returns for a scored model.
    """

    def __init__(self, gold: Sequence[int], tags: Sequence[Sequence[str]] = (), **kwargs) -> None:
        super().__init__(num_examples=len(gold), **kwargs)
        self.gold = np.asarray(gold, dtype=np.int64)
        self.tags = [tuple(t) for t in tags] if tags else [() for _ in gold]
        self.tag_names = sorted({t for ts in self.tags for t in ts})
        self.add_state("norm_predictions", default=[], dist_reduce_fx="cat")
        self.last_norm: np.ndarray | None = None

    def update(self, indices: torch.Tensor, predictions: torch.Tensor) -> None:
        predictions = predictions.detach().to(torch.long)
        if predictions.ndim == 2:
            super().update(indices, predictions[:, 0])
            self.norm_predictions.append(predictions[:, 1].flatten())
        else:
            super().update(indices, predictions)
            # No length-normalised choice: mark it MISSING for these rows.
            self.norm_predictions.append(torch.full_like(predictions.flatten(), MISSING))

    def compute(self) -> dict[str, torch.Tensor]:
        norm = np.full(self.num_examples, MISSING, dtype=np.int64)
        if len(self.indices):
            idx = dim_zero_cat(self.indices).cpu().numpy()
            norm[idx] = dim_zero_cat(self.norm_predictions).cpu().numpy()
        self.last_norm = norm
        return super().compute()

    def score(self, predictions: np.ndarray) -> dict[str, float]:
        seen = predictions != MISSING
        right = (predictions == self.gold) & seen
        norm = self.last_norm if self.last_norm is not None else np.full_like(predictions, MISSING)
        norm_seen = norm != MISSING
        out = {
            "accuracy": ratio(right.sum(), seen.sum()),
            # Only where every scored question has a normalised choice (a model run), else NaN.
            "accuracy_norm": ratio(((norm == self.gold) & norm_seen).sum(), norm_seen.sum())
            if seen.sum() and (norm_seen == seen).all() else float("nan"),
        }
        for name in self.tag_names:
            member = np.array([name in ts for ts in self.tags])
            out[f"accuracy/{name}"] = ratio((right & member).sum(), (seen & member).sum())
        out["n"] = float(seen.sum())
        return out

    @property
    def note(self) -> str | None:  # type: ignore[override]
        if self.last_norm is not None and (self.last_norm == MISSING).all() and self.last_predictions is not None \
                and (self.last_predictions != MISSING).any():
            return "accuracy_norm needs the model's log-likelihoods of every choice; a predictions file gives one choice"
        return None
