"""CondaQA (Ravichander et al. 2022): contrastive reading comprehension about negation.

Each question is asked about four versions of a passage (``PassageEditID``): 0 the original,
1 a paraphrase of the negation, 2 a change of its scope, 3 its removal (affirmative). Answers are
free text (mostly yes / no / don't know), so models *generate* an answer and it is compared with the
gold answer after lower-casing and stripping whitespace.

Few-shot (Appendix C.2): the paper scores few- and zero-shot models on five disjoint test splits
whose union is the test set, each with its own nine training shots ("sampling c", 9 shots), and
reports the mean and standard deviation over the five. The authors' files are the splits
``fewshot_test_1`` ... ``fewshot_test_5`` (``data/few-shot/test_splits/conda_fewshot_test_<k>.json``)
and ``fewshot_train_1`` ... ``fewshot_train_5``
(``data/few-shot/train_splits/sampling_c_shots_9/conda_fewshot_train_<k>.json``). A few-shot
entry on ``fewshot_test_<k>`` takes its shots from ``fewshot_train_<k>`` by default, and those are a
fixed set: every question gets the same shots, in file order (``Benchmark.fixed_shot_splits``).
Scoring several splits at once (``evaluate --split fewshot_test_1,...``) reports each, the mean
and standard deviation over them, and the pooled score (:mod:`negtrain.evaluation.across_splits`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

from negtrain.benchmarks.base import AnswerKind, Benchmark, Example
from negtrain.benchmarks.rows import local, read_jsonl
from negtrain.benchmarks.files import RemoteFile
from negtrain.metrics.declared import count, scores

if TYPE_CHECKING:
    from negtrain.metrics.condaqa import CondaqaMetric

REPO = "AbhilashaRavichander/CondaQA"
EDITS = ("original", "paraphrase", "scope", "affirmative")  # PassageEditID 0..3
#: The paper's five few-shot splits (Appendix C.2), each with its own nine training shots.
FEWSHOT_TEST = tuple(f"fewshot_test_{k}" for k in range(1, 6))
FEWSHOT_TRAIN = tuple(f"fewshot_train_{k}" for k in range(1, 6))


def normalize_answer(text: str) -> str:
    """The authors' answer comparison: lower-cased, surrounding whitespace stripped, and nothing
    more. Their scorer for the fine-tuned UnifiedQA runs (``compute_accuracy`` and
    ``compute_group_score`` in the evaluation script of the CondaQA authors' experiments; the
    released CondaQA repository ships data only) compares ``gold.strip().lower() ==
    pred.strip().lower()``: no punctuation is removed and no articles are dropped (unlike SQuAD's
    normaliser), so "Yes." does not match "yes", "don't know" does not match "dont know", and "NO"
    matches "no". Consistency groups are scored with the same comparison. A model that answers
    "Yes." is wrong here as it is in the paper; the answer rules (``negtrain/prompts/answers.py``)
    decide what part of a response is the answer."""
    return str(text).strip().lower()


def _id(row, name: str) -> int | str:
    """An identifier field: an integer or a string as upstream (SampleID 5294, QuestionID "q10")."""
    value = row.get(name)
    if type(value) is not int and not isinstance(value, str):
        raise row.error(name, f"expected an integer or a string id, got {type(value).__name__} {value!r}")
    return value


class Condaqa(Benchmark):
    name = "condaqa"
    splits = ("train", "dev", "test", *FEWSHOT_TEST, *FEWSHOT_TRAIN)
    fixed_shot_splits = FEWSHOT_TRAIN
    contains = {"test": FEWSHOT_TEST}  # the five few-shot test splits are a partition of test (Appendix C.2)
    labels = ()  # free-text answers
    prediction_help = "an answer string"
    reported_metrics = (
        *scores(["accuracy", *(f"accuracy/{e}" for e in EDITS), "consistency", *(f"consistency/{e}" for e in EDITS[1:])]),
        count("groups_scored"),
        count("n"),
    )
    answer_type = AnswerKind.TEXT
    input_names = ("passage", "question")
    # UnifiedQA's input format: the question-answering context and question joined by the
    # literal two characters backslash-n (UnifiedQA's separator), passage first as in CondaQA's
    # UnifiedQA baselines.
    default_prompt = "{passage} \\n {question}"
    # A decoder-only model is asked for the answer after "Answer:"; generation stops at the first
    # newline or EOS (or model.max_new_tokens), so it does not run on into another question.
    family_prompts = {"causal_lm": "{passage}\nQuestion: {question}\nAnswer:"}
    how_scored = {
        "seq2seq": "greedy generation, compared with the gold answer (lower-cased, stripped)",
        "causal_lm": "greedy generation stopped at a newline or EOS (max_new_tokens cap), compared with the gold answer",
    }
    refuses = {
        "nli": "free-text answers: a classification head cannot produce them",
    }
    citation = (
        "Ravichander, Gardner, Marasović (2022). CONDAQA: A Contrastive Reading Comprehension "
        "Dataset for Reasoning about Negation. EMNLP 2022."
    )

    def files(self, split: str) -> list[RemoteFile]:
        if split in FEWSHOT_TEST:
            return [RemoteFile(REPO, f"data/few-shot/test_splits/conda_fewshot_test_{split.rsplit('_', 1)[1]}.json")]
        if split in FEWSHOT_TRAIN:
            k = split.rsplit("_", 1)[1]
            return [RemoteFile(REPO, f"data/few-shot/train_splits/sampling_c_shots_9/conda_fewshot_train_{k}.json")]
        return [RemoteFile(REPO, f"data/condaqa_{split}.json")]

    def default_shots_split(self, split: str) -> str:
        """A few-shot test split's own nine shots; else the train split."""
        if split in FEWSHOT_TEST:
            return FEWSHOT_TRAIN[FEWSHOT_TEST.index(split)]
        return super().default_shots_split(split)

    def read(self, split: str) -> list[Example]:
        examples = []
        for row in read_jsonl(local(self.files(split)[0])):
            # Types are checked, never coerced: 1.0 and true compare equal to 1 in Python, and a
            # numeric label would be scored against the string of a number.
            edit = row.get("PassageEditID")
            if type(edit) is not int or edit not in (0, 1, 2, 3):
                raise row.error("PassageEditID", f"expected the integer 0, 1, 2 or 3, got {type(edit).__name__} {edit!r}")
            sample = _id(row, "SampleID")
            examples.append(
                Example(
                    id=f"condaqa/{split}/{sample}",
                    inputs=(row.text("sentence1"), row.text("sentence2")),
                    label=row.text("label"),
                    subset=EDITS[edit],
                    group=f"{_id(row, 'PassageID')}/{_id(row, 'QuestionID')}",
                    meta={"passage_edit": edit, "sample_id": sample},
                )
            )
        return examples

    def is_correct(self, prediction: str, example: Example) -> bool:
        return normalize_answer(prediction) == normalize_answer(example.label)

    def metric(self, examples: Sequence[Example]) -> CondaqaMetric:
        from negtrain.metrics.condaqa import CondaqaMetric  # torch: imported when scoring, not when listing

        # The loader gives every example its question group.
        return CondaqaMetric(edits=[e.meta["passage_edit"] for e in examples], groups=cast(list[str], [e.group for e in examples]), edit_names=EDITS)
