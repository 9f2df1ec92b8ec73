"""Which rows are test rows, and the one rule that keeps them out of selection and training.

A split holds test rows *by itself* when it is called test (``scone/test``, ``fewshot_test_1``),
is an evaluation-only challenge set (``monli/pmonli``), or holds every row of such a split
(NegNLI's and negated LAMA's ``all``). For one run, a split also holds test rows when it shares
rows with a split the run reports (``data.eval`` or ``data.test``) that holds them by itself:
NegNLI's ``val15`` lies inside its ``test``, and ``train85`` holds half of ``test``'s groups. Which
splits share rows is each benchmark's declaration (``Benchmark.contains``, ``overlaps``,
``evaluation_only_splits``); this module is the one place that reads it.

The rule: no epoch is picked (:func:`choose_selection`), and no row is trained on
(:func:`check_training`), on a split that holds test rows, unless the recipe says so
(``selection.allow_test_split``, ``data.allow_test_rows``); then every record of the run says so.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from negtrain.benchmarks.base import Benchmark
from negtrain.benchmarks.registry import get_benchmark
from negtrain.config import Recipe, SelectionConfig, eval_set_name, is_test_split, selection_split
from negtrain.core.errors import ConfigError, NegtrainError

#: A benchmark split: (benchmark, split).
Split = tuple[str, str]


def _benchmark(name: str, split: str) -> Benchmark | None:
    """The benchmark that declares ``split``; None for a set no benchmark declares (an objective's
    own eval set, ``cue_corpus/heldout``), which is judged by its split's name alone."""
    try:
        bench = get_benchmark(name)
    except NegtrainError:  # no benchmark of that name
        return None
    return bench if split in bench.splits else None


def own_test_rows(benchmark: str, split: str) -> str | None:
    """Why ``benchmark/split`` holds test rows by itself; None when it does not."""
    if is_test_split(split):
        return f"the test split {benchmark}/{split}"
    bench = _benchmark(benchmark, split)
    if bench is None:
        return None
    if split in bench.evaluation_only_splits:
        return f"{benchmark}/{split}, an evaluation-only challenge set"
    inside = [s for s in bench.splits if s != split and bench.holds(split, s)
              and (is_test_split(s) or s in bench.evaluation_only_splits)]
    return f"{benchmark}/{split}, which holds every row of {benchmark}/{inside[0]}" if inside else None


def run_test_rows(benchmark: str, split: str, reported: Iterable[Split]) -> str | None:
    """Why ``benchmark/split`` holds test rows for a run that reports the splits ``reported``
    (by itself, or shared with a reported split that holds them); None when it does not."""
    own = own_test_rows(benchmark, split)
    if own is not None:
        return own
    bench = _benchmark(benchmark, split)
    if bench is None:
        return None
    for name, other in reported:
        if name == benchmark and other != split and other in bench.splits and own_test_rows(name, other) \
                and bench.shares_rows(split, other):
            how = "which lies inside" if bench.holds(other, split) else "which shares rows with"
            return f"{benchmark}/{split}, {how} {name}/{other} (reported by the run)"
    return None


def reported_splits(recipe: Recipe) -> list[Split]:
    """Every split a run reports: its ``data.eval`` and ``data.test`` entries (``all`` expanded)."""
    data = recipe.data
    if not isinstance(data.eval, list) or data.test == "all":
        from negtrain.evaluation.plan import resolve  # same floor; only for a recipe not yet resolved

        data = resolve(recipe).recipe.data
    entries = [*(data.eval if isinstance(data.eval, list) else []), *(data.test if isinstance(data.test, list) else [])]
    return list(dict.fromkeys((e.benchmark, e.split) for e in entries))


@dataclass(frozen=True)
class SelectionChoice:
    """The metric that picks a run's kept epoch, and whether it picks on test rows (then only
    because ``selection.allow_test_split`` says so)."""

    metric: str
    #: Why the metric's split holds test rows (None: it does not).
    on_test: str | None = None
    #: Eval sets holding test rows that an unset ``selection.metric`` passed over.
    passed_over: tuple[str, ...] = ()


def metric_test_reason(metric: str, reported: Iterable[Split]) -> str | None:
    """Why the split of ``<benchmark>/<split>/<metric>`` holds test rows for the run; None when not."""
    benchmark, _, split = (selection_split(metric) or "").partition("/")
    return run_test_rows(benchmark, split, reported)


