"""The metric of :mod:`negtrain.benchmarks.condaqa`."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from negtrain.metrics.base import MISSING, ExampleMetric, ratio


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
        for i, (g, e) in enumerate(zip(self.group_codes, self.edits)):
            self.members[g, e] = i
            count[g, e] += 1
        self.complete = (count == 1).all(axis=1)

    def score(self, predictions: np.ndarray) -> dict[str, float]:
        seen = predictions != MISSING
        right = (predictions == 1) & seen
        out = {"accuracy": ratio(right.sum(), seen.sum())}
        for e, name in enumerate(self.edit_names):
            member = self.edits == e
            out[f"accuracy/{name}"] = ratio((right & member).sum(), (seen & member).sum())
        full = self.members[self.complete]
        scored = full[seen[full].all(axis=1)]
        ok = right[scored]  # (groups, 4)
        out["consistency"] = ratio(ok.all(axis=1).sum(), len(scored))
        for e, name in enumerate(self.edit_names[1:], start=1):
            out[f"consistency/{name}"] = ratio((ok[:, 0] & ok[:, e]).sum(), len(scored))
        out["groups_scored"] = float(len(scored))
        out["n"] = float(seen.sum())
        return out
