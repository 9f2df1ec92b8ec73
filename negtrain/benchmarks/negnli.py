"""NegNLI (Hossain et al. 2020): RTE, SNLI and MNLI pairs rewritten with negation.

Each source file (``data/new_benchmarks/clean_data/{RTE,SNLI,MNLI}.txt``) holds 500 groups of three
rows made from one original pair, in the order Tneg-H (negated text), T-Hneg (negated hypothesis),
Tneg-Hneg (both negated) (paper, section 5). The files are tab-separated with Windows line ends;
quotes are literal characters, never field quoting. SNLI.txt is UTF-8; RTE.txt and MNLI.txt are not
(``Québec``, ``£`` in RTE; six ``\\x94`` bytes in MNLI, probably what is left of UTF-8 em dashes,
``e2 80 94``), so a file that is not valid UTF-8 is read as Windows-1252, which decodes every byte
they hold (``\\x94`` becomes ``”``; the text is not repaired). Rows are kept as they are, even
where a group does not follow the pattern (RTE group 80 repeats one pair three times; SNLI group 37
negates nothing in its hypothesis).

Splits:

- ``all``: the 1,500 rows; what ``data.eval: all`` and a report card score (Table 7 evaluates
  models trained on the original benchmarks on every new pair), except for a run that trained on
  ``train`` (scored on ``test``, Table 8) or ``train85`` (scored on ``val15``).
- ``train`` / ``test``: 70% / 30% of the 500 groups (350 / 150 groups), as in the paper's Table 8.
  The paper does not publish its split; this one orders the groups by the SHA-256 of
  ``"<benchmark>/<group number>"`` and takes the first 350, so it is fixed, independent of any
  library version, and never splits a group.
- ``train85`` / ``val15``: 85% / 15% of the groups (425 / 75), the NegNLI fine-tuning split of the
  NaN-NLI paper (Truong et al. 2022), from the same order (so ``val15`` lies inside ``test``).

An example's id is ``negnli-<source>/all/<index>`` with the file's own index column, the same in
every split, so predictions on ``test`` can be joined with those on ``all``.
"""

from __future__ import annotations

import csv
import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from negtrain.core import labels as nli
from negtrain.benchmarks.base import NliBenchmark, Example
from negtrain.benchmarks.rows import local, read_csv
from negtrain.benchmarks.files import RemoteFile
from negtrain.core.errors import DataError
from negtrain.metrics.declared import count, scores

if TYPE_CHECKING:
    from negtrain.metrics.negnli import NegnliMetric

REPO = "mosharafhossain/negation-and-nli"
PAIR_TYPES = ("Tneg-H", "T-Hneg", "Tneg-Hneg")
GROUPS = 500
#: split -> (first, last) fraction of the hashed group order it takes.
SPLITS = {"all": (0.0, 1.0), "train": (0.0, 0.7), "test": (0.7, 1.0), "train85": (0.0, 0.85), "val15": (0.85, 1.0)}


