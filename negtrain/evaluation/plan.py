"""What a command evaluates, resolved once: :func:`resolve` turns a validated recipe and what the
command asks (:class:`PlanRequest`) into an :class:`EvalPlan`.

``resolve`` is pure: it reads the benchmark table, the prompt strategies and whether data files
can be read, prints nothing and never changes the recipe it is given. The plan holds a new,
resolved recipe (``all`` expanded; each entry's prompt, verbalizer, strategy and shots filled in),
the benchmarks left out with the reason, and what the run is (model, family, precision,
backend). ``fit``, ``validate``, ``test``, a report card, a protocol and a sweep each resolve once
and hand the plan on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from negtrain.core import labels as nli
from negtrain.benchmarks.matrix import Skipped, resolve_benchmarks, unreadable_reason
from negtrain.benchmarks.registry import get_benchmark
from negtrain.config import EvalConfig, Recipe
from negtrain.core.errors import ConfigError

#: A further reason an eval entry cannot be scored by this command (None: it can).
Refusal = Callable[[EvalConfig], "str | None"]


@dataclass(frozen=True)
class PlanRequest:
    """What the command asks beyond the recipe. The defaults are a recipe run as written
    (``fit``, ``validate``, ``test``)."""

    #: A named prompt strategy put on every eval entry whose benchmark has it (``--strategy``).
    strategy: str | None = None
    #: Few-shot examples for every entry that reads a prompt (``--shots``: K or "paper").
    shots: int | Literal["paper"] = 0
    #: The benchmarks were named (not ``all``): a named benchmark without the strategy is an error.
    named: bool = False
    #: A benchmark that cannot be scored is an error instead of a skip (named benchmarks,
    #: ``--strict``, a protocol).
    explicit: bool = False
    #: A benchmark whose data cannot be read under ``all`` is an error (``--strict``).
    strict: bool = False
    #: Where the request comes from, for errors (``evaluate --model``).
    where: str = ""
    #: Further refusals, in order (a served backend's: what a server cannot score).
    refusals: tuple[Refusal, ...] = ()
    #: Drawn shots whose source split cannot be read leave their entry out (a card's ``all``)
    #: instead of failing when the data is loaded.
    skip_unreadable_shots: bool = False
    #: benchmark -> the splits the model was trained on, beyond the recipe's ``data.train`` (a
    #: report card of a run directory): ``all`` scores such a benchmark on its held-out split.
    trained: Mapping[str, Sequence[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class EvalPlan:
    """A resolved recipe and what was left out of it, with why."""

    recipe: Recipe
    skipped: tuple[Skipped, ...] = field(default=())

    @property
    def evals(self) -> tuple[EvalConfig, ...]:
        return tuple(self.recipe.data.eval) if isinstance(self.recipe.data.eval, list) else ()

    @property
    def model(self) -> str:
        return self.recipe.model.name

    @property
    def family(self) -> str:
        return self.recipe.model.family

    @property
    def precision(self) -> str:
        return str(self.recipe.trainer.precision)

    @property
    def backend(self) -> str:
        return self.recipe.evaluation.backend

    def with_evals(self, entries: list[EvalConfig]) -> EvalPlan:
        """The same plan scoring only ``entries`` (a continued card's unfinished ones)."""
        data = self.recipe.data.model_copy(update={"eval": list(entries)})
        return replace(self, recipe=self.recipe.model_copy(update={"data": data}))

    def announce(self) -> None:
        """Print the benchmarks left out, as ``all`` does."""
        for s in self.skipped:
            print(f"all: skipping {s.benchmark}/{s.split}: {s.reason}", flush=True)


def resolve(recipe: Recipe, request: PlanRequest | None = None) -> EvalPlan:
    """The plan for ``recipe`` as ``request`` asks; ``recipe`` itself is left as it was."""
    request = request or PlanRequest()
    resolved = recipe.model_copy(deep=True)  # filled in below; the caller's recipe is not touched
    where = request.where
    skipped: list[Skipped] = []
    try:
        skipped += resolve_benchmarks(resolved, announce=False, trained=request.trained)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}" if where else str(exc)) from exc
    if skipped and request.strict:
        raise ConfigError(f"{where} --strict: cannot read " + "; ".join(f"{s.benchmark}/{s.split} ({s.reason})" for s in skipped))
    data = resolved.data
    assert isinstance(data.eval, list)  # `all` was expanded
    entries: list[EvalConfig] = data.eval
    if request.strategy:
        _apply_strategy(entries, request.strategy, request.named)
    head = [nli.normalize(h) or h for h in getattr(resolved.model, "head_labels", None) or []]
    if head:
        entries = _skip_or_refuse(entries, skipped, request, lambda e: head_cannot_score(head, e.benchmark))
    for refusal in request.refusals:
        entries = _skip_or_refuse(entries, skipped, request, refusal)
    if request.shots:
        for entry in entries:
            # Multiple choice and cloze probes build their own context: no prompt to put shots in.
            if not get_benchmark(entry.benchmark).answer_type.builds_own_context:
                entry.shots = request.shots
    data.eval = entries
    if request.shots or request.strategy:
        try:
            resolve_benchmarks(resolved, announce=False)  # each entry's shots_split, the strategy's verbalizer
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}" if where else str(exc)) from exc
    if request.skip_unreadable_shots:
        data.eval = _skip_or_refuse(entries, skipped, request, _unreadable_shots)
    return EvalPlan(resolved, tuple(skipped))


