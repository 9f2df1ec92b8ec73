"""The metric of :mod:`negtrain.benchmarks.negated_probes` (negated LAMA)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from negtrain.metrics.base import MISSING, ExampleMetric
from negtrain.metrics.uncertainty import Mean, UnitTable, unit_table


class ProbeMetric(ExampleMetric):
    """``negated_top1_error``, ``affirmative_top1_accuracy`` and their counts (directions: the benchmark's declaration).

    Predictions are ids into a token space; ``gold`` holds each example's ``obj_label`` id in that
    space, or -2 when the space cannot express it (then no prediction is right).
    """

    def __init__(self, gold: Sequence[int], negated: Sequence[bool], note: str | None = None,
                 groups: Sequence[str | None] | None = None, **kwargs) -> None:
        super().__init__(num_examples=len(gold), **kwargs)
        self.gold = np.asarray(gold, dtype=np.int64)
        self.negated = np.asarray(negated, dtype=bool)  # per example: the negated form of its probe
        self.note = note
        # The affirmative and negated sentence of a probe are one unit; without groups, examples.
        names = list(dict.fromkeys(groups)) if groups is not None else None
        lookup = {g: i for i, g in enumerate(names)} if names is not None else None
        self.unit_codes = np.array([lookup[g] for g in groups], dtype=np.int64) if groups is not None and lookup is not None else np.arange(len(gold))
        self.n_units = len(names) if names is not None else len(gold)
        self.resampling_unit = "probe" if groups is not None else "example"

    def unit_table(self, predictions: np.ndarray) -> UnitTable:
        seen = predictions != MISSING
        hit = (predictions == self.gold) & seen
        neg, aff = seen & self.negated, seen & ~self.negated
        columns = {"seen_negated": neg, "hit_negated": hit & neg, "seen_affirmative": aff, "hit_affirmative": hit & aff}
        return unit_table(self.resampling_unit, self.unit_codes, self.n_units, columns)

    def from_totals(self, t: Mapping[str, np.ndarray]) -> dict[str, np.ndarray | Mean]:
        return {
            "negated_top1_error": Mean(t["hit_negated"], t["seen_negated"]),
            "affirmative_top1_accuracy": Mean(t["hit_affirmative"], t["seen_affirmative"]),
            "n_negated": t["seen_negated"],
            "n_affirmative": t["seen_affirmative"],
        }
