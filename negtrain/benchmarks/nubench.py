"""Thunder-NUBench (So et al. 2025, "Thunder-NUBench: A Benchmark for LLMs' Sentence-Level Negation
Understanding", arXiv 2506.14397): which of four sentences is the standard negation of a sentence.

Read from the Hub dataset ``thunder-research-group/SNU_Thunder-NUBench``, configuration
``multiple-choice`` (gated: its conditions are accepted on the Hub and the user's token is in
``HF_TOKEN``; CC BY-NC-SA 4.0), splits ``validation`` (100) and ``test`` (1,002), stored as
``thunder-research-group/SNU_Thunder-NUBench/<split>.jsonl`` in the dataset's schema:
``wikipedia_index``, ``index``, ``sentence``, ``choice1`` (the standard negation, the right answer),
``choice2`` (a local negation) with ``choice2_type`` and ``choice2_element``, ``choice3`` (a
contradiction), ``choice4`` (a paraphrase). Ids are ``nubench/<split>/<index>``.

Scoring is multiple choice by log-likelihood, in the cloze form of lm-evaluation-harness's
``multiple_choice``: each choice, after a space, is scored as the continuation of
:data:`PROMPT` (negtrain's wording: the dataset ships no prompt), and the choice with the highest
summed log-likelihood is the model's (``accuracy``; ``accuracy_norm`` per character, lm-eval's
``acc_norm``). Each choice is scored on its own, so the right answer's fixed position (first) gives
no position to prefer. Besides accuracy, which distractor a model picks when it is wrong:
``chosen/local_negation``, ``chosen/contradiction``, ``chosen/paraphrase`` (shares of all
questions; with ``accuracy`` they sum to 1), and ``accuracy/local_negation_type/<choice2_type>``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from negtrain.benchmarks.base import AnswerKind, Benchmark, Example, choice_named, choice_syntax
from negtrain.benchmarks.rows import local, read_jsonl
from negtrain.benchmarks.files import HubSplit
from negtrain.metrics.declared import count, score

DATASET = "thunder-research-group/SNU_Thunder-NUBench"
CONFIG = "multiple-choice"
#: What each choice is, in the dataset's order (choice1..choice4).
CHOICE_TYPES = ("standard_negation", "local_negation", "contradiction", "paraphrase")
PROMPT = "Sentence: {sentence}\nThe negation of this sentence:"


class Nubench(Benchmark):
    name = "nubench"
    splits = ("validation", "test")
    labels = ("0", "1", "2", "3")  # the index of the chosen sentence; 0 = choice1, the standard negation
    answer_type = AnswerKind.CHOICE
    input_names = ("sentence",)
    target_delimiter = " "
    how_scored = {
        "seq2seq": "each choice's summed log-likelihood as the decoder output for the prompt (acc, and acc_norm per character)",
        "causal_lm": "each choice's summed log-likelihood as the prompt's continuation (acc, and acc_norm per character)",
    }
    refuses = {"nli": "four-way multiple choice scored by likelihoods, not premise/hypothesis pairs"}
    reported_metrics = (
        score("accuracy"),
        score("accuracy_norm"),
        score("accuracy/local_negation_type/<type>"),
        count("n"),
        score("chosen/local_negation", lower_is_better=True),
        score("chosen/contradiction", lower_is_better=True),
        score("chosen/paraphrase", lower_is_better=True),
    )
    prediction_help = (
        "a choice index (0 = choice1, the standard negation, to 3) or the text of one of the question's choices; "
        "\"loglikelihoods\" (one per choice, as a run writes them) on every line adds accuracy_norm"
    )
    citation = (
        "So, Yeonkyoung; Lee, Gyuseong; Jung, Sungmok; Lee, Joonhak; Kang, JiA; Kim, Sangho; Lee, Jaejin (2025). "
        "Thunder-NUBench: A Benchmark for LLMs' Sentence-Level Negation Understanding. arXiv:2506.14397."
    )

    def files(self, split: str) -> list[HubSplit]:
        return [HubSplit(DATASET, split, CONFIG, gated=True)]

    def read(self, split: str) -> list[Example]:
        examples = []
        for row in read_jsonl(local(self.files(split)[0])):
            index = row.get("index")
            if not isinstance(index, int) or isinstance(index, bool):
                raise row.error("index", f"expected an integer, got {index!r}")
            sentence = row.text("sentence")
            choices = tuple(row.text(f"choice{k}") for k in range(1, 5))
            if len(set(choices)) != 4:
                raise row.error("choice1", "two of the four choices are the same text")
            kind = row.text("choice2_type")
            element = row.fields.get("choice2_element")
            examples.append(
                Example(
                    id=f"{self.name}/{split}/{index}",
                    inputs=(sentence,),
                    label="0",
                    subset=kind,
                    meta={"choices": choices, "tags": (f"local_negation_type/{kind}",), "element": element,
                          "line": row.line, "file": str(row.path)},
                )
            )
        return examples

    def context(self, example: Example) -> str:
        return PROMPT.format(sentence=example.inputs[0])

    def choices(self, example: Example) -> tuple[str, ...]:
        return tuple(example.meta["choices"])

    def choice_label(self, value: str, example: Example) -> str | None:
        return choice_named(value, self.labels, example.meta["choices"])

    def metric(self, examples: Sequence[Example]):
        from negtrain.metrics.nubench import NubenchMetric  # torch: imported when scoring, not when listing

        return NubenchMetric([int(e.label) for e in examples], [e.meta["tags"] for e in examples],
                             [[len(c) for c in self.choices(e)] for e in examples], CHOICE_TYPES)

    def normalize_prediction(self, value: Any) -> str | None:
        return choice_syntax(value)
