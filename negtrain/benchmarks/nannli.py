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
- Table 8: ``error_rate/construction/<construction>``, the fraction of wrong predictions among the
  examples of that construction (lower is better), over the paper's nine constructions: the file's
  13 ``Construction`` values merged as :data:`TABLE_8` says (its "not + affixially-negated
  adjective/adverb" is the file's adjective and adverb rows, 14 + 12 = 26, and 11 of 26 is the
  printed 0.423; "Absolute and approximate negator" the file's absolute and approximate negators).
  The file's "not + auxillary" (9 rows) and "verbal vs affixal negation" (2) are none of the
  paper's nine (§3.2.1): they keep their own names, after the nine.
- Table 9: ``error_rate/operation/<operation>`` over the ten operations, named and ordered as
  Table 9 (the column ``Syntactical changes`` is its "Syntactic change"). An operation's rows
  are those whose cell is exactly 1, the hypotheses that apply that edit once: the six rows with
  two negator additions or deletions are left out of that operation, so its denominator is 118,
  not 124, as the paper's counts must be (its 0.364 is 43/118; no k/124 or k/130 rounds to it;
  every other operation's cells are 0 or 1, so the rule changes nothing else). The column
  ``Quantification`` is not an operation: it marks the pairs where negation interplays with
  quantification (§5.2, 133 pairs), the NaN-Quant subset.
- Table 10: ``quant/f1/<class>`` and ``quant/macro_f1``, the Standard F1 on NaN-Quant per class
  and their unweighted (macro) mean. The paper's "All" is support-weighted in Table 6 and macro
  in Table 10's NaN-Quant column, as its printed numbers show (each fits only that definition,
  from the table's own per-class cells and supports: :mod:`negtrain.evaluation.paper_tables`);
  Table 10's NaN-NLI column is Table 6's ``f1``.
- Table 13: ``macro_precision``, ``macro_recall`` and ``macro_f1`` ``/premise/<type>`` and
  ``/hypothesis/<type>``: scikit-learn's macro averages (over the classes in the subset's gold
  labels or predictions) on the examples whose premise / hypothesis has that negation type
  (``P-<type>`` / ``H-<type>`` is 1); ``hypothesis/None``: hypotheses with no negation (their
  ``H-`` columns are empty).

Three-way predictions get all of these. Two-way predictions (a model with an entailment /
not_entailment head) get the binary view only, and the metric's note says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

from negtrain.core import labels as nli
from negtrain.benchmarks.base import NliBenchmark, Example
from negtrain.benchmarks.rows import local, read_csv
from negtrain.benchmarks.files import RemoteFile
from negtrain.metrics.declared import count, score, scores

if TYPE_CHECKING:
    from negtrain.metrics.nannli import NanNliMetric

REPO = "joey234/nan-nli"
#: The annotation columns that record the operations turning the premise into the hypothesis,
#: and the name Table 9 gives each, in Table 9's order.
OPERATIONS = {
    "Indefinite quantifier change": "Indefinite quantifier change",
    "Numerical quantifier change": "Numerical quantifier change",
    "Comparative quantifier change": "Comparative quantifier change",
    "Negator addition or deletion": "Negator addition or deletion",
    "Negator position change": "Negator position change",
    "Negator token change": "Negator token change",
    "Clause or sub-clause deletion": "Clause or sub-clause deletion",
    "Focus particle change": "Focus particle change",
    "Lexical change": "Lexical change",
    "Syntactical changes": "Syntactic change",
}
#: Not an operation: the column marking the NaN-Quant subset (§5.2, Table 10).
QUANTIFICATION = "Quantification"
#: The file's constructions -> Table 8's nine, which the table lists in this order.
TABLE_8 = {
    "not + quantifier": "not + quantifier",
    "not + focus particle": "not + focus particle",
    "not + degree expression": "not + degree expression",
    "not + affixially negated gradable adjective": "not + affixially-negated adjective/adverb",
    "not + affixially negated adverb": "not + affixially-negated adjective/adverb",
    "not + pp": "not + PP",
    "absolute negator": "Absolute and approximate negator",
    "approximate negator": "Absolute and approximate negator",
    "not in verbless clause": "not in verbless clause",
    "not in coordination": "not in coordination",
    "not in implicit proposition": "not in implicit proposition",
}
#: Table 13's negation types (the file's P-<type> and H-<type> columns).
NEGATION_TYPES = ("Verbal", "Non-verbal", "Analytic", "Synthetic", "Clausal", "Sub-clausal")
#: Table 6 (and Table 10) list the classes in this order: Contradiction, Entailment, Neutral.
F1_ORDER = ("contradiction", "entailment", "neutral")


