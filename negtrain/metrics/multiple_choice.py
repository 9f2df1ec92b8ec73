"""Multiple-choice accuracy from log-likelihoods, as lm-evaluation-harness defines it.

For one question with choices c_1..c_k, ``ll_i`` is the summed log-likelihood of choice i's
continuation tokens given the prompt (:func:`negtrain.models.continuation.continuation_logprobs`).
lm-evaluation-harness (``ConfigurableTask.process_results``, ``output_type: multiple_choice``):

- ``acc``: 1 if ``argmax_i ll_i`` is the gold choice;
- ``acc_norm``: 1 if ``argmax_i ll_i / len(c_i)`` is the gold choice, where ``len(c_i)`` is the
  number of *characters* of the choice string as ``doc_to_choice`` returns it (without the
  target delimiter placed between prompt and choice).

Both break ties towards the lower index (numpy's argmax). Scores are averaged over questions.

Uncertainty: every metric is a mean over questions (the question is the resampled unit), with
lm-eval's ``mean_stderr`` and the percentile bootstrap of :mod:`negtrain.metrics.uncertainty`.

A model run hands the metric every choice's log-likelihood; its prediction lines carry them
(``loglikelihoods``) with the choices' lengths (``choice_chars``), so ``evaluate --predictions``
recomputes ``accuracy_norm`` from the file exactly as the run did.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch

from negtrain.metrics.base import MISSING, ExampleMetric
from negtrain.metrics.uncertainty import Mean, UnitTable, unit_table
from negtrain.metrics.torchmetrics_core import dim_zero_cat

ACC, NORM = 0, 1


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

    ``update`` takes per question one of:

    - the log-likelihood of every choice, as a float tensor (n, choices): a model run, or a
      predictions file that carries them; both choices follow from them (``choice_chars``: each
      question's choice lengths in characters);
    - the pair (acc choice, acc_norm choice) that :func:`choose` returns, as integers (n, 2);
    - the chosen index alone (a predictions file without log-likelihoods): then only
      ``accuracy`` is defined, and ``accuracy_norm`` is NaN with a note.
    """

    resampling_unit = "question"
    # States (see ExampleMetric.indices).
    norm_predictions: list[torch.Tensor]
    loglikelihoods: list[torch.Tensor]
    ll_indices: list[torch.Tensor]

    def __init__(self, gold: Sequence[int], tags: Sequence[Sequence[str]] = (),
                 choice_chars: Sequence[Sequence[int]] | None = None, **kwargs) -> None:
        super().__init__(num_examples=len(gold), **kwargs)
        self.gold = np.asarray(gold, dtype=np.int64)
        self.tags = [tuple(t) for t in tags] if tags else [() for _ in gold]
        self.tag_names = sorted({t for ts in self.tags for t in ts})
        self.chars: np.ndarray | None = None
        if choice_chars is not None:
            width = max((len(c) for c in choice_chars), default=1)
            self.chars = np.full((len(gold), width), np.nan)
            for i, c in enumerate(choice_chars):
                self.chars[i, : len(c)] = c
        self.add_state("norm_predictions", default=[], dist_reduce_fx="cat")
        self.add_state("loglikelihoods", default=[], dist_reduce_fx="cat")
        self.add_state("ll_indices", default=[], dist_reduce_fx="cat")
        #: Per question the choices' log-likelihoods of the last ``compute`` (NaN rows: none given).
        self.last_loglikelihoods: np.ndarray | None = None

    def update(self, indices: torch.Tensor, predictions: torch.Tensor) -> None:
        indices = indices.detach().to(torch.long).flatten()
        predictions = predictions.detach()
        if predictions.is_floating_point():
            assert self.chars is not None, "log-likelihoods are scored with the choices' lengths (choice_chars)"
            ll = predictions.to(torch.float64)
            chars = torch.as_tensor(self.chars[indices.cpu().numpy(), : ll.shape[1]], device=ll.device)
            chosen = choose(ll, chars)
            self.ll_indices.append(indices)
            self.loglikelihoods.append(ll)
        else:
            chosen = predictions.to(torch.long)
        if chosen.ndim == 2:
            super().update(indices, chosen[:, ACC])
            self.norm_predictions.append(chosen[:, NORM].flatten())
        else:
            super().update(indices, chosen)
            # No length-normalised choice: mark it MISSING for these rows.
            self.norm_predictions.append(torch.full_like(chosen.flatten(), MISSING))

    def compute(self) -> dict[str, torch.Tensor]:
        outcomes = np.full((self.num_examples, 2), MISSING, dtype=np.int64)
        width = self.chars.shape[1] if self.chars is not None else 2
        ll = np.full((self.num_examples, width), np.nan)
        if len(self.indices):
            idx = dim_zero_cat(self.indices).cpu().numpy()
            outcomes[idx, ACC] = dim_zero_cat(self.predictions).cpu().numpy()
            outcomes[idx, NORM] = dim_zero_cat(self.norm_predictions).cpu().numpy()
        if len(self.ll_indices):
            rows = dim_zero_cat(self.loglikelihoods).cpu().numpy()
            ll[dim_zero_cat(self.ll_indices).cpu().numpy(), : rows.shape[1]] = rows
        self.last_loglikelihoods = ll
        self.last_predictions = outcomes[:, ACC].copy()
        self.last_outcomes = outcomes
        return {k: torch.tensor(float(v), dtype=torch.float64) for k, v in self.score(outcomes).items()}

    def score(self, predictions: np.ndarray) -> dict[str, float]:
        if predictions.ndim == 1:  # the acc choice alone (e.g. to list the metric names)
            predictions = np.column_stack([predictions, np.full_like(predictions, MISSING)])
        return super().score(predictions)

    def unit_table(self, predictions: np.ndarray) -> UnitTable:
        acc, norm = predictions[:, ACC], predictions[:, NORM]
        seen, norm_seen = acc != MISSING, norm != MISSING
        columns = {
            "seen": seen, "right": (acc == self.gold) & seen,
            "norm_seen": norm_seen, "norm_right": (norm == self.gold) & norm_seen,
        }
        for name in self.tag_names:
            member = np.array([name in ts for ts in self.tags])
            columns[f"seen/{name}"] = seen & member
            columns[f"right/{name}"] = (acc == self.gold) & seen & member
        return unit_table("question", np.arange(self.num_examples), self.num_examples, columns)

    def from_totals(self, totals: Mapping[str, np.ndarray]) -> dict[str, np.ndarray | Mean]:
        seen, norm_seen = totals["seen"], totals["norm_seen"]
        # accuracy_norm only where every scored question has a normalised choice (a model run, or
        # a file with log-likelihoods), else NaN.
        complete = np.all((norm_seen == seen) & (seen > 0))
        out: dict[str, np.ndarray | Mean] = {
            "accuracy": Mean(totals["right"], seen),
            "accuracy_norm": Mean(totals["norm_right"], norm_seen) if complete else np.full(np.shape(seen), np.nan),
        }
        for name in self.tag_names:
            out[f"accuracy/{name}"] = Mean(totals[f"right/{name}"], totals[f"seen/{name}"])
        out["n"] = seen
        return out

    def prediction_fields(self) -> list[dict | None] | None:
        """Per question, what a predictions file needs to be re-scored exactly: each choice's
        log-likelihood and length in characters (None for a question without them)."""
        ll = self.last_loglikelihoods
        if ll is None or self.chars is None:
            return None
        out: list[dict | None] = []
        for row, chars in zip(ll, self.chars, strict=False):
            keep = ~np.isnan(chars)
            out.append(None if np.isnan(row[keep]).any() else
                       {"loglikelihoods": [float(x) for x in row[keep]], "choice_chars": [int(c) for c in chars[keep]]})
        return out

    @property
    def note(self) -> str | None:  # type: ignore[override]  # the base's note is an attribute; this metric's is read from its outcomes
        outcomes = self.last_outcomes
        if outcomes is not None and (outcomes[:, NORM] == MISSING).all() and (outcomes[:, ACC] != MISSING).any():
            return "accuracy_norm needs the model's log-likelihoods of every choice (\"loglikelihoods\" on each line); this file gives one choice"
        return None
