"""This is not a Dataset (García-Ferrero et al. 2023): True/False judgements of generic sentences
with and without negation, built from WordNet relations.

The data is read from the Hub dataset ``HiTZ/This-is-not-a-dataset`` (offline:
``$NEGTRAIN_DATA_DIR/HiTZ/This-is-not-a-dataset/<split>.jsonl``). Its authors ask that it not be
redistributed in plain text, to keep it out of language-model training corpora: it is never
copied into this repository, and tests use small fixtures in its schema.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

from negtrain.benchmarks.base import Benchmark, Example
from negtrain.benchmarks.rows import Row, local, read_jsonl
from negtrain.benchmarks.files import HubSplit
from negtrain.benchmarks.row_filters import RowFilter
from negtrain.metrics.declared import count, score, scores

if TYPE_CHECKING:
    from negtrain.metrics.tinad import TinadMetric

DATASET = "HiTZ/This-is-not-a-dataset"
LABELS = ("True", "False")
CELLS = ("input_affirmation", "input_negation", "distractor_affirmation", "distractor_negation")


def as_bool(value, row: Row, name: str) -> bool:
    """The authors' convert_to_bool: a bool, "true"/"false" (any case), 0/1."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    if isinstance(value, (int, float)) and value in (0, 1):
        return value == 1
    raise row.error(name, f"expected a boolean, got {value!r}")


#: The negation types of the paper's Table 1 (Pullum et al.'s axes), as the authors' files spell
#: them (their data, few-shot rows and results files: ``non_verbal``, not the paper's "non-verbal"):
#: each negated sentence has one of each pair.
NEGATION_TYPES = ("verbal", "non_verbal", "analytic", "synthetic", "clausal", "subclausal")
#: The values each type field of a row may have, as the authors spell them ("none": an affirmation's
#: semantic_type and syntactic_scope). Compared without case; any other spelling is refused.
TYPE_FIELDS = {
    "negation_type": ("affirmation", "verbal", "non_verbal"),
    "semantic_type": ("none", "analytic", "synthetic"),
    "syntactic_scope": ("none", "clausal", "subclausal"),
}


def type_field(row: Row, name: str) -> str:
    """A row's negation type field, lower-cased, if the authors' files spell it so (a missing
    semantic_type or syntactic_scope is "none"); else one line naming the accepted values."""
    raw = row.fields.get(name)
    value = "none" if raw is None and name != "negation_type" else str(raw).strip().lower()
    if value not in TYPE_FIELDS[name]:
        raise row.error(name, f"unknown value {raw!r}; the authors' files spell it one of {', '.join(TYPE_FIELDS[name])}")
    return value
#: The dataset's patterns (Table 2: #01 to #11).
PATTERNS = tuple(range(1, 12))


def negation_types(example: Example) -> tuple[str, ...]:
    """A sentence's negation types from its three type fields; none for an affirmation."""
    return tuple(t for t in (example.meta["negation_type"], example.meta["semantic_type"], example.meta["syntactic_scope"])
                 if t not in ("affirmation", "none"))


def _subset(example: Example) -> str:
    """A TINAD row's subset (``affirmation``, ``distractor_negation``, ...): every row read from its
    files has one (``rows_of`` sets it)."""
    assert example.subset is not None, "a TINAD row always has its subset"
    return example.subset


#: Training-source filters (``data.train[].select``), for §6's ablations: Table 7 trains on the
#: affirmative sentences, the negated ones, or the affirmative ones plus one negation type;
#: Figure 2 on one pattern.
FILTERS = {
    "polarity": RowFilter(("affirmation", "negation"), lambda e: (_subset(e).rsplit("_", 1)[1],),
                          "affirmative or negated sentence, with or without a distractor"),
    "negation_type": RowFilter(NEGATION_TYPES, negation_types,
                               "a negated sentence's types, as the authors' files spell them: verbal or non_verbal, analytic or synthetic, clausal or subclausal"),
    "pattern": RowFilter(PATTERNS, lambda e: (e.meta["pattern_id"],), "the pattern's number, #01 to #11 (Table 2)"),
    "distractor": RowFilter((True, False), lambda e: (_subset(e).startswith("distractor"),), "whether the sentence is a distractor"),
}