def head_cannot_score(head: list[str] | None, benchmark: str) -> str | None:
    """Why a classification head with labels ``head`` cannot be scored on ``benchmark``, or None:
    a 2-way head predicts no neutral/contradiction, so a 3-way benchmark scores it only where it
    has a binary view (NaN-NLI); a 3-way head is coarsened on 2-way benchmarks."""
    bench = get_benchmark(benchmark)
    if not head or not all(label in nli.NLI3 + nli.NLI2 for label in bench.labels):
        return None
    spaces = bench.prediction_spaces or (tuple(bench.labels),)
    if any(all(nli.into(h, space) is not None for h in head) for space in spaces):
        return None
    return (f"its labels are {', '.join(bench.labels)} and it has no 2-way view; the model's {len(head)}-way head "
            f"({', '.join(head)}) cannot tell neutral from contradiction")


def _apply_strategy(entries: list[EvalConfig], name: str, named: bool) -> None:
    """``--strategy NAME`` on every eval entry whose benchmark has it (``named``: the benchmarks
    were named, so each must have it)."""
    from negtrain.prompts.strategies import get_strategy, strategies

    applied = 0
    for entry in entries:
        if name not in strategies(entry.benchmark):
            if named and not get_benchmark(entry.benchmark).answer_type.builds_own_context:
                get_strategy(entry.benchmark, name)  # raises: no such strategy (did you mean)
            continue
        entry.strategy, entry.prompt, entry.verbalizer = name, None, None
        applied += 1
    if not applied:
        raise ConfigError(f"--strategy {name}: no benchmark of the card has a strategy of that name (see evaluate --list)")


def _skip_or_refuse(entries: list[EvalConfig], skipped: list[Skipped], request: PlanRequest, why: Refusal) -> list[EvalConfig]:
    """Drop the entries ``why(entry)`` gives a reason for: listed in ``skipped`` under ``all``, an
    error when the benchmark was named."""
    kept = []
    for entry in entries:
        reason = why(entry)
        if reason is None:
            kept.append(entry)
        elif request.explicit:
            raise ConfigError(f"{request.where}: --benchmarks {entry.benchmark}: {reason}")
        else:
            skipped.append(Skipped(entry.benchmark, entry.split, reason))
    if not kept:
        raise ConfigError(f"{request.where}: no benchmark is left to score")
    return kept


def _unreadable_shots(entry: EvalConfig) -> str | None:
    if not isinstance(entry.shots, int) or not entry.shots or not entry.shots_split or entry.shots_split == entry.split:
        return None
    reason = unreadable_reason(get_benchmark(entry.benchmark), entry.shots_split)
    return None if reason is None else f"its shot source {entry.benchmark}/{entry.shots_split} cannot be read: {reason}"