def choose_selection(selection: SelectionConfig, sets: Mapping[str, Sequence[str]], reported: Iterable[Split], where: str,
                     *, metric: str | None = None, field: str = "selection.metric", named_checked: bool = False) -> SelectionChoice | None:
    """The selection metric and its check, the one place they are decided (fit, resume, sweep and
    the records read the choice).

    ``sets``: eval set name -> the names of the metrics it reports, in declaration order;
    ``reported``: the splits the run reports; ``metric``/``field``: a metric named elsewhere (a
    sweep's) instead of ``selection.metric``. A named metric on a split holding test rows is refused
    in one line unless ``selection.allow_test_split`` is true. Unset, the first metric of the first
    eval set that holds no test rows is chosen; where every set holds them, the first set's with
    ``allow_test_split``, else one line. None: nothing to select on (no eval set, nothing named, or
    ``selection.epoch: last``, which picks nothing, with no metric named). ``named_checked``: a named
    metric was checked before anything was built (fit, resume: a run begun before the rule goes on
    as it began), so it is only marked here."""
    reported = list(reported)
    at = f"{where}: " if where else ""
    named = metric if metric is not None else selection.metric
    if metric is None and selection.epoch == "last":  # the last epoch is kept: nothing is picked on any split
        return SelectionChoice(named) if named else None
    if named:
        reason = metric_test_reason(named, reported)
        if reason is not None and not selection.allow_test_split and not named_checked:
            split = selection_split(named)
            what = f"the test split {split}, whose numbers the run then reports" if is_test_split(split or "") else reason
            raise ConfigError(
                f"{at}{field}: '{named}' picks on {what}; select on a dev or validation split, keep the last "
                "epoch (selection.epoch: last), or set selection.allow_test_split: true to select on test knowingly "
                "(every record then says so)")
        return SelectionChoice(named, reason)
    candidates = [(name, metrics[0]) for name, metrics in sets.items() if metrics]
    if not candidates:
        return None
    held = {name: metric_test_reason(f"{name}/{first}", reported) for name, first in candidates}
    clean = [(name, first) for name, first in candidates if held[name] is None]
    if clean:
        name, first = clean[0]
        passed = tuple(n for n, _ in candidates[: candidates.index(clean[0])])
        return SelectionChoice(f"{name}/{first}", None, passed)
    if selection.allow_test_split:
        name, first = candidates[0]
        return SelectionChoice(f"{name}/{first}", held[name])
    raise ConfigError(
        f"{at}selection.metric is unset and every eval set holds test rows ({'; '.join(str(r) for r in held.values())}), "
        "so no epoch can be picked on them; name a dev or validation metric (selection.metric), keep the last epoch "
        "(selection.epoch: last), or set selection.allow_test_split: true to select on test knowingly")


def recipe_selection_reason(recipe: Recipe) -> str | None:
    """Why a (resolved) recipe's named selection metric picks on test rows; None when it does not
    (or nothing is selected: ``selection.epoch: last``, no metric)."""
    metric = recipe.selection.metric
    if recipe.selection.epoch != "best" or not metric:
        return None
    return metric_test_reason(metric, reported_splits(recipe))


def check_recipe_selection(recipe: Recipe, where: str) -> None:
    """The selection rule on a recipe's named metric, before anything is built (fit, resume,
    validate and test): see :func:`choose_selection`. An unset metric is chosen when the run is built."""
    if recipe.selection.metric:
        choose_selection(recipe.selection, {}, reported_splits(recipe), where)


def trained_test_rows(recipe: Recipe) -> list[tuple[str, str]]:
    """(training split, reported test split) for each ``data.train`` source that shares rows with a
    split the run reports that holds test rows by itself (NegNLI ``train85`` and ``test``)."""
    reported = [(name, split) for name, split in reported_splits(recipe) if own_test_rows(name, split) is not None]
    out = []
    for source in recipe.data.train:
        bench = _benchmark(source.benchmark, source.split)
        for name, split in reported:
            if name == source.benchmark and (split == source.split or (
                    bench is not None and split in bench.splits and bench.shares_rows(source.split, split))):
                out.append((eval_set_name(source.benchmark, source.split), eval_set_name(name, split)))
                break
    return out


def trained_on_test_note(source: str, reported: str) -> str:
    """What every record of a run that trained on reported test rows says."""
    return f"trained on test rows: data.train {source} shares rows with {reported}, which the run reports (data.allow_test_rows: true)"


def check_training(recipe: Recipe, where: str) -> list[tuple[str, str]]:
    """Refuse, in one line, training on rows of a split the run reports as test, unless
    ``data.allow_test_rows`` is true; returns what was allowed (for the records to say)."""
    found = trained_test_rows(recipe)
    if found and not recipe.data.allow_test_rows:
        source, reported = found[0]
        raise ConfigError(
            f"{where}: data.train: {source} shares rows with {reported}, which the run reports as test: it would be "
            "scored on pairs it trained on; train on a split held out from it (NegNLI: train -> test, train85 -> val15), "
            "report another split, or set data.allow_test_rows: true to do so knowingly (every record then says so)")
    return found


def shared_rows(benchmark: str, trained: str, scored: str) -> tuple[int, int] | None:
    """(how many, of all) examples of ``scored`` are rows of ``trained``, where the benchmark
    declares that the two splits share rows; None where they do not. Rows are matched by id (a
    carved split keeps its rows' ids), else by their inputs and label (CondaQA's few-shot files
    number their rows afresh)."""
    bench = _benchmark(benchmark, trained)
    if bench is None or scored not in bench.splits or not bench.shares_rows(trained, scored):
        return None
    train_rows, scored_rows = bench.load(trained), bench.load(scored)
    ids = {e.id for e in train_rows}
    count = sum(e.id in ids for e in scored_rows)
    if count == 0:
        contents = {(e.inputs, e.label) for e in train_rows}
        count = sum((e.inputs, e.label) in contents for e in scored_rows)
    return (count, len(scored_rows)) if count else None
