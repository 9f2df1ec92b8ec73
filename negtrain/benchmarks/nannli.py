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

from collections.abc import Sequence
from typing import TYPE_CHECKING

from negtrain import labels as nli
from negtrain.benchmarks.base import NliBenchmark, Example, local, read_csv
from negtrain.benchmarks.files import RemoteFile
from negtrain.metrics.declared import count, score, scores

if TYPE_CHECKING:
    from negtrain.metrics.nannli import NanNliMetric

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


class NanNli(NliBenchmark):
    name = "nannli"
    splits = ("test",)
    labels = nli.NLI3
    prediction_spaces = (nli.NLI3, nli.NLI2)
    # 2-way predictions are scored on the binary view only: the rest needs 3-way predictions.
    reported_metrics = (
        *scores(["f1", *(f"f1/{c}" for c in F1_ORDER)], space=nli.NLI3),
        *scores(["binary_f1", *(f"binary_f1/{c}" for c in nli.NLI2)]),
        score("strict", space=nli.NLI3),
        count("groups_scored", space=nli.NLI3),
        score("error_rate/construction/<Construction>", lower_is_better=True, space=nli.NLI3),
        *(score(f"error_rate/operation/{op}", lower_is_better=True, space=nli.NLI3) for op in OPERATIONS),
        count("n"),
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
        from negtrain.metrics.nannli import NanNliMetric  # torch: imported when scoring, not when listing

        return NanNliMetric(
            labels=[self.labels.index(e.label) for e in examples],
            premises=[groups[e.group] for e in examples],
            constructions=[e.subset for e in examples],
            operations=[e.meta["operations"] for e in examples],
            predicted_labels=predicted_labels,
            operation_names=OPERATIONS,
            f1_order=F1_ORDER,
        )
