"""What every benchmark module provides.

A benchmark is one small module that says, in one place: which upstream files it reads, which
splits exist, how raw fields map onto an :class:`Example`, the label set, the stable example ids,
the subset/group tags, and the metric its paper defines.
"""

from __future__ import annotations

import hashlib
import inspect
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

from negtrain.core import labels as nli
from negtrain.benchmarks import rows
from negtrain.benchmarks.files import DataFile
from negtrain.benchmarks.rows import local
from negtrain.core.errors import ConfigError, DataError, did_you_mean, unknown_name
from negtrain.metrics.declared import Declared, count, find


#: The rows :meth:`Benchmark.load` read in this process, by what they depend on (``_load_key``).
_LOADED: dict[tuple, tuple[Example, ...]] = {}


@dataclass(frozen=True, slots=True)
class Example:
    """One benchmark item, already in the benchmark's label space."""

    id: str  # stable across runs and machines, e.g. "scone/test/one_scoped/17"
    inputs: tuple[str, ...]  # NLI: (premise, hypothesis)
    label: str
    subset: str | None = None  # e.g. the ScoNe condition
    group: str | None = None  # members of one contrast set share a group
    meta: Mapping[str, Any] = field(default_factory=dict)


#: Reported by every benchmark answered by greedy generation with an answer rule (a prompt
#: strategy): how many responses no rule could read (scored as wrong), and how many were empty
#: (scored as the rule reads "": ScoNe's "contains yes" reads it as "no"); and by any benchmark
#: a language model scores under ``evaluation.truncate: left``: how many prompts were cut.
GENERATION_METRICS = (count("n_unparsed"), count("n_empty"), count("n_truncated"))


class AnswerKind(str, Enum):
    """What a benchmark's answer is, declared once per benchmark (``Benchmark.answer_type``);
    what a model family can do with each kind is the family's business.

    A ``str`` enum, so the kind reads and writes as its name (``"choice"``) in listings and files."""

    #: A prediction is one of ``labels`` (its id).
    LABEL = "label"
    #: A prediction is a generated answer, scored by ``is_correct``; the metric receives 1 or 0.
    TEXT = "text"
    #: Multiple choice by log-likelihood: the benchmark provides ``context(example)``,
    #: ``choices(example)``, ``target_delimiter`` and ``choice_label(prediction, example)``, and
    #: ``labels`` are the choice indices (see :mod:`negtrain.benchmarks.neqa`).
    CHOICE = "choice"
    #: Cloze probes: a token fills a blank (negated LAMA).
    CLOZE = "cloze"

    @property
    def builds_own_context(self) -> bool:
        """Whether each example brings its own context (choices, a blank), so that no prompt,
        verbalizer or shots apply."""
        return self in (AnswerKind.CHOICE, AnswerKind.CLOZE)

    def __str__(self) -> str:
        return self.value


# What only some benchmarks provide, as protocols rather than base-class members: a benchmark of
# another answer kind has none of them, and a caller that needs them says which it expects.


@runtime_checkable
class ChoiceQuestions(Protocol):
    """What a multiple-choice benchmark (``AnswerKind.CHOICE``: NeQA, ScoNe-NLG) provides."""

    #: What separates the context from a choice when it is scored (lm-eval's target_delimiter).
    target_delimiter: str

    def context(self, example: Example) -> str: ...

    def choices(self, example: Example) -> Sequence[str]: ...

    def choice_label(self, value: str, example: Example) -> str | None: ...


@runtime_checkable
class PerChoiceContexts(Protocol):
    """A multiple-choice benchmark whose choices follow different contexts (NevIR: one query after
    each of two documents): ``choice_contexts(example)[j]`` is what choice j is scored after."""

    def choice_contexts(self, example: Example) -> Sequence[str]: ...


