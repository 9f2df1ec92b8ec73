"""Accuracy overall, per subset, and contrast-set consistency."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from negtrain.metrics.base import MISSING, ExampleMetric
from negtrain.metrics.uncertainty import Mean, UnitTable, unit_table


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

    The bootstrap resamples groups (``resampling_unit``, named by each benchmark's subclass) and
    every ungrouped example on its own; without groups, examples.
    """

    resampling_unit = "group"
    #: Per example, the index of its subset / group in sorted order (-1: none); None: no subsets / groups.
    subset_codes: np.ndarray | None
    group_codes: np.ndarray | None

    def __init__(
        self,
        labels: Sequence[int] | np.ndarray,
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
        tags = np.array([x if x is not None else "" for x in subsets], dtype=object) if subsets is not None else None
        self.subset_members = {name: tags == name for name in self.subset_names}
        self.group_codes, _ = _codes(groups) if groups is not None else (None, [])
        self.group_size = group_size

    def _units(self) -> tuple[np.ndarray, int, int]:
        """Each example's unit: its group, or itself when it has none. (codes, units, groups)."""
        n = len(self.gold)
        if self.group_codes is None:
            return np.arange(n, dtype=np.int64), n, 0
        n_groups = int(self.group_codes.max()) + 1 if n and self.group_codes.max() >= 0 else 0
        alone = self.group_codes < 0
        codes = self.group_codes.copy()
        codes[alone] = n_groups + np.arange(int(alone.sum()))
        return codes, n_groups + int(alone.sum()), n_groups

    def unit_table(self, predictions: np.ndarray) -> UnitTable:
        seen = predictions != MISSING
        correct = (predictions == self.gold) & seen
        columns = {"seen": seen, "right": correct}
        for name, member in self.subset_members.items():
            columns[f"seen/{name}"] = seen & member
            columns[f"right/{name}"] = correct & member
        codes, n_units, n_groups = self._units()
        per_unit = None
        if self.group_codes is not None:
            # A unit that is a group is scored for consistency when all its members were predicted
            # (and, with group_size, it has that many members); ungrouped examples never are.
            size = np.bincount(codes, minlength=n_units)
            n_seen = np.bincount(codes, weights=seen, minlength=n_units)
            n_right = np.bincount(codes, weights=correct, minlength=n_units)
            eligible = (np.arange(n_units) < n_groups) & (n_seen == size)
            if self.group_size is not None:
                eligible &= size == self.group_size
            per_unit = {"groups_scored": eligible, "groups_right": eligible & (n_right == size)}
        unit = self.resampling_unit if self.group_codes is not None else "example"
        return unit_table(unit, codes, n_units, columns, per_unit)

    def from_totals(self, t: Mapping[str, np.ndarray]) -> dict[str, np.ndarray | Mean]:
        out: dict[str, np.ndarray | Mean] = {"accuracy": Mean(t["right"], t["seen"])}
        for name in self.subset_names:
            out[f"accuracy/{name}"] = Mean(t[f"right/{name}"], t[f"seen/{name}"])
        if self.group_codes is not None:
            out["consistency"] = Mean(t["groups_right"], t["groups_scored"])
            out["groups_scored"] = t["groups_scored"]
        out["n"] = t["seen"]
        return out
