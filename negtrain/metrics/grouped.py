"""Accuracy overall, per subset, and contrast-set consistency."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from negtrain.metrics.base import MISSING, ExampleMetric, ratio


def _codes(values: Sequence[str | None]) -> tuple[np.ndarray, list[str]]:
    names = sorted({v for v in values if v is not None})
    lookup = {n: i for i, n in enumerate(names)}
    return np.array([lookup[v] if v is not None else -1 for v in values], dtype=np.int64), names


class GroupedAccuracy(ExampleMetric):
    """``accuracy``, ``accuracy/<subset>`` and ``consistency``.

    - ``accuracy``: correct / predicted, over the examples that received a prediction.
    - ``accuracy/<subset>``: the same within each subset (e.g. ScoNe condition, NegNLI pair type).
    - ``consistency``: over the groups (contrast sets) *all* of whose members received a
      prediction, the fraction with every member right. A group with a missing member is left
      out, not counted wrong; ``groups_scored`` reports how many groups were scored.
      With ``group_size`` set, groups with a different number of members in the data are left
      out too (e.g. CondaQA counts only questions with all four passage edits).
    - ``n``: how many examples were scored.
    """

    def __init__(
        self,
        labels: Sequence[int],
        subsets: Sequence[str | None] | None = None,
        groups: Sequence[str | None] | None = None,
        group_size: int | None = None,
        subset_order: Sequence[str] | None = None,
        **kwargs,
    ) -> None:
        super().__init__(num_examples=len(labels), **kwargs)
        self.gold = np.asarray(labels, dtype=np.int64)
        self.subset_codes, self.subset_names = _codes(subsets) if subsets is not None else (None, [])
        if subset_order is not None:
            # Keep the paper's order in reports rather than alphabetical order.
            self.subset_names = [s for s in subset_order if s in self.subset_names]
        self.subsets = list(subsets) if subsets is not None else None
        self.group_codes, _ = _codes(groups) if groups is not None else (None, [])
        self.group_size = group_size

    def score(self, predictions: np.ndarray) -> dict[str, float]:
        seen = predictions != MISSING
        correct = (predictions == self.gold) & seen
        out: dict[str, float] = {"accuracy": ratio(correct.sum(), seen.sum())}
        if self.subsets is not None:
            subsets = np.array([s if s is not None else "" for s in self.subsets], dtype=object)
            for name in self.subset_names:
                member = subsets == name
                out[f"accuracy/{name}"] = ratio((correct & member).sum(), (seen & member).sum())
        if self.group_codes is not None:
            out.update(self._consistency(seen, correct))
        out["n"] = float(seen.sum())
        return out

    def _consistency(self, seen: np.ndarray, correct: np.ndarray) -> dict[str, float]:
        in_group = self.group_codes >= 0
        codes = self.group_codes[in_group]
        n_groups = int(codes.max()) + 1 if codes.size else 0
        size = np.bincount(codes, minlength=n_groups)
        n_seen = np.bincount(codes, weights=seen[in_group], minlength=n_groups)
        n_right = np.bincount(codes, weights=correct[in_group], minlength=n_groups)
        eligible = n_seen == size
        if self.group_size is not None:
            eligible &= size == self.group_size
        all_right = eligible & (n_right == size)
        return {"consistency": ratio(all_right.sum(), eligible.sum()), "groups_scored": float(eligible.sum())}
