"""BLiMP's scores (Warstadt et al. 2020): per file, the share of minimal pairs whose good sentence
the model gives the higher log-probability; per phenomenon, the mean of its files' shares.

A pair is a two-way multiple-choice question (choice 0 the good sentence, 1 the bad one), scored
by :class:`~negtrain.metrics.multiple_choice.MultipleChoiceMetric`'s rule (the higher summed
log-likelihood; a tie goes to the good sentence, as numpy's argmax in lm-evaluation-harness). Its
tags are each pair's file, so ``accuracy/<file>`` is lm-eval's ``acc`` of ``blimp_<file>`` with
lm-eval's ``acc_stderr``. ``accuracy`` is the unweighted mean over the files scored (the paper's
phenomenon score): with one file it is that file's accuracy; over several its stderr and ci95 come
from the bootstrap, which resamples pairs. lm-eval's ``acc_norm`` (per character) is not a BLiMP
score and is not reported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import numpy as np

from negtrain.metrics.multiple_choice import MultipleChoiceMetric
from negtrain.metrics.uncertainty import Mean, UnitTable


class BlimpMetric(MultipleChoiceMetric):
    resampling_unit = "pair"

    def unit_table(self, predictions: np.ndarray) -> UnitTable:
        return replace(super().unit_table(predictions), unit=self.resampling_unit)  # a pair, not a question

    def from_totals(self, totals: Mapping[str, np.ndarray]) -> dict[str, np.ndarray | Mean]:
        per_file = {name: Mean(totals[f"right/{name}"], totals[f"seen/{name}"]) for name in self.tag_names}
        out: dict[str, np.ndarray | Mean] = {}
        if len(per_file) == 1:
            out["accuracy"] = next(iter(per_file.values()))
        else:
            # The files' accuracies averaged, a file none of whose pairs was scored (or drawn) left out.
            values = np.stack([m.value for m in per_file.values()])
            with np.errstate(invalid="ignore"):
                scored = np.isfinite(values)
                out["accuracy"] = np.where(scored.any(axis=0), np.nansum(values, axis=0) / np.maximum(scored.sum(axis=0), 1), np.nan)
        for name, mean in per_file.items():
            out[f"accuracy/{name}"] = mean
        out["n"] = totals["seen"]
        return out

    @property
    def note(self) -> str | None:  # type: ignore[override]  # as the base's: a property over ExampleMetric's attribute
        """None: the base's note is about accuracy_norm, which BLiMP does not report."""
        return None
