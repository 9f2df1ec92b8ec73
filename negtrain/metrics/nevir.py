"""NevIR's paired accuracy (Weller et al. 2024; the authors' ``src/negations/evaluate.py``): for
each query, right when its own document is ranked strictly first; a pair of queries is right when
both are (the authors' ``score == 1.0``). ``paired_accuracy`` is the share of pairs right among the
pairs whose two queries were both scored; ``query_accuracy`` the share of queries right; ``pairs``
and ``n`` count them. Both are means of 0/1 outcomes (lm-eval's stderr); the pair is the unit the
bootstrap resamples, so a pair's two queries are drawn together.

The choice of a query is made by :class:`~negtrain.metrics.multiple_choice.MultipleChoiceMetric`'s
rule from the two log-likelihoods (its other document first, so a tie goes to it: wrong).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from negtrain.metrics.base import MISSING
from negtrain.metrics.multiple_choice import ACC, MultipleChoiceMetric
from negtrain.metrics.uncertainty import Mean, UnitTable, unit_table


class NevirMetric(MultipleChoiceMetric):
    resampling_unit = "pair"

    def __init__(self, gold: Sequence[int], pairs: Sequence[str], choice_chars: Sequence[Sequence[int]], **kwargs) -> None:
        super().__init__(gold, (), choice_chars, **kwargs)
        names = list(dict.fromkeys(pairs))
        self.pair_of = np.array([names.index(p) for p in pairs], dtype=np.int64) if pairs else np.zeros(0, dtype=np.int64)
        self.n_pairs = len(names)

    def unit_table(self, predictions: np.ndarray) -> UnitTable:
        acc = predictions[:, ACC] if predictions.ndim == 2 else predictions
        seen = acc != MISSING
        right = (acc == self.gold) & seen
        members = np.bincount(self.pair_of, minlength=self.n_pairs)
        scored = np.bincount(self.pair_of, weights=seen, minlength=self.n_pairs) == members
        all_right = np.bincount(self.pair_of, weights=right, minlength=self.n_pairs) == members
        return unit_table("pair", self.pair_of, self.n_pairs, {"seen": seen, "right": right},
                          {"pairs_scored": scored, "pairs_right": scored & all_right})

    def from_totals(self, totals: Mapping[str, np.ndarray]) -> dict[str, np.ndarray | Mean]:
        return {
            "paired_accuracy": Mean(totals["pairs_right"], totals["pairs_scored"]),
            "query_accuracy": Mean(totals["right"], totals["seen"]),
            "pairs": totals["pairs_scored"],
            "n": totals["seen"],
        }

    @property
    def note(self) -> str | None:  # type: ignore[override]  # as the base's: a property over ExampleMetric's attribute
        """None: the base's note is about accuracy_norm, which NevIR does not report."""
        return None
