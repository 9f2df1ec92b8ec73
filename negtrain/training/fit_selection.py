"""What ``fit`` picks its kept epoch by, and the rule checked on a run's recipe.yaml before
``fit --resume`` rewinds anything (the rule itself: negtrain.benchmarks.test_rows)."""

from __future__ import annotations

from pathlib import Path

from negtrain.benchmarks.test_rows import check_recipe_selection, check_training
from negtrain.core.errors import ConfigError, NegtrainError
from negtrain.models import provenance
from negtrain.models.contract import Built, Selection
from negtrain.recipes import LoadedRecipe, load_recipe
from negtrain.training.build import resolve_selection


def check_resumed_recipe(run_dir: Path) -> None:
    """The selection and training rules on a run's recipe.yaml, before ``fit --resume`` rewinds
    anything: one edited since to select or train on test rows is refused like a new recipe. A
    run that recorded (provenance.json) picking its epoch by the same metric on test, or one made
    before runs recorded their selection, goes on as it began. A recipe.yaml that cannot be read
    is left to the resume's own checks to name."""
    try:
        loaded = load_recipe(str(Path(run_dir) / "recipe.yaml"))
    except (NegtrainError, OSError):
        return
    selection = (provenance.read(Path(run_dir)) or {}).get("selection")
    if not isinstance(selection, dict):  # a run older than the record: it goes on as it began
        return
    if not (selection.get("on_test_split") and selection.get("metric") == loaded.recipe.selection.metric):
        check_recipe_selection(loaded.recipe, str(loaded.path))
    check_training(loaded.recipe, str(loaded.path))


def fit_selection(loaded: LoadedRecipe, built: Built) -> Selection | None:
    """The metric that picks fit's kept epoch (:func:`negtrain.training.build.resolve_selection`);
    only fit selects, so validate and test need no selection metric among their benchmarks. A
    defaulted metric is written into the resolved recipe: recipe.yaml, report, export and the
    report card name it."""
    try:
        selection = resolve_selection(loaded.recipe, built.module.eval_sets)
    except ConfigError as exc:
        raise ConfigError(f"{loaded.path}: {exc}") from exc
    if selection is not None and not loaded.recipe.selection.metric:
        loaded.recipe.selection.metric = selection.monitor
    return selection
