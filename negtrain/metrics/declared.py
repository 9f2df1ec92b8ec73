"""What a benchmark declares about each metric it reports: the one place for a metric's name, the
direction in which it is better, whether it is a score or a count, and its role (headline,
consistency, count; report cards read it).

Every reader takes these facts from here, through the benchmark: ``evaluate --list``, checkpoint
selection, the run recorder (``lower_is_better`` in ``metrics.jsonl``), report, model cards and
sweeps. ``tests/test_metric_declarations.py`` checks, for every benchmark and every label space its
predictions may be in, that the declared names are exactly the names its metric computes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal


#: What a metric is for, beyond its direction: "headline" (a benchmark's accuracy-like number,
#: the first column of a report card), "consistency" (all of a contrast set or group right),
#: "baseline" (a number computed from the data, not the model, printed beside the headline:
#: NegNLI's majority baseline), "count" (how many examples or groups were scored), "score" (any
#: other number).
Role = Literal["headline", "consistency", "baseline", "count", "score"]

#: Metric names that are a benchmark's headline, in order of preference when a record has several
#: (NaN-NLI reports F1, and binary F1 for 2-way predictions; the cloze probes their negated top-1
#: error; ScoNe-NLG scored by a model its outcome_choice proxy).
HEADLINE_NAMES = ("accuracy", "f1", "binary_f1", "negated_top1_error", "outcome_choice_accuracy", "paired_accuracy")
#: Metrics that measure consistency over a contrast set or group, by the part of their name before
#: the first '/' (``consistency/scope`` is one of CondaQA's).
CONSISTENCY_BASES = ("consistency", "coherence", "strict", "outcome_choice_consistency")
#: Metrics that are a baseline from the data (the gold labels), by the part of their name before
#: the first '/'; a report card shows the one without a '/' beside the headline, as the paper's MB.
BASELINE_BASES = ("majority_baseline",)


def role_of(name: str) -> Role:
    """The role of the score named ``name`` (a metric key of a record, or a declared name)."""
    if name in HEADLINE_NAMES:
        return "headline"
    if name.split("/")[0] in CONSISTENCY_BASES:
        return "consistency"
    if name.split("/")[0] in BASELINE_BASES:
        return "baseline"
    return "score"


def headline(keys: Iterable[str]) -> str | None:
    """The headline metric among ``keys`` (a record's metric names), by HEADLINE_NAMES' preference."""
    present = set(keys)
    return next((name for name in HEADLINE_NAMES if name in present), None)


def with_role(keys: Iterable[str], role: Role) -> list[str]:
    """The names among ``keys`` with ``role``, in their order."""
    return [k for k in keys if role_of(k) == role]


@dataclass(frozen=True)
class Declared:
    #: The metric's name; a name ending in ``<...>`` stands for a family whose members the data
    #: names, e.g. ``error_rate/construction/<Construction>``.
    name: str
    higher_is_better: bool = True
    #: "score": a value to compare and plot; "count": how many examples or groups were scored.
    kind: Literal["score", "count"] = "score"
    #: Reported only when predictions are in this label space (None: in every space).
    space: tuple[str, ...] | None = None
    #: Further label spaces it is reported in besides ``space`` (ScoNe-NLG's paper metrics are
    #: reported for one annotator's judgements and for two annotators').
    also_in: tuple[tuple[str, ...], ...] = ()
    #: One of a fine-grained breakdown beside the benchmark's own numbers (TINAD's per pattern and
    #: its authors' counts): written to metrics.jsonl and printed by ``evaluate --predictions
    #: --json``, left out of the report's plots and tables, which would drown in them.
    detail: bool = False

    @property
    def role(self) -> Role:
        return "count" if self.kind == "count" else role_of(self.name)

    def reported_in(self, space: Sequence[str]) -> bool:
        """Whether predictions in label space ``space`` get this metric."""
        return self.space is None or tuple(space) == self.space or tuple(space) in self.also_in

    @property
    def family(self) -> bool:
        return self.name.endswith(">") and "<" in self.name

    def matches(self, key: str) -> bool:
        """A family's ``<...>`` parts stand for any non-empty text and its other parts must be there
        as written, in order: ``pattern/<NN>/confusion/<part>/<count>`` matches
        ``pattern/01/confusion/all/TP``."""
        if not self.family:
            return key == self.name
        literal = re.split(r"<[^<>]*>", self.name)
        return re.fullmatch(".+".join(re.escape(part) for part in literal), key, flags=re.DOTALL) is not None


def _spaces(space: Sequence[str] | None, also_in: Iterable[Sequence[str]]) -> dict:
    return {"space": tuple(space) if space is not None else None, "also_in": tuple(tuple(s) for s in also_in)}


def score(name: str, lower_is_better: bool = False, space: Sequence[str] | None = None,
          also_in: Iterable[Sequence[str]] = (), detail: bool = False) -> Declared:
    return Declared(name, higher_is_better=not lower_is_better, detail=detail, **_spaces(space, also_in))


def count(name: str, space: Sequence[str] | None = None, also_in: Iterable[Sequence[str]] = (), detail: bool = False) -> Declared:
    return Declared(name, kind="count", detail=detail, **_spaces(space, also_in))


def scores(names: Iterable[str], space: Sequence[str] | None = None, also_in: Iterable[Sequence[str]] = ()) -> tuple[Declared, ...]:
    return tuple(score(n, space=space, also_in=also_in) for n in names)


def find(declared: Sequence[Declared], key: str) -> Declared | None:
    """The declaration of the metric ``key``: an exact name first, else the family it belongs to."""
    for d in declared:
        if not d.family and d.name == key:
            return d
    for d in declared:
        if d.family and d.matches(key):
            return d
    return None


def declared_key(sets: Mapping[str, Sequence[Declared]], wanted: str) -> Declared | None:
    """The declaration of ``wanted`` (``<set name>/<metric>``) among the eval sets' declared
    metrics (set name -> what it reports), or None when no set reports it."""
    for name in sorted(sets, key=len, reverse=True):  # "scone/test/v1" before "scone/test"
        declared = sets[name]
        if wanted.startswith(name + "/"):
            found = find(declared, wanted[len(name) + 1:])
            if found is not None:
                return found
    return None


def declared_keys(sets: Mapping[str, Sequence[Declared]]) -> list[str]:
    """Every ``<set name>/<metric>`` the sets declare, in declaration order (a family of metrics
    as its pattern, e.g. ``nannli/test/error_rate/construction/<Construction>``)."""
    return [f"{name}/{d.name}" for name, declared in sets.items() for d in declared]
