"""Turning a validated recipe into a LightningModule and a LightningDataModule.

The generic part lives here: benchmark names and splits, the data files, the selection metric.
Everything model-specific is delegated to the family's builder, looked up in
:data:`negtrain.config.FAMILY_SECTIONS` (its builder: negtrain.models.families). All checks that can fail on the user's input run before
the model is loaded, so a mistake costs seconds, not a model download.
"""

from __future__ import annotations

import math

from negtrain.benchmarks.test_rows import choose_selection, reported_splits
from negtrain.config import Recipe
from negtrain.data.mixing import epoch_counts
from negtrain.data.eval_set import EvalSet
from negtrain.core.errors import ConfigError, did_you_mean
from negtrain.core.hub_access import check_hub_model
from negtrain.io.checkpoint_reading import read_checkpoint
from negtrain.core.memory import release_freed_memory
from negtrain.metrics.declared import Declared, declared_key, declared_keys
from negtrain.models.adapters import load_adapter_state
from negtrain.models.base import NegtrainModule
from negtrain.models.contract import Built, Selection
from negtrain.models.data_loading import load_data
from negtrain.models.families import get_family
from negtrain.models.folder_checks import check_adapter_folder, check_model_folder
from negtrain.models.init_from import resolve_init
from negtrain.models.sources import resolve_model_name
from negtrain.evaluation.plan import EvalPlan, resolve
from negtrain.training.checks import check_run


def best_score(checkpoint_callback) -> float | None:
    """The selected checkpoint's metric value; None when there is none to report.

    Lightning ranks a NaN as the worst value (±inf), so a metric that was NaN in every epoch
    arrives as ±inf: reporting that would invent a score.
    """
    score = getattr(checkpoint_callback, "best_model_score", None)
    if score is None or not math.isfinite(float(score)):
        return None
    return float(score)


def declared_metrics(eval_set: EvalSet) -> tuple[Declared, ...]:
    """What an eval set reports, from its benchmark's declarations (in the label space its
    predictions are in), without scoring anything."""
    bench = eval_set.benchmark
    return bench.declared_in(eval_set.predicted_labels or tuple(bench.labels))


def resolve_selection(recipe: Recipe, eval_sets: list[EvalSet], where: str = "") -> Selection | None:
    """The metric that picks the kept epoch (the rule: negtrain.benchmarks.test_rows.choose_selection;
    a named metric was checked by fit or resume before anything was built, the default is checked
    here); None where nothing is selected (no eval set, or ``selection.epoch: last``, which keeps
    the last epoch)."""
    if not eval_sets:
        return None
    declared = {s.name: declared_metrics(s) for s in eval_sets}
    choice = choose_selection(recipe.selection, {name: [d.name for d in ds] for name, ds in declared.items()},
                              reported_splits(recipe), where, named_checked=True)
    if choice is None:  # selection.epoch: last, no metric named
        return None
    found = declared_key(declared, choice.metric)
    if found is None:
        raise ConfigError(f"selection.metric: '{choice.metric}' is not reported by the eval benchmarks{did_you_mean(choice.metric, declared_keys(declared))}")
    if recipe.selection.epoch == "last":
        return None
    return Selection(choice.metric, found.higher_is_better, on_test=choice.on_test is not None, why=choice.on_test)


def build(recipe: Recipe, stage: str = "fit", plan: EvalPlan | None = None) -> Built:
    """The module and data of ``plan`` (resolved from ``recipe`` when not given); ``built.plan``
    holds the resolved recipe, which the run records."""
    builder = get_family(recipe.model.family).build
    check_run(recipe)
    if not recipe.model.init_from:  # with init_from, weights and tokenizer come from that run
        check_hub_model(recipe.model.name)
    check_model_source(recipe)
    if plan is None:
        plan = resolve(recipe)
        plan.announce()
    recipe = plan.recipe
    loaded = load_data(recipe, stage, plan)
    if stage == "fit" and loaded.train:
        # The epoch the weights make (data.mix), sized now: an impossible one fails before the model
        # loads. Sizing a training source reads and validates its files, unless they are unchanged
        # since a run cached what it needs of them.
        for i, (_, _, rows) in enumerate(loaded.train):
            if len(rows) == 0:
                raise ConfigError(f"data.train[{i}]: {getattr(rows, 'name', 'the source')} has no row (its select keeps none)")
        epoch_counts([len(ex) for _, _, ex in loaded.train], [s.weight for s in recipe.data.train], recipe.data.mix)
    try:
        built = builder(recipe, loaded)
    except OSError as exc:  # from_pretrained: no such Hub id or folder, or no weights in it
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"model.name '{recipe.model.name}': cannot load it ({first[:300]})") from exc
    for _, _, rows in loaded.train:
        rows.release()  # the texts are in the token store now
    release_freed_memory()  # what reading and tokenizing the data freed (negtrain.core.memory)
    built.plan = plan
    built.data.set_limits(recipe.trainer.limit_train_batches, recipe.trainer.limit_val_batches)
    return built


def check_model_source(recipe: Recipe) -> None:
    """The model folder (and adapter folder) checked before data is read or weights are loaded:
    one error naming the file and what is wrong (negtrain.models.folder_checks)."""
    cfg = recipe.model
    if cfg.init_from:  # the run's model/ folder: config and tokenizer; the weights are its checkpoint
        check_model_folder(str(resolve_init(cfg.init_from).model_dir), cfg.family, "model.init_from", weights=False)
    else:
        check_model_folder(resolve_model_name(cfg.name), cfg.family, f"model.name '{cfg.name}'")
    if recipe.adapter.type != "none" and recipe.adapter.path is not None:
        check_adapter_folder(recipe.adapter.path)


def reload_weights(module: NegtrainModule, checkpoint: str, given_as: str = "--checkpoint") -> None:
    """``given_as``: how the user named the checkpoint, for the error (a report card's ``--model RUN``)."""
    state = read_checkpoint(checkpoint, given_as)
    if state.get("negtrain_adapter_only"):
        load_adapter_state(module, state["state_dict"], checkpoint)
        return
    try:
        module.load_state_dict(state["state_dict"])
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()[0]
        raise ConfigError(f"{given_as} {checkpoint}: its weights do not fit the recipe's model ({first[:200]})") from exc
