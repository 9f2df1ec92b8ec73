"""CondaQA (Ravichander et al. 2022): contrastive reading comprehension about negation.

Each question is asked about four versions of a passage (``PassageEditID``): 0 the original,
1 a paraphrase of the negation, 2 a change of its scope, 3 its removal (affirmative). Answers are
free text (mostly yes / no / don't know), so models *generate* an answer and it is compared with the
gold answer after lower-casing and stripping whitespace.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from negtrain.benchmarks.base import Benchmark, Example, local, read_jsonl
from negtrain.benchmarks.files import RemoteFile
from negtrain.metrics.base import MISSING, ExampleMetric
from negtrain.metrics.uncertainty import Mean, UnitTable, unit_table

REPO = "AbhilashaRavichander/CondaQA"
EDITS = ("original", "paraphrase", "scope", "affirmative")  # PassageEditID 0..3


def normalize_answer(text: str) -> str:
    """The paper's answer comparison: lower-cased, surrounding whitespace stripped."""
    return str(text).strip().lower()


class CondaqaMetric(ExampleMetric):
    """CondaQA's metrics (Ravichander et al. 2022, section 5), on per-example correctness.

    Each prediction is 1 (the generated answer equals the gold answer after lower-casing and
    stripping) or 0; MISSING where no prediction was made.

    - ``accuracy``: right / predicted.
    - ``accuracy/<edit>`` for ``original``, ``paraphrase``, ``scope``, ``affirmative``.
    - A question group is the (PassageID, QuestionID) pair. It is *complete* when the data holds
      exactly one example for each of the four passage versions (edits 0-3). Only complete groups
      all of whose four examples were predicted are scored; ``groups_scored`` says how many
      (the paper's test set has 1,402 complete groups).
    - ``consistency``: the fraction of scored groups whose four answers are all right.
    - ``consistency/<edit>`` for paraphrase, scope and affirmative: the fraction of scored groups
      where the answer on the original passage *and* the answer on that edit are both right.

    A question group is one independent unit for the bootstrap.
    """

    resampling_unit = "question group"

    def __init__(self, edits: Sequence[int], groups: Sequence[str], **kwargs) -> None:
        super().__init__(num_examples=len(edits), **kwargs)
        self.edits = np.asarray(edits, dtype=np.int64)
        names = sorted(set(groups))
        lookup = {g: i for i, g in enumerate(names)}
        self.group_codes = np.array([lookup[g] for g in groups], dtype=np.int64)
        n_groups = len(names)
        # members[g, e] = example index of edit e in group g, or -1; complete = all four present once.
        self.members = np.full((n_groups, len(EDITS)), -1, dtype=np.int64)
        count = np.zeros((n_groups, len(EDITS)), dtype=np.int64)
        for i, (g, e) in enumerate(zip(self.group_codes, self.edits)):
            self.members[g, e] = i
            count[g, e] += 1
        self.complete = (count == 1).all(axis=1)

    def unit_table(self, predictions: np.ndarray) -> UnitTable:
        seen = predictions != MISSING
        right = (predictions == 1) & seen
        columns = {"seen": seen, "right": right}
        for e, name in enumerate(EDITS):
            member = self.edits == e
            columns[f"seen/{name}"] = seen & member
            columns[f"right/{name}"] = right & member
        n_groups = len(self.members)
        # A group is scored when it is complete and all four versions were predicted.
        members = np.where(self.complete[:, None], self.members, 0)
        scored = self.complete & seen[members].all(axis=1)
        ok = right[members] & scored[:, None]  # (groups, 4)
        per_unit = {"groups_scored": scored, "groups_right": ok.all(axis=1)}
        for e, name in enumerate(EDITS[1:], start=1):
            per_unit[f"groups_right/{name}"] = ok[:, 0] & ok[:, e]
        return unit_table(self.resampling_unit, self.group_codes, n_groups, columns, per_unit)

    def from_totals(self, t: Mapping[str, np.ndarray]) -> dict[str, np.ndarray | Mean]:
        out: dict[str, np.ndarray | Mean] = {"accuracy": Mean(t["right"], t["seen"])}
        for name in EDITS:
            out[f"accuracy/{name}"] = Mean(t[f"right/{name}"], t[f"seen/{name}"])
        out["consistency"] = Mean(t["groups_right"], t["groups_scored"])
        for name in EDITS[1:]:
            out[f"consistency/{name}"] = Mean(t[f"groups_right/{name}"], t["groups_scored"])
        out["groups_scored"] = t["groups_scored"]
        out["n"] = t["seen"]
        return out


class Condaqa(Benchmark):
    name = "condaqa"
    splits = ("train", "dev", "test")
    labels = ()  # free-text answers
    prediction_help = "an answer string"
    reported_metrics = (
        "accuracy", *(f"accuracy/{e}" for e in EDITS), "consistency",
        *(f"consistency/{e}" for e in EDITS[1:]), "groups_scored", "n",
    )
    answer_type = "text"
    input_names = ("passage", "question")
    # UnifiedQA's input format: the question-answering context and question joined by the
    # literal two characters backslash-n (UnifiedQA's separator), passage first as in CondaQA's
    # UnifiedQA baselines.
    default_prompt = "{passage} \\n {question}"
    citation = (
        "Ravichander, Gardner, Marasović (2022). CONDAQA: A Contrastive Reading Comprehension "
        "Dataset for Reasoning about Negation. EMNLP 2022."
    )

    def files(self, split: str) -> list[RemoteFile]:
        return [RemoteFile(REPO, f"data/condaqa_{split}.json")]

    def read(self, split: str) -> list[Example]:
        examples = []
        for row in read_jsonl(local(self.files(split)[0])):
            edit = row.get("PassageEditID")
            if edit not in (0, 1, 2, 3):
                raise row.error("PassageEditID", f"expected 0, 1, 2 or 3, got {edit!r}")
            sample = row.get("SampleID")
            examples.append(
                Example(
                    id=f"condaqa/{split}/{sample}",
                    inputs=(str(row.get("sentence1")), str(row.get("sentence2"))),
                    label=str(row.get("label")),
                    subset=EDITS[edit],
                    group=f"{row.get('PassageID')}/{row.get('QuestionID')}",
                    meta={"passage_edit": edit, "sample_id": sample},
                )
            )
        return examples

    def is_correct(self, prediction: str, example: Example) -> bool:
        return normalize_answer(prediction) == normalize_answer(example.label)

    def metric(self, examples: Sequence[Example]) -> CondaqaMetric:
        return CondaqaMetric(edits=[e.meta["passage_edit"] for e in examples], groups=[e.group for e in examples])
