"""NeQA (Zhang et al. 2023, "Beyond Positive Scaling: How Negation Impacts Scaling Trends of
Language Models", Findings of ACL 2023): the negation task of the Inverse Scaling Prize.

``data_pipeline/neqa.jsonl`` holds 1,718 negated questions, each with two ``choices`` and
``answer``, the index of the right one. The paper scores all of them as one test set, so there is
one split, ``test``; ids are ``neqa/test/<row>`` (0-based row of the file).

Scoring is multiple choice by log-likelihood (lm-evaluation-harness ``output_type:
multiple_choice``): each choice is scored as the continuation of the question,
``context = question``, ``continuation = target_delimiter + choice`` with lm-eval's default
``target_delimiter`` of one space; the model picks the choice with the highest summed
log-likelihood. Metrics (:class:`negtrain.metrics.multiple_choice.MultipleChoiceMetric`):
``accuracy`` (lm-eval ``acc``), ``accuracy_norm`` (lm-eval ``acc_norm``: log-likelihood divided
by the choice's length in characters), and ``accuracy/<tag>`` per metadata group:
``accuracy/source/<dataset>`` (OpenBookQA for the 500 rows with a ``negation_rule``, else the
metadata ``dataset``: ConceptNet, GoogleRE, SQUAD, TREx) and ``accuracy/negation_rule/<rule>``.

Format. The paper's own evaluation (and the Inverse Scaling Prize's data set that
lm-evaluation-harness's ``inverse_scaling_neqa`` task reads from the Hub) wraps each question in
a lettered prompt ("The following are multiple choice questions (with answers) about common
sense. Question: ... A. ... B. ... Answer:") and compares " A" with " B". That variant is
``neqa-lettered`` here (choices " A"/" B", ``target_delimiter`` "" as lm-eval's
``_inverse_scaling_mc_yaml``); its ``accuracy_norm`` equals ``accuracy`` since both letters have
the same length. ``neqa`` is the cloze form, where the choice texts themselves are scored.

``negtrain evaluate --predictions`` takes per id the chosen index (0/1, as a number or string)
or the exact choice text; ``accuracy_norm`` needs the model's log-likelihoods, so it is reported
only for a file whose every line carries ``"loglikelihoods"`` (one per choice, as a negtrain run
writes them, with ``"choice_chars"``), and is NaN with a note otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from negtrain.benchmarks.base import AnswerKind, Benchmark, Example, choice_named, choice_syntax
from negtrain.benchmarks.rows import local, read_jsonl
from negtrain.benchmarks.files import RemoteFile
from negtrain.metrics.declared import count, score

REPO = "yuhui-zh15/NeQA"
PATH = "data_pipeline/neqa.jsonl"
LETTERED_PROMPT = (
    "The following are multiple choice questions (with answers) about common sense.\n\n"
    "Question: {question}\nA. {choice_a}\nB. {choice_b}\nAnswer:"
)


class Neqa(Benchmark):
    name = "neqa"
    splits = ("test",)
    labels = ("0", "1")  # the index of the chosen answer
    answer_type = AnswerKind.CHOICE
    how_scored = {
        "seq2seq": "each choice's summed log-likelihood as the decoder output for the question (acc, and acc_norm per character)",
        "causal_lm": "each choice's summed log-likelihood as the question's continuation (acc, and acc_norm per character)",
    }
    refuses = {
        "nli": "two-way multiple choice scored by likelihoods, not premise/hypothesis pairs",
    }
    input_names = ("question",)
    #: What separates the context from a choice when it is scored (lm-eval's target_delimiter).
    target_delimiter = " "
    reported_metrics = (
        score("accuracy"),
        score("accuracy_norm"),
        score("accuracy/source/<dataset>"),
        score("accuracy/negation_rule/<rule>"),
        count("n"),
    )
    prediction_help = (
        "a choice index (0 or 1) or the text of one of the question's choices; \"loglikelihoods\" "
        "(one per choice, as a run writes them) on every line adds accuracy_norm"
    )
    citation = (
        "Zhang, Yuhui; Yasunaga, Michihiro; Zhou, Zhengping; HaoChen, Jeff Z.; Zou, James; Liang, Percy; "
        "Yeung, Serena (2023). Beyond Positive Scaling: How Negation Impacts Scaling Trends of Language "
        "Models. Findings of ACL 2023."
    )

    def files(self, split: str) -> list[RemoteFile]:
        return [RemoteFile(REPO, PATH)]

    def read(self, split: str) -> list[Example]:
        examples = []
        for row in read_jsonl(local(self.files(split)[0])):
            question = row.text("question")
            choices = row.get("choices")
            if not isinstance(choices, list) or len(choices) != 2 or not all(isinstance(c, str) and c.strip() for c in choices):
                raise row.error("choices", f"expected two non-empty strings, got {choices!r}")
            answer = row.fields.get("answer")
            if not isinstance(answer, int) or isinstance(answer, bool) or answer not in (0, 1):
                raise row.error("answer", f"expected 0 or 1, got {answer!r}")
            meta = row.fields.get("metadata") or {}
            if not isinstance(meta, dict):
                raise row.error("metadata", f"expected an object, got {type(meta).__name__}")
            examples.append(
                Example(
                    id=f"{self.name}/{split}/{row.index}",
                    inputs=(question,),
                    label=str(answer),
                    subset=_source(meta),
                    meta={"choices": tuple(choices), "tags": _tags(meta), "line": row.line, "file": str(row.path)},
                )
            )
        return examples

    # -- what the language-model families score --------------------------------------------

    def context(self, example: Example) -> str:
        return example.inputs[0]

    def choices(self, example: Example) -> tuple[str, ...]:
        return tuple(example.meta["choices"])

    # -- metric and predictions files ---------------------------------------------------------

    def metric(self, examples: Sequence[Example]):
        from negtrain.metrics.multiple_choice import MultipleChoiceMetric  # torch: imported when scoring, not when listing

        return MultipleChoiceMetric([int(e.label) for e in examples], [e.meta["tags"] for e in examples],
                                    [[len(c) for c in self.choices(e)] for e in examples])

    def normalize_prediction(self, value: Any) -> str | None:
        return choice_syntax(value)

    def choice_label(self, value: str, example: Example) -> str | None:
        """The label ("0"/"1") a prediction names for this question: an index, or a choice text."""
        return choice_named(value, self.labels, example.meta["choices"])


class NeqaLettered(Neqa):
    """NeQA in the paper's and the Inverse Scaling Prize's lettered prompt: choices " A" / " B"."""

    name = "neqa-lettered"
    target_delimiter = ""

    def context(self, example: Example) -> str:
        a, b = example.meta["choices"]
        return LETTERED_PROMPT.format(question=example.inputs[0], choice_a=a, choice_b=b)

    def choices(self, example: Example) -> tuple[str, ...]:
        return (" A", " B")

    def choice_label(self, value: str, example: Example) -> str | None:
        letter = {"A": "0", "B": "1"}.get(value.strip())
        return letter or super().choice_label(value, example)


def _source(meta: dict) -> str:
    return "OpenBookQA" if "negation_rule" in meta else str(meta.get("dataset", "unknown"))


def _tags(meta: dict) -> tuple[str, ...]:
    tags = [f"source/{_source(meta)}"]
    if meta.get("negation_rule"):
        tags.append(f"negation_rule/{meta['negation_rule']}")
    return tuple(tags)

