"""ScoNe-NLI (She et al. 2023): scoped negation, six conditions, two-way NLI.

Rows with the same position in the six condition files of a split form one contrast set.
``one_scoped.csv`` holds the pair in ``sentence1``/``sentence2``/``gold_label``; the other five
files hold it in the ``*_edited`` columns (upstream README).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from negtrain import labels as nli
from negtrain.benchmarks.base import Benchmark, Example, local, read_csv
from negtrain.benchmarks.files import RemoteFile
from negtrain.metrics.declared import count, scores

if TYPE_CHECKING:
    from negtrain.metrics.scone import SconeMetric

CONDITIONS = (
    "no_negation",
    "one_not_scoped",
    "one_scoped",
    "one_scoped_one_not_scoped",
    "two_scoped",
    "two_not_scoped",
)
REPO = "selenashe/ScoNe"


class Scone(Benchmark):
    name = "scone"
    splits = ("train", "test")
    labels = nli.NLI2
    reported_metrics = (*scores(["accuracy", *(f"accuracy/{c}" for c in CONDITIONS), "consistency"]), count("groups_scored"), count("n"))
    citation = (
        "She, Potts, Bowman, Geiger (2023). ScoNe: Benchmarking Negation Reasoning in Language "
        "Models With Fine-Tuning and In-Context Learning. ACL 2023."
    )

    def files(self, split: str) -> list[RemoteFile]:
        return [RemoteFile(REPO, f"scone_nli/{split}/{c}.csv") for c in CONDITIONS]

    def read(self, split: str) -> list[Example]:
        examples = []
        for condition, file in zip(CONDITIONS, self.files(split)):
            suffix = "" if condition == "one_scoped" else "_edited"
            cols = (f"sentence1{suffix}", f"sentence2{suffix}", f"gold_label{suffix}")
            for row in read_csv(local(file), required=cols):
                raw = row.get(cols[2])
                label = nli.into(nli.normalize(raw) or "", self.labels)
                if label is None:
                    raise row.error(cols[2], f"label '{raw}' is not an NLI label")
                examples.append(
                    Example(
                        id=f"scone/{split}/{condition}/{row.index}",
                        inputs=(row.get(cols[0]), row.get(cols[1])),
                        label=label,
                        subset=condition,
                        group=f"scone/{split}/{row.index}",
                    )
                )
        return examples

    def metric(self, examples: Sequence[Example]) -> SconeMetric:
        from negtrain.metrics.scone import SconeMetric  # torch: imported when scoring, not when listing

        return SconeMetric(
            labels=[self.labels.index(e.label) for e in examples],
            subsets=[e.subset for e in examples],
            groups=[e.group for e in examples],
            subset_order=CONDITIONS,
        )
