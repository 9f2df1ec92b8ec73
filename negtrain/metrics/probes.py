"""The metric of :mod:`negtrain.benchmarks.negated_probes` (negated LAMA)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from negtrain.metrics.base import MISSING, ExampleMetric, ratio


class ProbeMetric(ExampleMetric):
    """``negated_top1_error``, ``affirmative_top1_accuracy`` and their counts (directions: the benchmark's declaration).

    Predictions are ids into a token space; ``gold`` holds each example's ``obj_label`` id in that
    space, or -2 when the space cannot express it (then no prediction is right).
    """

    def __init__(self, gold: Sequence[int], negated: Sequence[bool], note: str | None = None, **kwargs) -> None:
        super().__init__(num_examples=len(gold), **kwargs)
        self.gold = np.asarray(gold, dtype=np.int64)
        self.negated = np.asarray(negated, dtype=bool)  # per example: the negated form of its probe
        self.note = note

    def score(self, predictions: np.ndarray) -> dict[str, float]:
        seen = predictions != MISSING
        hit = (predictions == self.gold) & seen
        neg, aff = seen & self.negated, seen & ~self.negated
        return {
            "negated_top1_error": ratio(hit[neg].sum(), neg.sum()),
            "affirmative_top1_accuracy": ratio(hit[aff].sum(), aff.sum()),
            "n_negated": float(neg.sum()),
            "n_affirmative": float(aff.sum()),
        }
