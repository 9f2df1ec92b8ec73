"""W&B sweeps over recipe keys.

A recipe's ``sweep:`` section names a method, the recipe keys to vary (dotted, as on the command
line) and the metric to optimise. :func:`sweep_config` turns it into a W&B sweep configuration
whose program is ``negtrain fit`` on the same recipe: the agent appends each trial's parameters as
``--key=value``, which :func:`negtrain.recipes.parse_overrides` reads as overrides.

Everything that could make a trial fail on its input is checked here, when the sweep is created:
every swept key with every value (or both ends of a range) is applied to the recipe and validated,
and the metric must be one the recipe's eval benchmarks report. Its goal (maximize or minimize)
comes from the metric's declaration, never from the user.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from collections.abc import Sequence
from typing import Any

from negtrain.benchmarks.test_rows import SelectionChoice, choose_selection, reported_splits
from negtrain.config import Recipe, SweepParameter, eval_set_name, load_yaml, validate_recipe
from negtrain.core.errors import ConfigError, did_you_mean
from negtrain.metrics.declared import Declared, declared_key
from negtrain.recipes import LoadedRecipe, apply_overrides, override_pairs


#: The most trials one ``sweep --local`` runs: each is a whole ``fit``, so more is a typo (or a
#: job for W&B agents on many machines).
MAX_LOCAL_TRIALS = 10_000


@dataclass(frozen=True)
class SweepMetric:
    name: str
    goal: str  # "maximize" | "minimize"


def available_metrics(recipe: Recipe) -> dict[str, Declared]:
    """Every ``<benchmark>/<split>/<metric>`` a run of the recipe reports -> its declaration (a
    family of metrics as its pattern, e.g. ``.../error_rate/construction/<Construction>``).

    From the benchmarks' declarations; for an NLI model the head's labels (its config) decide
    which label space a benchmark is scored in, as in training (a 2-way model gets NaN-NLI's
    binary metrics only), which needs the benchmark files read, but no weights loaded.
    """
    from negtrain.models.data_loading import load_data

    loaded = load_data(recipe, "fit")
    spaces: Sequence[tuple[str, ...] | None] = [None] * len(loaded.eval)
    if recipe.model.has_head:  # the head's labels decide the prediction spaces
        from negtrain.models.nli_head import prediction_spaces

        try:
            spaces = prediction_spaces(recipe, [b for b, _, _ in loaded.train], [b for b, _, _ in loaded.eval])
        except OSError:  # the model's config cannot be read here (a Hub id, offline): every space
            pass
    available: dict[str, Declared] = {}
    for (bench, split, _), spec, space in zip(loaded.eval, loaded.eval_specs, spaces, strict=False):
        name = eval_set_name(bench.name, split, getattr(spec, "variant", None))  # as the run's metric keys spell it
        for d in bench.declared_in(space if space is not None else tuple(bench.labels)):
            available[f"{name}/{d.name}"] = d
    return available


def resolve_metric(recipe: Recipe) -> SweepMetric:
    """The metric a sweep optimises, which every trial also selects its epoch by: ``sweep.metric``,
    else ``selection.metric``, else the selection default, each under the one selection rule
    (negtrain.benchmarks.test_rows.choose_selection)."""
    assert recipe.sweep is not None
    available = available_metrics(recipe)
    if not available:
        raise ConfigError("sweep: the recipe has no data.eval benchmarks, so there is no metric to optimise")
    sets: dict[str, list[Declared]] = {}
    for key, d in available.items():
        sets.setdefault(key[: -len(d.name) - 1], []).append(d)
    reported = reported_splits(recipe)
    names = {name: [d.name for d in ds] for name, ds in sets.items()}
    for field, named in (("sweep.metric", recipe.sweep.metric), ("selection.metric", recipe.selection.metric)):
        if named and declared_key(sets, named) is None:
            raise ConfigError(f"{field}: '{named}' is not reported by the eval benchmarks{did_you_mean(named, available)}")
    if recipe.sweep.metric:
        choose_selection(recipe.selection, names, reported, "sweep", metric=recipe.sweep.metric, field="sweep.metric")
    # A named selection.metric is checked too, though the trials select by the sweep's metric.
    chosen = choose_selection(recipe.selection, names, reported, "sweep")
    if recipe.sweep.metric:
        chosen = SelectionChoice(recipe.sweep.metric)
    assert chosen is not None  # there are eval sets
    found = declared_key(sets, chosen.metric)
    assert found is not None  # a named metric was checked above; a default is a declared one
    return SweepMetric(chosen.metric, "maximize" if found.higher_is_better else "minimize")


def _candidates(param: SweepParameter) -> list[Any]:
    if param.values is not None:
        return list(param.values)
    if param.value is not None:
        return [param.value]
    assert param.min is not None and param.max is not None
    if param.min > param.max:
        raise ValueError(f"min {param.min} is above max {param.max}")
    if param.distribution == "int_uniform" or (param.distribution is None and float(param.min).is_integer() and float(param.max).is_integer()):
        return [int(param.min), int(param.max)]
    return [param.min, param.max]


def check_parameters(raw: dict[str, Any], recipe: Recipe, where: str) -> None:
    """Apply every swept key with each of its candidate values and validate the result."""
    assert recipe.sweep is not None
    for key, param in recipe.sweep.parameters.items():
        if key.split(".")[0] == "sweep":
            raise ConfigError(f"sweep.parameters.{key}: a sweep cannot vary its own section")
        try:
            candidates = _candidates(param)
        except ValueError as exc:
            raise ConfigError(f"sweep.parameters.{key}: {exc}") from exc
        for value in candidates:
            try:
                validate_recipe(apply_overrides(raw, {key: value}), where)
            except ConfigError as exc:
                raise ConfigError(f"sweep.parameters.{key} = {value!r} would fail every trial: {exc}") from exc


def _parameter_dict(param: SweepParameter) -> dict[str, Any]:
    return {k: v for k, v in param.model_dump(mode="json").items() if v is not None}


def sweep_config(loaded: LoadedRecipe, recipe_arg: str, fixed_args: list[str], raw: dict[str, Any] | None = None) -> dict[str, Any]:
    """The W&B sweep configuration for ``loaded`` (which must have a ``sweep:`` section).

    ``recipe_arg`` is how trials name the recipe (``--recipe``); ``fixed_args`` are overrides given
    to ``negtrain sweep`` itself, passed to every trial before the swept ``${args}``.
    """
    recipe = loaded.recipe
    if recipe.sweep is None:
        raise ConfigError(f"recipe '{loaded.name}' has no sweep: section (see `negtrain sweep --help`)")
    if not recipe.data.train:
        raise ConfigError("sweep: trials run `negtrain fit`, which needs data.train sources")
    if raw is None:
        raw = load_yaml(loaded.path)
    check_parameters(raw, recipe, f"{loaded.path} (sweep)")
    metric = resolve_metric(recipe)
    given = dict(override_pairs(fixed_args)).get("selection.metric")
    if given is not None and given != metric.name:
        # Trials select by the sweep's metric: a selection.metric given here would be replaced unsaid.
        raise ConfigError(f"sweep: --selection.metric={given} differs from the sweep's metric {metric.name}, by which every trial "
                          f"keeps its epoch; set --sweep.metric={given} instead")
    forced = {}
    if recipe.logger.backend != "wandb":
        # Trials report to the sweep through W&B, whatever the recipe says for single runs.
        forced["logger.backend"] = "wandb"
    if metric.name != recipe.selection.metric:
        # Trials keep (and report as their summary value) the best epoch by the swept metric.
        forced["selection.metric"] = metric.name
    # A trial gets each key once (an override given twice is an error): a fixed override of a key
    # the sweep varies gives way to the agent's value, as the sweep means, and one of a key set
    # above to the sweep's setting.
    args = [f"--{k}={v}" for k, v in override_pairs(fixed_args) if k not in recipe.sweep.parameters and k not in forced]
    args += [f"--{k}={v}" for k, v in forced.items()]
    config: dict[str, Any] = {
        "name": f"{loaded.name}-sweep",
        # The agent reads `program` even though the command below does not use ${program}.
        "program": "negtrain",
        "project": recipe.logger.project,
        "method": recipe.sweep.method,
        "metric": {"name": metric.name, "goal": metric.goal},
        "parameters": {k: _parameter_dict(p) for k, p in recipe.sweep.parameters.items()},
        "command": ["${env}", "${interpreter}", "-m", "negtrain", "fit", "--recipe", recipe_arg, *args, "${args}"],
    }
    if recipe.logger.entity:
        config["entity"] = recipe.logger.entity
    if recipe.sweep.run_cap:
        config["run_cap"] = recipe.sweep.run_cap
    return config


def agent_command(config: dict[str, Any], sweep_id: str) -> str:
    path = "/".join(p for p in (config.get("entity"), config.get("project"), sweep_id) if p)
    return f"wandb agent {path}" if "<" in sweep_id else shlex.join(["wandb", "agent", path])
