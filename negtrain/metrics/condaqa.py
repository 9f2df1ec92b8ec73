"""The metric of :mod:`negtrain.benchmarks.condaqa`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from negtrain.metrics.base import MISSING, ExampleMetric
from negtrain.metrics.uncertainty import Mean, UnitTable, unit_table


class CondaqaMetric(ExampleMetric):
    """CondaQA's metrics (Ravichander et al. 2022, section 5), on per-example correctness.

    Each prediction is 1 (the generated answer equals the gold answer after lower-casing and
    stripping) or 0; MISSING where no prediction was made.

    - ``accuracy``: right / predicted.
    - ``accuracy/<edit>`` for ``original``, ``paraphrase``, ``scope``, ``affirmative``.
    - A question group is the (PassageID, QuestionID) pair. It is *complete* when the data holds
      exactly one example for each of the four passage versions (edits 0-3). Only complete groups
      all of whose four examples were predicted are scored; ``groups_scored`` says how many
      (the paper's test set has 1,402 complete groups).
    - ``consistency``: the fraction of scored groups whose four answers are all right.
    - ``consistency/<edit>`` for paraphrase, scope and affirmative: the fraction of scored groups
      where the answer on the original passage *and* the answer on that edit are both right.
    """

    #: The bootstrap resamples question groups: the four passage versions of a question together.
    resampling_unit = "question group"

    def __init__(self, edits: Sequence[int], groups: Sequence[str], edit_names: Sequence[str], **kwargs) -> None:
        super().__init__(num_examples=len(edits), **kwargs)
        self.edit_names = tuple(edit_names)  # by PassageEditID; the first is the original passage
        self.edits = np.asarray(edits, dtype=np.int64)
        names = sorted(set(groups))
        lookup = {g: i for i, g in enumerate(names)}
        self.group_codes = np.array([lookup[g] for g in groups], dtype=np.int64)
        n_groups = len(names)
        # members[g, e] = example index of edit e in group g, or -1; complete = all four present once.
        self.members = np.full((n_groups, len(self.edit_names)), -1, dtype=np.int64)
        count = np.zeros((n_groups, len(self.edit_names)), dtype=np.int64)
        for i, (g, e) in enumerate(zip(self.group_codes, self.edits, strict=False)):
            self.members[g, e] = i
            count[g, e] += 1
        self.complete = (count == 1).all(axis=1)

    def unit_table(self, predictions: np.ndarray) -> UnitTable:
        seen = predictions != MISSING
        right = (predictions == 1) & seen
        columns = {"seen": seen, "right": right}
        for e, name in enumerate(self.edit_names):
            member = self.edits == e
            columns[f"seen/{name}"] = seen & member
            columns[f"right/{name}"] = right & member
        n_groups = len(self.members)
        # A group is scored when it is complete and all four versions were predicted.
        members = np.where(self.complete[:, None], self.members, 0)
        scored = self.complete & seen[members].all(axis=1)
        ok = right[members] & scored[:, None]  # (groups, 4)
        per_unit = {"groups_scored": scored, "groups_right": ok.all(axis=1)}
        for e, name in enumerate(self.edit_names[1:], start=1):
            per_unit[f"groups_right/{name}"] = ok[:, 0] & ok[:, e]
        return unit_table(self.resampling_unit, self.group_codes, n_groups, columns, per_unit)

    def from_totals(self, t: Mapping[str, np.ndarray]) -> dict[str, np.ndarray | Mean]:
        out: dict[str, np.ndarray | Mean] = {"accuracy": Mean(t["right"], t["seen"])}
        for name in self.edit_names:
            out[f"accuracy/{name}"] = Mean(t[f"right/{name}"], t[f"seen/{name}"])
        out["consistency"] = Mean(t["groups_right"], t["groups_scored"])
        for name in self.edit_names[1:]:
            out[f"consistency/{name}"] = Mean(t[f"groups_right/{name}"], t["groups_scored"])
        out["groups_scored"] = t["groups_scored"]
        out["n"] = t["seen"]
        return out
