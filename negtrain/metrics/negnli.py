"""The metric of :mod:`negtrain.benchmarks.negnli` (its class docstring says what it reports)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from negtrain.metrics.base import MISSING
from negtrain.metrics.grouped import GroupedAccuracy
from negtrain.metrics.uncertainty import Mean, UnitTable, unit_table


class NegnliMetric(GroupedAccuracy):
    """NegNLI: ``accuracy``, ``accuracy/<pair type>`` for Tneg-H, T-Hneg and Tneg-Hneg (the paper's
    tables), and ``consistency``: the fraction of groups whose three rows are all right. The three
    rewrites of one original pair are one independent unit for the bootstrap.

    ``majority_baseline`` and ``majority_baseline/<pair type>``: Table 7's MB column, the accuracy
    of always answering the most frequent gold label of the scored examples (of that pair type:
    each column its own majority, as the paper's numbers are; e.g. SNLI's T-Hneg 41.0 is its
    contradictions, where neutral is the majority overall). Computed from the gold labels, not
    from the model; it sits beside the model's accuracy on the same examples."""

    resampling_unit = "original pair"

    def unit_table(self, predictions: np.ndarray) -> UnitTable:
        table = super().unit_table(predictions)
        seen = predictions != MISSING
        classes = range(int(self.gold.max()) + 1 if self.gold.size else 0)
        columns = {f"gold/{c}": seen & (self.gold == c) for c in classes}
        for name, member in self.subset_members.items():
            columns.update({f"gold/{name}/{c}": seen & member & (self.gold == c) for c in classes})
        codes, n_units, _ = self._units()
        extra = unit_table(table.unit, codes, n_units, columns)
        return UnitTable(table.unit, table.columns + extra.columns, np.hstack([table.values, extra.values]),
                         codes=table.codes, seen=table.seen, right=table.right)  # the viewer's right/wrong

    def from_totals(self, t: Mapping[str, np.ndarray]) -> dict[str, np.ndarray | Mean]:
        out = super().from_totals(t)
        classes = [k for k in t if k.startswith("gold/") and k.count("/") == 1]
        if classes:
            out["majority_baseline"] = Mean(np.maximum.reduce([t[k] for k in classes]), t["seen"])
            for name in self.subset_names:
                counts = [t[f"gold/{name}/{k.split('/')[1]}"] for k in classes]
                out[f"majority_baseline/{name}"] = Mean(np.maximum.reduce(counts), t[f"seen/{name}"])
        return out