def choice_contexts(bench: ChoiceQuestions, example: Example) -> list[str]:
    """What each choice of ``example`` is scored after: the benchmark's own context for every
    choice, or one per choice where the benchmark gives them (:class:`PerChoiceContexts`)."""
    if isinstance(bench, PerChoiceContexts):
        return list(bench.choice_contexts(example))
    return [bench.context(example)] * len(bench.choices(example))


@runtime_checkable
class WrittenCompletions(Protocol):
    """What a multiple-choice benchmark whose generated completions people judge (ScoNe-NLG)
    provides: the metric its completions report before they are judged."""

    def completions_metric(self, examples: Sequence[Example]) -> Any: ...


class Benchmark(ABC):
    name: ClassVar[str]
    splits: ClassVar[tuple[str, ...]]
    labels: ClassVar[tuple[str, ...]]
    citation: ClassVar[str]
    #: Every metric :meth:`metric` reports, with its direction and kind: the one declaration that
    #: listings, selection, the recorder, reports, model cards and sweeps read (see
    #: :mod:`negtrain.metrics.declared`).
    reported_metrics: ClassVar[tuple[Declared, ...]] = ()

    @classmethod
    def declared(cls, key: str) -> Declared:
        """The declaration of the reported metric ``key``; a name the benchmark does not declare is an error."""
        found = find(cls.reported_metrics, key) or find(GENERATION_METRICS, key)
        if found is None:
            raise ConfigError(f"benchmark '{cls.name}' declares no metric '{key}'{did_you_mean(key, [d.name for d in cls.reported_metrics])}")
        return found

    @classmethod
    def is_higher_better(cls, key: str) -> bool:
        return cls.declared(key).higher_is_better

    @classmethod
    def is_count(cls, key: str) -> bool:
        return cls.declared(key).kind == "count"

    @classmethod
    def declared_in(cls, space: Sequence[str]) -> tuple[Declared, ...]:
        """The metrics reported for predictions in label space ``space``."""
        return tuple(d for d in cls.reported_metrics if d.reported_in(space))
    #: Label spaces predictions may be expressed in, finest first. ``None``: only ``labels``.
    #: A 3-way benchmark whose paper also scores merged, 2-way predictions lists both, so that a
    #: 2-way model is scored on that binary view (see :meth:`scorer`).
    prediction_spaces: ClassVar[tuple[tuple[str, ...], ...] | None] = None

    def spaces(self) -> tuple[tuple[str, ...], ...]:
        return self.prediction_spaces or (tuple(self.labels),)

    #: What an answer is (see :class:`AnswerKind`).
    answer_type: ClassVar[AnswerKind] = AnswerKind.LABEL
    #: Names of ``Example.inputs`` as placeholders of a prompt template, e.g. "{premise}".
    input_names: ClassVar[tuple[str, ...]] = ("premise", "hypothesis")
    #: The input a language-model family builds when the recipe sets no prompt.
    default_prompt: ClassVar[str | None] = None
    #: Per family, a default prompt that replaces ``default_prompt`` for that family.
    family_prompts: ClassVar[Mapping[str, str]] = {}
    #: Label benchmarks scored by a language model: label -> the text that stands for it.
    default_verbalizer: ClassVar[Mapping[str, str] | None] = None

    # ---- the scoring matrix: which model family can score this benchmark, and how ---------
    # Support is derived: a family scores the benchmark when its settings section lists the
    # benchmark's ``answer_type`` in ``answer_kinds`` and ``refuses`` does not name it
    # (negtrain.benchmarks.matrix.unsupported_reason). No builder decides it again.
    #: family -> how that family scores this benchmark (words for ``negtrain evaluate --list``;
    #: they decide nothing).
    how_scored: ClassVar[Mapping[str, str]] = {}
    #: family -> why that family cannot score this benchmark, the one place a benchmark says no:
    #: a refusal where the family's answer kinds would allow it, or this benchmark's wording of
    #: why a family without its answer kind cannot score it.
    refuses: ClassVar[Mapping[str, str]] = {}
    #: What a training source of this benchmark may be selected by (``data.train[].select``):
    #: name -> :class:`negtrain.benchmarks.row_filters.RowFilter`. Empty: no filters.
    source_filters: ClassVar[Mapping[str, Any]] = {}
    @property
    def scored_kind(self) -> AnswerKind:
        """The answer kind the scoring matrix matches against a family's ``answer_kinds``: the
        benchmark's ``answer_type``, except that an open-vocabulary answer (a token string that
        fills a [MASK], negated_probes) is a cloze answer whatever reader scores it."""
        return AnswerKind.CLOZE if self.open_vocabulary else self.answer_type

    #: The splits ``data.eval: all`` and the report card score.
    eval_splits: ClassVar[tuple[str, ...]] = ("test",)
    #: A training split -> the split held out from it: what ``data.eval: all`` and a report card
    #: score instead of ``eval_splits`` for a run that trained on that split (NegNLI: its paper
    #: scores every pair, ``all``, except for a model trained on its 70%, ``train`` -> ``test``).
    held_out_splits: ClassVar[Mapping[str, str]] = {}
    #: What a split is, said in the report card's notes (which set was scored, and why).
    split_descriptions: ClassVar[Mapping[str, str]] = {}
    #: Which splits hold every row of which others: split -> the splits wholly inside it (``all``
    #: holds every split; a split carved from another, ScoNe's ``dev10``, lies inside it). What
    #: keeps test rows out of training and selection reads it (:mod:`negtrain.benchmarks.test_rows`).
    contains: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    #: Splits that share some rows without one holding the other: split -> those splits (either
    #: way round is enough).
    overlaps: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    #: Evaluation-only challenge sets whose name does not say test (MoNLI's ``pmonli``): test rows
    #: wherever they are read.
    evaluation_only_splits: ClassVar[tuple[str, ...]] = ()

    def holds(self, split: str, other: str) -> bool:
        """Whether every row of ``other`` is a row of ``split`` (a split holds itself)."""
        return split == other or other in self.contains.get(split, ())

    def shares_rows(self, split: str, other: str) -> bool:
        """Whether ``split`` and ``other`` have a row in common."""
        return (self.holds(split, other) or self.holds(other, split)
                or other in self.overlaps.get(split, ()) or split in self.overlaps.get(other, ()))

    def prompt_for(self, family: str) -> str | None:
        return self.family_prompts.get(family, self.default_prompt)

    def verbalizer(self) -> dict[str, str] | None:
        return dict(self.default_verbalizer) if self.default_verbalizer is not None else None

    #: Where few-shot examples come from by default: the train split, else the scored split itself
    #: (never the scored example's contrast group).
    def default_shots_split(self, split: str) -> str:
        return "train" if "train" in self.splits else split

    #: Splits that are a paper's fixed set of shots (CondaQA's nine per few-shot split): every
    #: scored example gets the first ``shots`` of them in file order, the same for all, not a
    #: draw per example.
    fixed_shot_splits: ClassVar[tuple[str, ...]] = ()

    #: True when people judge the model's generated text (ScoNe-NLG's completions): a predictions
    #: file may then hold each id's human judgement ``"coherent"`` (true/false, or a list with one
    #: judgement per annotator), scored by the paper's metric in the label spaces of
    #: :meth:`judgement_space` (see :mod:`negtrain.benchmarks.scone_nlg`).
    human_judgements: ClassVar[bool] = False

    def judgement_space(self, annotators: int) -> tuple[str, ...]:
        """The label space of ``annotators`` people's judgements (benchmarks with ``human_judgements``)."""
        raise NotImplementedError(f"benchmark '{self.name}' is not judged by people")

    #: True when a prediction is any token string (scored against the gold string), not one of ``labels``.
    open_vocabulary: ClassVar[bool] = False
    #: How predictions may be spelled, for error messages of `negtrain evaluate`.
    prediction_help: ClassVar[str] = (
        "an NLI label; use entailment, neutral, contradiction or not_entailment "
        "(any case; '-', ' ' or '_'; non-entailment)"
    )

    def normalize_prediction(self, value: Any) -> str | None:
        """A predicted value in canonical form, or None when it is not a valid prediction.

        Label benchmarks accept the common NLI spellings; generative benchmarks any string."""
        if self.generative:
            return value if isinstance(value, str) else None
        return nli.normalize(value) if isinstance(value, str) else None

    @property
    def generative(self) -> bool:
        return self.answer_type is AnswerKind.TEXT

    def prompt_fields(self, example: Example) -> dict[str, str]:
        return dict(zip(self.input_names, example.inputs, strict=False))

    def is_correct(self, prediction: str, example: Example) -> bool:
        """Whether a generated answer is right (generative benchmarks only)."""
        raise NotImplementedError(f"benchmark '{self.name}' predicts labels, not text")

    def check_split(self, split: str) -> None:
        if split not in self.splits:
            raise unknown_name(f"split of benchmark '{self.name}'", split, self.splits)

    @abstractmethod
    def files(self, split: str) -> Sequence[DataFile]:
        """The upstream files this split is read from."""

    @abstractmethod
    def read(self, split: str) -> list[Example]:
        """Read and validate every row of the split; never drop a row silently."""

    def data_fingerprint(self, split: str) -> str:
        """What the rows of ``split`` depend on, without reading them: each data file's path, size
        and modification time, and the code that reads them (this benchmark's module, this one
        and the readers, rows.py). It keys what is cached from the rows (sizes, labels,
        tokenized text), so a changed file or reader is read afresh, and an unchanged one is not
        read at all."""
        self.check_split(split)
        h = hashlib.sha256(f"{self.name}\0{split}\0".encode())
        for file in self.files(split):
            path = local(file)
            stat = path.stat()
            h.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
        for module in dict.fromkeys([inspect.getsourcefile(type(self)), __file__, rows.__file__]):  # in order: the same key in every process
            h.update(Path(module).read_bytes() if module else b"")
        return h.hexdigest()[:32]

    def stream(self, split: str) -> Iterator[Example]:
        """The rows of ``split`` one at a time, validated as :meth:`read` does. A benchmark whose
        files can be large (MNLI) reads them here line by line, and ``read`` is ``list`` of this;
        for the others it is :meth:`read`, whole."""
        return iter(self.read(split))

    def load(self, split: str) -> list[Example]:
        """Every example of ``split``, read once per process: a later call with the data files
        unchanged (same paths, sizes and modification times) gets the rows read the first time,
        in a new list (the examples are frozen, so callers share them safely)."""
        key = self._load_key(split)  # checks the split
        cached = _LOADED.get(key) if key is not None else None
        if cached is None:
            cached = tuple(self._unique_ids(split, self.stream(split)))
            if key is not None:  # rows that come from no file (a test's benchmark) are read every time
                _LOADED[key] = cached
        return list(cached)

    def _load_key(self, split: str) -> tuple | None:
        """What :meth:`load`'s rows depend on: the benchmark, the split, and each data file's
        path (so the data directory), size and modification time; None when it reads no file."""
        self.check_split(split)
        stats = []
        for file in self.files(split):
            path = local(file)  # raises, as reading would, when the file is not there
            stat = path.stat()
            stats.append((str(path), stat.st_size, stat.st_mtime_ns))
        return (type(self), self.name, split, tuple(stats)) if stats else None

    def iter_examples(self, split: str) -> Iterator[Example]:
        """:meth:`load`, one example at a time: what a training source reads without holding it."""
        self.check_split(split)
        return self._unique_ids(split, self.stream(split))

    def _unique_ids(self, split: str, examples: Iterator[Example]) -> Iterator[Example]:
        seen: set[str] = set()
        for ex in examples:
            if ex.id in seen:
                raise DataError(f"benchmark {self.name}/{split}: duplicate example id '{ex.id}'")
            seen.add(ex.id)
            yield ex

    @abstractmethod
    def metric(self, examples: Sequence[Example]):
        """A fresh torchmetrics Metric that scores predictions (label ids) on these examples.

        A benchmark with several :attr:`prediction_spaces` takes a keyword argument
        ``predicted_labels``: the space the prediction ids index (default: ``labels``).
        """

    def scorer(self, examples: Sequence[Example], predicted_labels: Sequence[str] | None = None):
        """The metric for predictions whose ids index ``predicted_labels`` (default: ``labels``)."""
        space = tuple(predicted_labels) if predicted_labels is not None else tuple(self.labels)
        if space == tuple(self.labels):
            return self.metric(examples)
        if space not in self.spaces():
            raise ConfigError(
                f"benchmark '{self.name}' scores predictions in {[list(s) for s in self.spaces()]}, "
                f"not in {list(space)}"
            )
        return self.metric(examples, predicted_labels=space)  # type: ignore[call-arg]  # a benchmark with several spaces takes it (see metric)

    def label_id(self, label: str, where: str) -> int:
        try:
            return self.labels.index(label)
        except ValueError:
            raise DataError(
                f"{where}: label '{label}' is not in {self.name}'s label set {list(self.labels)}"
            ) from None


