"""The metric of :mod:`negtrain.benchmarks.nannli` (its module docstring defines the metrics)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from negtrain.core import labels as nli
from negtrain.metrics.base import MISSING, ExampleMetric
from negtrain.metrics.f1 import class_f1, confusion_columns, confusion_from_totals, macro_prf, weighted_f1
from negtrain.metrics.uncertainty import Mean, UnitTable, unit_table


class NanNliMetric(ExampleMetric):
    """NaN-NLI's metrics (defined in :mod:`negtrain.benchmarks.nannli`). Gold labels are 3-way; predictions are ids in
    ``predicted_labels``: NLI3 (everything is scored) or NLI2 (the binary view only). The
    hypotheses of one premise are one independent unit for the bootstrap."""

    resampling_unit = "premise"

    def __init__(
        self,
        labels: Sequence[int],
        premises: Sequence[int],
        constructions: Sequence[str],
        operations: Sequence[Sequence[str]],
        predicted_labels: Sequence[str] = nli.NLI3,
        *,
        operation_names: Sequence[str],
        f1_order: Sequence[str],
        construction_order: Sequence[str] = (),
        quantification: Sequence[bool] | None = None,
        negation_types: Sequence[Sequence[str]] | None = None,
        negation_type_order: Sequence[str] = (),
        **kwargs,
    ) -> None:
        super().__init__(num_examples=len(labels), **kwargs)
        self.f1_order = tuple(f1_order)  # the order the paper's table lists the classes in
        self.gold = np.asarray(labels, dtype=np.int64)
        self.premises = np.asarray(premises, dtype=np.int64)
        self.constructions = np.array(constructions, dtype=object)
        # The paper's constructions first, in its table's order (those the data has), then the rest.
        present = list(dict.fromkeys(constructions))
        self.construction_order = [c for c in construction_order if c in present] + [c for c in present if c not in construction_order]
        # Table 10's NaN-Quant subset; Table 13's negation types (premise/<type>, hypothesis/<type>).
        self.quantification = np.asarray(quantification if quantification is not None else [False] * len(labels), dtype=bool)
        types = negation_types if negation_types is not None else [()] * len(labels)
        found = {t for ts in types for t in ts}
        self.type_names = [t for t in negation_type_order if t in found] + sorted(found - set(negation_type_order))
        self.type_members = {t: np.array([t in ts for ts in types], dtype=bool) for t in self.type_names}
        self.has_operation = {op: np.array([op in ops for ops in operations], dtype=bool) for op in operation_names}
        self.predicted_labels = tuple(predicted_labels)
        if self.predicted_labels not in (nli.NLI3, nli.NLI2):
            raise ValueError(f"NaN-NLI scores NLI3 or NLI2 predictions, not {self.predicted_labels}")
        self.three_way = self.predicted_labels == nli.NLI3
        if not self.three_way:
            self.note = (
                "2-way predictions: scored on the binary view only (contradiction and neutral "
                "merged); f1, strict and the error rates need 3-way predictions"
            )
        # Binary view of the gold labels: ids in NLI2.
        self.gold2 = np.array([nli.NLI2.index(nli.coarsen(nli.NLI3[g])) for g in self.gold], dtype=np.int64)
        self._to2 = np.array([nli.NLI2.index(nli.coarsen(x)) for x in self.predicted_labels], dtype=np.int64)

    def unit_table(self, predictions: np.ndarray) -> UnitTable:
        seen = predictions != MISSING
        safe = np.where(seen, predictions, 0)
        columns = {"seen": seen}
        if self.three_way:
            columns.update(confusion_columns(self.gold, safe, seen, len(nli.NLI3), "confusion3"))
        columns.update(confusion_columns(self.gold2, self._to2[safe], seen, len(nli.NLI2), "confusion2"))
        # Right by the rule of the headline: the 3-way label (F1), else the binary view (binary F1).
        columns["right"] = seen & ((safe == self.gold) if self.three_way else (self._to2[safe] == self.gold2))
        if self.three_way:
            correct = columns["right"]
            wrong = seen & ~correct
            for c in self.construction_order:
                member = self.constructions == c
                columns[f"seen/construction/{c}"] = seen & member
                columns[f"wrong/construction/{c}"] = wrong & member
            for op, member in self.has_operation.items():
                columns[f"seen/operation/{op}"] = seen & member
                columns[f"wrong/operation/{op}"] = wrong & member
            if self.quantification.any():
                columns.update(confusion_columns(self.gold, safe, seen & self.quantification, len(nli.NLI3), "quant"))
            for t, member in self.type_members.items():
                columns.update(confusion_columns(self.gold, safe, seen & member, len(nli.NLI3), f"types/{t}"))
        n = int(self.premises.max()) + 1 if self.premises.size else 0
        per_unit = None
        if self.three_way:
            # strict: over premises all of whose hypotheses have a prediction, the share all right.
            size = np.bincount(self.premises, minlength=n)
            n_seen = np.bincount(self.premises, weights=seen, minlength=n)
            n_right = np.bincount(self.premises, weights=correct, minlength=n)
            eligible = (size > 0) & (n_seen == size)
            per_unit = {"groups_scored": eligible, "groups_right": eligible & (n_right == size)}
        return unit_table(self.resampling_unit, self.premises, n, columns, per_unit)

    def from_totals(self, t: Mapping[str, np.ndarray]) -> dict[str, np.ndarray | Mean]:
        out: dict[str, np.ndarray | Mean] = {}
        if self.three_way:
            f1, support = class_f1(confusion_from_totals(t, len(nli.NLI3), "confusion3"))
            out["f1"] = weighted_f1(f1, support)
            for name in self.f1_order:
                out[f"f1/{name}"] = f1[..., nli.NLI3.index(name)]
        f1, support = class_f1(confusion_from_totals(t, len(nli.NLI2), "confusion2"))
        out["binary_f1"] = weighted_f1(f1, support)
        for i, name in enumerate(nli.NLI2):
            out[f"binary_f1/{name}"] = f1[..., i]
        if self.three_way:
            out["strict"] = Mean(t["groups_right"], t["groups_scored"])
            out["groups_scored"] = t["groups_scored"]
            for c in self.construction_order:
                out[f"error_rate/construction/{c}"] = Mean(t[f"wrong/construction/{c}"], t[f"seen/construction/{c}"])
            for op in self.has_operation:
                out[f"error_rate/operation/{op}"] = Mean(t[f"wrong/operation/{op}"], t[f"seen/operation/{op}"])
            if self.quantification.any():
                quant = confusion_from_totals(t, len(nli.NLI3), "quant")
                f1, _ = class_f1(quant)
                # Table 10's NaN-Quant "All" is the macro mean, not Table 6's support-weighted one:
                # its printed 0.486 is the macro mean of its 0.477, 0.600, 0.379 (0.4853), and the
                # weighted mean over 50, 47, 36 pairs is 0.494 (negtrain/evaluation/paper_tables.py).
                out["quant/macro_f1"] = macro_prf(quant)[2]
                for name in self.f1_order:
                    out[f"quant/f1/{name}"] = f1[..., nli.NLI3.index(name)]
            for name in self.type_names:
                precision, recall, f1 = macro_prf(confusion_from_totals(t, len(nli.NLI3), f"types/{name}"))
                out[f"macro_precision/{name}"], out[f"macro_recall/{name}"], out[f"macro_f1/{name}"] = precision, recall, f1
        out["n"] = t["seen"]
        return out