class Tinad(Benchmark):
    name = "tinad"
    splits = ("train", "validation", "test")
    labels = LABELS
    prediction_help = "True or False (any case, or a JSON boolean)"
    reported_metrics = (
        *scores(["accuracy", "accuracy/affirmation", "accuracy/negation", *(f"accuracy/{c}" for c in CELLS)]),
        # Figure 2's accuracy per pattern, before the negation-type family (which would match it too).
        score("accuracy/pattern/<NN>"),
        # verbal, non_verbal_input, non_verbal_distractor, ... (the authors' Negation_analysis).
        score("accuracy/<negation type>"),
        *scores(["coherence", "coherence/input", "coherence/distractor", "coherence/affirmation", "coherence/negation"]),
        count("groups_scored"),
        count("groups_lacking_cell"),
        count("n"),
        # The authors' counts beside every accuracy and coherence score, and their per-pattern
        # breakdown: the split's names under pattern/<NN>/ (counts before the scores' family).
        # Details: in metrics.jsonl, not in the report's plots and tables.
        count("confusion/<part>/<TP|FP|FN|TN>", detail=True),
        count("coherent/<score>", detail=True),
        count("incoherent/<score>", detail=True),
        count("pattern/<NN>/confusion/<part>/<TP|FP|FN|TN>", detail=True),
        count("pattern/<NN>/coherent/<score>", detail=True),
        count("pattern/<NN>/incoherent/<score>", detail=True),
        score("pattern/<NN>/<metric>", detail=True),
    )
    input_names = ("sentence",)
    source_filters = FILTERS
    default_prompt = "Is the following statement True or False? {sentence}"
    default_verbalizer = {"True": "True", "False": "False"}
    how_scored = {
        "seq2seq": "log-likelihood of the verbalizers True / False as the decoder output",
        "causal_lm": "log-likelihood of the verbalizers True / False as the prompt's continuation",
    }
    refuses = {
        "nli": "single sentences judged True/False, not premise/hypothesis pairs",
    }
    citation = (
        "García-Ferrero, Altuna, Álvez, Gonzalez-Dios, Rigau (2023). This is not a Dataset: A Large "
        "Negation Benchmark to Challenge Large Language Models. EMNLP 2023."
    )

    def normalize_prediction(self, value) -> str | None:
        if isinstance(value, bool):
            return "True" if value else "False"
        if isinstance(value, str) and value.strip().lower() in {"true", "false"}:
            return value.strip().capitalize()
        return None

    def files(self, split: str) -> list[HubSplit]:
        return [HubSplit(DATASET, split)]

    def read(self, split: str) -> list[Example]:
        examples = []
        for row in read_jsonl(local(self.files(split)[0])):
            for name in ("pattern_id", "test_id"):
                if not isinstance(row.get(name), int) or isinstance(row.get(name), bool):
                    raise row.error(name, f"expected an integer, got {row.get(name)!r}")
            negation_type, semantic_type, syntactic_scope = (type_field(row, name) for name in TYPE_FIELDS)
            distractor = as_bool(row.get("isDistractor"), row, "isDistractor")
            affirmation = negation_type == "affirmation"
            cell = f"{'distractor' if distractor else 'input'}_{'affirmation' if affirmation else 'negation'}"
            label = "True" if as_bool(row.get("label"), row, "label") else "False"
            examples.append(
                Example(
                    id=f"tinad/{split}/{row.index}",
                    inputs=(str(row.get("sentence")),),
                    label=label,
                    subset=cell,
                    group=f"tinad/{split}/{row.get('test_id')}",
                    meta={
                        "pattern_id": row.get("pattern_id"),
                        "pattern": str(row.get("pattern")),
                        "test_id": row.get("test_id"),
                        "negation_type": negation_type,
                        "semantic_type": semantic_type,
                        "syntactic_scope": syntactic_scope,
                    },
                )
            )
        return examples

    def metric(self, examples: Sequence[Example]) -> TinadMetric:
        from negtrain.metrics.tinad import TinadMetric  # torch: imported when scoring, not when listing

        return TinadMetric(
            gold=[e.label == "True" for e in examples],
            cells=cast(list[str], [e.subset for e in examples]),  # the loader gives every sentence its cell
            patterns=[e.meta["pattern_id"] for e in examples],
            groups=[e.group for e in examples],
            types=[(e.meta["negation_type"], e.meta["semantic_type"], e.meta["syntactic_scope"]) for e in examples],
            cell_names=CELLS,
            label_names=LABELS,
        )