# --------------------------------------------------------------------------------------------
# NLI benchmarks: one way of scoring and one prompt/verbalizer convention for all of them.

#: How each family scores a premise/hypothesis benchmark.
NLI_SCORING: Mapping[str, str] = {
    "nli": "classification head (labels matched by name; a 3-way head is coarsened on 2-way data)",
    "seq2seq": "log-likelihood of each label's verbalizer as the decoder output (encoder run once)",
    "causal_lm": "log-likelihood of each label's verbalizer as the prompt's continuation (prompt run once)",
}
#: Default LM prompts: the pair as a question whose answer is the verbalizer.
NLI2_PROMPT = '{premise}\nQuestion: Does this imply that "{hypothesis}"? Yes or no?\nAnswer:'
NLI3_PROMPT = '{premise}\nQuestion: Does this imply that "{hypothesis}"? Yes, no, or maybe?\nAnswer:'
NLI2_VERBALIZER: Mapping[str, str] = {"entailment": "yes", "not_entailment": "no"}
NLI3_VERBALIZER: Mapping[str, str] = {"entailment": "yes", "neutral": "maybe", "contradiction": "no"}


def choice_syntax(value: Any) -> str | None:
    """A multiple-choice prediction's syntax: an index (as its label string) or a non-empty text;
    which choice a text names is decided per question (:func:`choice_named`)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    return value if isinstance(value, str) and value.strip() else None


def choice_named(value: str, labels: Sequence[str], choice_texts: Sequence[str]) -> str | None:
    """The label a prediction names for one question: a label itself, or the text of a choice
    (compared without surrounding spaces), as the label of its position; None if neither."""
    stripped = value.strip()
    if stripped in labels:
        return stripped
    for i, text in enumerate(choice_texts):
        if stripped == text.strip():
            return str(i)
    return None


class NliBenchmark(Benchmark):
    """A premise/hypothesis benchmark with NLI labels: scored by every family but ``mlm``, with the
    2-way (yes/no) or 3-way (yes/maybe/no) question prompt and verbalizer for language models."""

    how_scored = NLI_SCORING

    def prompt_for(self, family: str) -> str | None:
        return self.family_prompts.get(family, NLI2_PROMPT if len(self.labels) == 2 else NLI3_PROMPT)

    def verbalizer(self) -> dict[str, str]:
        return dict(NLI2_VERBALIZER if len(self.labels) == 2 else NLI3_VERBALIZER)
