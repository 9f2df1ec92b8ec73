"""Thunder-NUBench's scores: multiple-choice accuracy (lm-evaluation-harness's ``acc`` and
``acc_norm``, :class:`~negtrain.metrics.multiple_choice.MultipleChoiceMetric`), per local-negation
type, and the share of questions on which the model chose each distractor (by the ``acc`` rule):
``chosen/local_negation``, ``chosen/contradiction``, ``chosen/paraphrase``. Every question chooses
exactly one choice, so ``accuracy`` and the three shares sum to 1 over the questions scored. Each
share is a mean of per-question 0/1 outcomes (lm-eval's stderr); the question is the bootstrap's unit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import numpy as np

from negtrain.metrics.multiple_choice import ACC, MultipleChoiceMetric
from negtrain.metrics.uncertainty import Mean, UnitTable, unit_table


class NubenchMetric(MultipleChoiceMetric):
    def __init__(self, gold, tags, choice_chars, choice_types, **kwargs) -> None:
        super().__init__(gold, tags, choice_chars, **kwargs)
        #: What each choice index is (index 0 the right answer): the benchmark's names.
        self.choice_types = tuple(choice_types)

    def unit_table(self, predictions: np.ndarray) -> UnitTable:
        table = super().unit_table(predictions)
        acc = predictions[:, ACC]
        chosen = {f"chosen/{kind}": (acc == k) & (acc >= 0) for k, kind in enumerate(self.choice_types) if k > 0}
        extra = unit_table(table.unit, np.arange(self.num_examples), self.num_examples, chosen)
        return replace(table, columns=table.columns + extra.columns, values=np.concatenate([table.values, extra.values], axis=1))

    def from_totals(self, totals: Mapping[str, np.ndarray]) -> dict[str, np.ndarray | Mean]:
        out = super().from_totals(totals)
        for kind in self.choice_types[1:]:
            out[f"chosen/{kind}"] = Mean(totals[f"chosen/{kind}"], totals["seen"])
        return out
