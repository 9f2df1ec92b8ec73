"""NaN-NLI (Truong et al. 2022): sub-clausal negation, 258 three-way pairs over 48 premises.

One file, ``data/nan.csv``, one split, ``test``; ids are ``nannli/test/<row>`` (0-based data row).
Each example's subset is its ``Construction``; its group is its premise (hypotheses of one premise
are consecutive rows). The operation columns (``Negator position change``, ...) hold how often the
hypothesis applies that edit to the premise (0, 1 or 2); an example "has" an operation when it is
above 0.

Metrics (:class:`NanNliMetric`), following the paper:

- Table 6: ``f1/entailment``, ``f1/contradiction``, ``f1/neutral`` and ``f1``, their
  support-weighted mean (the "All" row; scikit-learn's weighted average, as the authors'
  ``nli_infer.py`` reports); ``binary_f1/entailment``, ``binary_f1/not_entailment`` and
  ``binary_f1`` on the binary view, where contradiction and neutral are merged in both the gold
  labels and the predictions; ``strict``, the fraction of premises whose hypotheses are all right.
- Tables 8 and 9: ``error_rate/construction/<Construction>`` and ``error_rate/operation/<column>``,
  the fraction of wrong predictions among the examples with that construction / operation
  (lower is better).

Three-way predictions get all of these. Two-way predictions (a model with an entailment /
not_entailment head) get the binary view only, and the metric's note says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from negtrain import labels as nli
from negtrain.benchmarks.base import Benchmark, Example, local, read_csv
from negtrain.benchmarks.files import RemoteFile
from negtrain.metrics.base import MISSING, ExampleMetric
from negtrain.metrics.f1 import class_f1, confusion_columns, confusion_from_totals, weighted_f1
from negtrain.metrics.uncertainty import Mean, UnitTable, unit_table

REPO = "joey234/nan-nli"
#: The annotation columns that record the operations turning the premise into the hypothesis.
OPERATIONS = (
    "Indefinite quantifier change",
    "Negator addition or deletion",
    "Negator position change",
    "Clause or sub-clause deletion",
    "Negator token change",
    "Comparative quantifier change",
    "Focus particle change",
    "Lexical change",
    "Numerical quantifier change",
    "Syntactical changes",
    "Quantification",
)
#: Table 6 reports the classes in this order.
F1_ORDER = ("entailment", "contradiction", "neutral")



class NanNliMetric(ExampleMetric):
    """NaN-NLI's metrics (see the module docstring). Gold labels are 3-way; predictions are ids in
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
        **kwargs,
    ) -> None:
        super().__init__(num_examples=len(labels), **kwargs)
        self.gold = np.asarray(labels, dtype=np.int64)
        self.premises = np.asarray(premises, dtype=np.int64)
        self.constructions = np.array(constructions, dtype=object)
        self.construction_order = list(dict.fromkeys(constructions))
        self.has_operation = {op: np.array([op in ops for ops in operations], dtype=bool) for op in OPERATIONS}
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

    @classmethod
    def is_higher_better(cls, name: str) -> bool:
        return not name.startswith("error_rate/")

    def unit_table(self, predictions: np.ndarray) -> UnitTable:
        seen = predictions != MISSING
        safe = np.where(seen, predictions, 0)
        columns = {"seen": seen}
        if self.three_way:
            columns.update(confusion_columns(self.gold, safe, seen, len(nli.NLI3), "confusion3"))
        columns.update(confusion_columns(self.gold2, self._to2[safe], seen, len(nli.NLI2), "confusion2"))
        if self.three_way:
            correct = seen & (predictions == self.gold)
            wrong = seen & ~correct
            for c in self.construction_order:
                member = self.constructions == c
                columns[f"seen/construction/{c}"] = seen & member
                columns[f"wrong/construction/{c}"] = wrong & member
            for op, member in self.has_operation.items():
                columns[f"seen/operation/{op}"] = seen & member
                columns[f"wrong/operation/{op}"] = wrong & member
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
            for name in F1_ORDER:
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
        out["n"] = t["seen"]
        return out


class NanNli(Benchmark):
    name = "nannli"
    splits = ("test",)
    labels = nli.NLI3
    prediction_spaces = (nli.NLI3, nli.NLI2)
    reported_metrics = (
        "f1",
        *(f"f1/{c}" for c in F1_ORDER),
        "binary_f1",
        *(f"binary_f1/{c}" for c in nli.NLI2),
        "strict",
        "groups_scored",
        "error_rate/construction/<Construction>",
        *(f"error_rate/operation/{op}" for op in OPERATIONS),
        "n",
    )
    citation = (
        "Truong, Baldwin, Verspoor, Cohn (2022). Not another Negation Benchmark: The NaN-NLI Test "
        "Suite for Sub-clausal Negation. AACL-IJCNLP 2022."
    )

    def files(self, split: str) -> list[RemoteFile]:
        return [RemoteFile(REPO, "data/nan.csv")]

    def read(self, split: str) -> list[Example]:
        examples = []
        premises: dict[str, int] = {}
        last = None
        for row in read_csv(local(self.files(split)[0]), required=("premise", "hypothesis", "label", "Construction", *OPERATIONS)):
            raw = row.get("label")
            label = nli.normalize(raw)
            if label not in self.labels:
                raise row.error("label", f"label '{raw}' is not in {self.name}'s label set {list(self.labels)}")
            premise = row.get("premise")
            if premise != last and premise in premises:
                raise row.error("premise", "the hypotheses of one premise must be consecutive rows")
            last = premise
            premises.setdefault(premise, len(premises))
            ops = []
            for op in OPERATIONS:
                try:
                    count = float(row.get(op))
                except ValueError:
                    raise row.error(op, f"expected a count, got {row.fields[op]!r}") from None
                if count > 0:
                    ops.append(op)
            examples.append(
                Example(
                    id=f"nannli/{split}/{row.index}",
                    inputs=(premise, row.get("hypothesis")),
                    label=label,
                    subset=row.get("Construction").strip(),
                    group=f"nannli/{split}/premise/{premises[premise]}",
                    meta={"operations": tuple(ops), "construction_subtype": row.fields.get("Construction Subtype")},
                )
            )
        return examples

    def metric(self, examples: Sequence[Example], predicted_labels: Sequence[str] = nli.NLI3) -> NanNliMetric:
        groups = {g: i for i, g in enumerate(dict.fromkeys(e.group for e in examples))}
        return NanNliMetric(
            labels=[self.labels.index(e.label) for e in examples],
            premises=[groups[e.group] for e in examples],
            constructions=[e.subset for e in examples],
            operations=[e.meta["operations"] for e in examples],
            predicted_labels=predicted_labels,
        )
