"""CondaQA (Ravichander et al. 2022): contrastive reading comprehension about negation.

Each question is asked about four versions of a passage (``PassageEditID``): 0 the original,
1 a paraphrase of the negation, 2 a change of its scope, 3 its removal (affirmative). Answers are
free text (mostly yes / no / don't know), so models *generate* an answer and it is compared with the
gold answer after lower-casing and stripping whitespace.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from negtrain.benchmarks.base import Benchmark, Example, local, read_jsonl
from negtrain.benchmarks.files import RemoteFile
from negtrain.metrics.base import MISSING, ExampleMetric, ratio

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
    """

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

    def score(self, predictions: np.ndarray) -> dict[str, float]:
        seen = predictions != MISSING
        right = (predictions == 1) & seen
        out = {"accuracy": ratio(right.sum(), seen.sum())}
        for e, name in enumerate(EDITS):
            member = self.edits == e
            out[f"accuracy/{name}"] = ratio((right & member).sum(), (seen & member).sum())
        full = self.members[self.complete]
        scored = full[seen[full].all(axis=1)]
        ok = right[scored]  # (groups, 4)
        out["consistency"] = ratio(ok.all(axis=1).sum(), len(scored))
        for e, name in enumerate(EDITS[1:], start=1):
            out[f"consistency/{name}"] = ratio((ok[:, 0] & ok[:, e]).sum(), len(scored))
        out["groups_scored"] = float(len(scored))
        out["n"] = float(seen.sum())
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
    # A decoder-only model is asked for the answer after "Answer:"; generation stops at the first
    # newline or EOS (or model.max_new_tokens), so it does not run on into another question.
    family_prompts = {"causal_lm": "{passage}\nQuestion: {question}\nAnswer:"}
    scoring = {
        "seq2seq": "greedy generation, compared with the gold answer (lower-cased, stripped)",
        "causal_lm": "greedy generation stopped at a newline or EOS (max_new_tokens cap), compared with the gold answer",
    }
    unsupported = {
        "nli": "free-text answers: a classification head cannot produce them",
        "mlm": "the mlm family trains negation objectives and scores negated_probes only",
    }
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
