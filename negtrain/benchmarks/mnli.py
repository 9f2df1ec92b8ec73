"""MultiNLI (Williams et al. 2018): three-way NLI over ten genres, from the Hugging Face Hub.

Read from the Hub dataset ``nyu-mll/multi_nli`` in its own schema (``premise``, ``hypothesis``,
``label`` as a class id, ``pairID``, ``genre``, ...), stored as
``<data dir>/nyu-mll/multi_nli/<split>.jsonl`` (see :mod:`negtrain.benchmarks.files`). The Hub's class ids
are 0 entailment, 1 neutral, 2 contradiction; a row without a gold label (id -1) is an error, never
dropped.

``validation_matched_neg`` and ``validation_mismatched_neg``: the pairs of that dev set with a
negation cue in the premise or the hypothesis, the "dev-neg" rows of NegNLI's Table 7 (Hossain et
al. 2020) and the "MNLI-neg" column of NaN-NLI's Table 5 (Truong et al. 2022), which takes the
subset Hossain et al. extracted. Read from the same file as the dev set, nothing else is needed;
MNLI is not mirrored, so the file must be in a data dir or the cache (the error names where it was
looked for and how to get it). The cues are negtrain's lexicon (:mod:`negtrain.negation.cues`:
whole words and "n't", case-insensitive); Hossain et al. found them with a trained cue detector
(their section 3), which also finds affixal cues ("unhappy"), so the subsets are close to the
paper's, not the same rows. Ids keep the dev set's (``mnli/validation_matched/<pairID>``), so
predictions on the subset join those on the whole dev set.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from negtrain.core import labels as nli
from negtrain.benchmarks.base import NliBenchmark, Example
from negtrain.benchmarks.rows import local, read_jsonl
from negtrain.benchmarks.files import HubSplit
from negtrain.metrics.declared import count, score
from negtrain.negation.cues import CueDetector

if TYPE_CHECKING:
    from negtrain.metrics.mnli import MnliMetric

DATASET = "nyu-mll/multi_nli"
#: The Hub dataset's ClassLabel names, by id.
HUB_LABELS = ("entailment", "neutral", "contradiction")
#: A dev split's negation subset is named ``<dev split>_neg``.
NEG = "_neg"


class Mnli(NliBenchmark):
    name = "mnli"
    splits = ("train", "validation_matched", "validation_mismatched", "validation_matched_neg", "validation_mismatched_neg")
    labels = nli.NLI3
    reported_metrics = (score("accuracy"), count("n"))
    eval_splits = ("validation_matched", "validation_mismatched")  # MNLI's test labels are not public
    contains = {"validation_matched": ("validation_matched_neg",), "validation_mismatched": ("validation_mismatched_neg",)}
    citation = (
        "Williams, Nangia, Bowman (2018). A Broad-Coverage Challenge Corpus for Sentence "
        "Understanding through Inference. NAACL 2018."
    )

    def files(self, split: str) -> list[HubSplit]:
        return [HubSplit(DATASET, split.removesuffix(NEG))]

    def read(self, split: str) -> list[Example]:
        return list(self.stream(split))

    def stream(self, split: str) -> Iterator[Example]:
        source = split.removesuffix(NEG)
        detector = CueDetector() if split.endswith(NEG) else None
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
            inputs = (row.text("premise"), row.text("hypothesis"))
            if detector is not None and not any(detector.has_cue(t) for t in inputs):
                continue
            yield Example(
                id=f"mnli/{source}/{pair_id}",
                inputs=inputs,
                label=HUB_LABELS[raw],
                meta={"genre": row.fields.get("genre")},
            )

    def metric(self, examples: Sequence[Example]) -> MnliMetric:
        from negtrain.metrics.mnli import MnliMetric  # torch: imported when scoring, not when listing

        return MnliMetric(labels=[self.labels.index(e.label) for e in examples])