class _Negnli(NliBenchmark):
    source: str  # upstream file stem: RTE, SNLI or MNLI
    splits = tuple(SPLITS)
    # Table 7 scores models trained on the original benchmarks on every new pair; a model trained
    # on NegNLI's 70% (Table 8) is scored on the 30% held out, one trained on NaN-NLI's 85% on its 15%.
    eval_splits = ("all",)
    held_out_splits = {"train": "test", "train85": "val15"}

    def holds(self, split: str, other: str) -> bool:
        # Each split is a range of the one hashed group order (SPLITS): val15 lies inside test.
        (lo, hi), (olo, ohi) = SPLITS[split], SPLITS[other]
        return lo <= olo and ohi <= hi

    def shares_rows(self, split: str, other: str) -> bool:
        # train85 and test share the groups between 70% and 85% of the order.
        (lo, hi), (olo, ohi) = SPLITS[split], SPLITS[other]
        return lo < ohi and olo < hi

    split_descriptions = {
        "all": "every pair of NegNLI, the set Hossain et al. (2020) score models trained on the original "
               "benchmarks on (Table 7)",
        "test": "the 30% of NegNLI's groups held out from `train`, the set Hossain et al. (2020) score models "
                "trained on the 70% on (Table 8; negtrain's split, the paper's is not published)",
        "val15": "the 15% of NegNLI's groups held out from `train85` (the NaN-NLI paper's NegNLI fine-tuning split)",
    }
    reported_metrics = (
        *scores(["accuracy", *(f"accuracy/{t}" for t in PAIR_TYPES), "consistency"]),
        # Table 7's MB column: the gold labels' majority share, beside the model's accuracy.
        *scores(["majority_baseline", *(f"majority_baseline/{t}" for t in PAIR_TYPES)]),
        count("groups_scored"),
        count("n"),
    )
    citation = (
        "Hossain, Kovatchev, Dutta, Kao, Wei, Blanco (2020). An Analysis of Natural Language "
        "Inference Benchmarks through the Lens of Negation. EMNLP 2020."
    )

    def files(self, split: str) -> list[RemoteFile]:
        return [RemoteFile(REPO, f"data/new_benchmarks/clean_data/{self.source}.txt")]

    def split_groups(self, split: str) -> set[int]:
        """The group numbers (file index // 3) in ``split``."""
        order = sorted(range(GROUPS), key=lambda g: hashlib.sha256(f"{self.name}/{g}".encode()).hexdigest())
        lo, hi = SPLITS[split]
        return set(order[round(lo * GROUPS) : round(hi * GROUPS)])

    def read(self, split: str) -> list[Example]:
        path = local(self.files(split)[0])
        cols = ("index", "Text", "Hypothesis", "gold_label")
        rows = list(read_csv(path, cols, delimiter="\t", encodings=("utf-8", "cp1252"), quoting=csv.QUOTE_NONE))
        if len(rows) != 3 * GROUPS:
            raise DataError(f"{path}: expected {3 * GROUPS} rows ({GROUPS} groups of three), found {len(rows)}")
        keep = self.split_groups(split)
        examples = []
        for row in rows:
            if row.get("index").strip() != str(row.index):
                raise row.error("index", f"expected {row.index} (rows are numbered from 0 in order), got {row.get('index')!r}")
            raw = row.get("gold_label")
            label = nli.normalize(raw)
            if label not in self.labels:
                raise row.error("gold_label", f"label '{raw}' is not in {self.name}'s label set {list(self.labels)}")
            group = row.index // 3
            if group not in keep:
                continue
            examples.append(
                Example(
                    id=f"{self.name}/all/{row.index}",
                    inputs=(row.get("Text"), row.get("Hypothesis")),
                    label=label,
                    subset=PAIR_TYPES[row.index % 3],
                    group=f"{self.name}/{group}",
                )
            )
        return examples

    def metric(self, examples: Sequence[Example]) -> NegnliMetric:
        from negtrain.metrics.negnli import NegnliMetric  # torch: imported when scoring, not when listing

        return NegnliMetric(
            labels=[self.labels.index(e.label) for e in examples],
            subsets=[e.subset for e in examples],
            groups=[e.group for e in examples],
            group_size=3,
            subset_order=PAIR_TYPES,
        )


class NegnliRte(_Negnli):
    """NegNLI from RTE: two-way (entailment / not_entailment)."""

    name = "negnli-rte"
    source = "RTE"
    labels = nli.NLI2


class NegnliSnli(_Negnli):
    """NegNLI from SNLI: three-way."""

    name = "negnli-snli"
    source = "SNLI"
    labels = nli.NLI3


class NegnliMnli(_Negnli):
    """NegNLI from MNLI: three-way."""

    name = "negnli-mnli"
    source = "MNLI"
    labels = nli.NLI3
