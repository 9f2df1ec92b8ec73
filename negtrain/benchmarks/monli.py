"""MoNLI (Geiger et al. 2020): monotonicity NLI with lexical substitutions, two-way.

``nmonli_*`` substitutes under negation (NMoNLI); ``pmonli`` is the positive, negation-free set
(PMoNLI), used for evaluation only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from negtrain.core import labels as nli
from negtrain.benchmarks.base import NliBenchmark, Example
from negtrain.benchmarks.rows import local, read_jsonl
from negtrain.benchmarks.files import RemoteFile
from negtrain.metrics.declared import count, score

if TYPE_CHECKING:
    from negtrain.metrics.monli import MonliMetric

REPO = "atticusg/MoNLI"
FILES = {"train": "nmonli_train.jsonl", "test": "nmonli_test.jsonl", "pmonli": "pmonli.jsonl"}


class Monli(NliBenchmark):
    name = "monli"
    splits = tuple(FILES)
    labels = nli.NLI2
    evaluation_only_splits = ("pmonli",)
    reported_metrics = (score("accuracy"), count("n"))
    citation = (
        "Geiger, Richardson, Potts (2020). Neural Natural Language Inference Models Partially "
        "Embed Theories of Lexical Entailment and Negation. BlackboxNLP 2020."
    )

    def files(self, split: str) -> list[RemoteFile]:
        return [RemoteFile(REPO, FILES[split])]

    def read(self, split: str) -> list[Example]:
        examples = []
        for row in read_jsonl(local(self.files(split)[0])):
            raw = row.text("gold_label")
            label = nli.into(nli.normalize(raw) or "", self.labels)
            if label is None:
                raise row.error("gold_label", f"label '{raw}' is not an NLI label")
            examples.append(
                Example(
                    id=f"monli/{split}/{row.index}",
                    inputs=(row.text("sentence1"), row.text("sentence2")),
                    label=label,
                )
            )
        return examples

    def metric(self, examples: Sequence[Example]) -> MonliMetric:
        from negtrain.metrics.monli import MonliMetric  # torch: imported when scoring, not when listing

        return MonliMetric(labels=[self.labels.index(e.label) for e in examples])
