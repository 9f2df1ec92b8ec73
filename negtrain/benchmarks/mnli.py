"""MultiNLI (Williams et al. 2018): three-way NLI over ten genres, from the Hugging Face Hub.

Read from the Hub dataset ``nyu-mll/multi_nli`` in its own schema (``premise``, ``hypothesis``,
``label`` as a class id, ``pairID``, ``genre``, ...), stored as
``<data dir>/nyu-mll/multi_nli/<split>.jsonl`` (see :mod:`negtrain.benchmarks.files`). The Hub's class ids
are 0 entailment, 1 neutral, 2 contradiction; a row without a gold label (id -1) is an error, never
dropped.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from negtrain.core import labels as nli
from negtrain.benchmarks.base import NliBenchmark, Example, local, read_jsonl
from negtrain.benchmarks.files import HubSplit
from negtrain.metrics.declared import count, score

if TYPE_CHECKING:
    from negtrain.metrics.mnli import MnliMetric

DATASET = "nyu-mll/multi_nli"
#: The Hub dataset's ClassLabel names, by id.
HUB_LABELS = ("entailment", "neutral", "contradiction")


class Mnli(NliBenchmark):
    name = "mnli"
    splits = ("train", "validation_matched", "validation_mismatched")
    labels = nli.NLI3
    reported_metrics = (score("accuracy"), count("n"))
    eval_splits = ("validation_matched", "validation_mismatched")  # MNLI's test labels are not public
    citation = (
        "Williams, Nangia, Bowman (2018). A Broad-Coverage Challenge Corpus for Sentence "
        "Understanding through Inference. NAACL 2018."
    )

    def files(self, split: str) -> list[HubSplit]:
        return [HubSplit(DATASET, split)]

    def read(self, split: str) -> list[Example]:
        return list(self.stream(split))

    def stream(self, split: str) -> Iterator[Example]:
        first_line: dict[str, int] = {}
        for row in read_jsonl(local(self.files(split)[0])):
            raw = row.get("label")
            if isinstance(raw, bool) or not isinstance(raw, int) or not 0 <= raw < len(HUB_LABELS):
                raise row.error("label", f"expected a class id 0 (entailment), 1 (neutral) or 2 (contradiction), got {raw!r}")
            pair_id = row.get("pairID")
            if not isinstance(pair_id, (str, int)) or isinstance(pair_id, bool):
                raise row.error("pairID", f"expected a string id, got {pair_id!r}")
            if str(pair_id) in first_line:
                raise row.error("pairID", f"duplicate id {pair_id!r} (first at line {first_line[str(pair_id)]})")
            first_line[str(pair_id)] = row.line
            yield Example(
                id=f"mnli/{split}/{pair_id}",
                inputs=(row.text("premise"), row.text("hypothesis")),
                label=HUB_LABELS[raw],
                meta={"genre": row.fields.get("genre")},
            )

    def metric(self, examples: Sequence[Example]) -> MnliMetric:
        from negtrain.metrics.mnli import MnliMetric  # torch: imported when scoring, not when listing

        return MnliMetric(labels=[self.labels.index(e.label) for e in examples])