def _flag(value: str | None) -> bool:
    """An annotation cell: "1", "1.0", "2" set; "0", "0.0" or empty unset."""
    try:
        return float(value or 0) > 0
    except ValueError:
        return False


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
        *(score(f"error_rate/operation/{op}", lower_is_better=True, space=nli.NLI3) for op in OPERATIONS.values()),
        *scores(["quant/macro_f1", *(f"quant/f1/{c}" for c in F1_ORDER)], space=nli.NLI3),
        *(score(f"{m}/<premise or hypothesis>/<negation type>", space=nli.NLI3) for m in ("macro_precision", "macro_recall", "macro_f1")),
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
        for row in read_csv(local(self.files(split)[0]), required=("premise", "hypothesis", "label", "Construction", *OPERATIONS, QUANTIFICATION)):
            raw = row.get("label")
            label = nli.normalize(raw)
            if label not in self.labels:
                raise row.error("label", f"label '{raw}' is not in {self.name}'s label set {list(self.labels)}")
            premise = row.get("premise")
            if premise != last and premise in premises:
                raise row.error("premise", "the hypotheses of one premise must be consecutive rows")
            last = premise
            premises.setdefault(premise, len(premises))
            ops, quantification, repeated = [], False, []
            for op in (*OPERATIONS, QUANTIFICATION):
                try:
                    count = float(row.get(op))
                except ValueError:
                    raise row.error(op, f"expected a count, got {row.fields[op]!r}") from None
                if count > 0 and op == QUANTIFICATION:
                    quantification = True
                elif count == 1:
                    ops.append(OPERATIONS[op])
                elif count > 1:
                    # Table 9's rule (module docstring): an edit applied twice is not in that
                    # operation's denominator (Negator addition or deletion: 118 rows, not 124).
                    repeated.append(OPERATIONS[op])
            hyp_types = [t for t in NEGATION_TYPES if _flag(row.fields.get(f"H-{t}"))]
            no_hyp_negation = all(not (row.fields.get(f"H-{t}") or "").strip() for t in NEGATION_TYPES)
            types = ([f"premise/{t}" for t in NEGATION_TYPES if _flag(row.fields.get(f"P-{t}"))]
                     + [f"hypothesis/{t}" for t in hyp_types] + (["hypothesis/None"] if no_hyp_negation else []))
            examples.append(
                Example(
                    id=f"nannli/{split}/{row.index}",
                    inputs=(premise, row.get("hypothesis")),
                    label=label,
                    subset=row.get("Construction").strip(),
                    group=f"nannli/{split}/premise/{premises[premise]}",
                    meta={"operations": tuple(ops), "operations_repeated": tuple(repeated), "quantification": quantification, "negation_types": tuple(types),
                          "construction_subtype": row.fields.get("Construction Subtype")},
                )
            )
        return examples

    def metric(self, examples: Sequence[Example], predicted_labels: Sequence[str] = nli.NLI3) -> NanNliMetric:
        groups = {g: i for i, g in enumerate(dict.fromkeys(e.group for e in examples))}
        from negtrain.metrics.nannli import NanNliMetric  # torch: imported when scoring, not when listing

        return NanNliMetric(
            labels=[self.labels.index(e.label) for e in examples],
            premises=[groups[e.group] for e in examples],
            # The loader gives every example its construction (subset).
            constructions=[TABLE_8.get(c, c) for c in cast(list[str], [e.subset for e in examples])],
            operations=[e.meta["operations"] for e in examples],
            predicted_labels=predicted_labels,
            operation_names=tuple(OPERATIONS.values()),
            f1_order=F1_ORDER,
            construction_order=tuple(dict.fromkeys(TABLE_8.values())),
            quantification=[e.meta.get("quantification", False) for e in examples],
            negation_types=[e.meta.get("negation_types", ()) for e in examples],
            negation_type_order=(*(f"premise/{t}" for t in NEGATION_TYPES), *(f"hypothesis/{t}" for t in NEGATION_TYPES), "hypothesis/None"),
        )
