"""A recipe's data, before any model: the resolved plan's training sources (read lazily) and
its eval splits' examples. ``fit``/``validate``/``test`` build on it (negtrain.training.build),
and ``sweep`` reads it to know which metrics a run reports, without loading Lightning or a model."""

from __future__ import annotations

from negtrain.benchmarks.registry import get_benchmark
from negtrain.config import Recipe
from negtrain.core.errors import ConfigError
from negtrain.data.sources import TrainSource
from negtrain.evaluation.plan import EvalPlan, resolve
from negtrain.models.contract import Loaded


def load_data(recipe: Recipe, stage: str, plan: EvalPlan | None = None) -> Loaded:
    """The data of ``plan`` (resolved from ``recipe`` when not given): before any data file or model
    is read, ``all`` expanded, unsupported (family, benchmark) pairs rejected, prompts and
    verbalizers filled in (in the plan's recipe, which recipe.yaml records)."""
    if plan is None:
        plan = resolve(recipe)
        plan.announce()
    recipe = plan.recipe
    cue_corpus = recipe.objective is not None and recipe.objective.cue_masking is not None
    # A cue-masking corpus is built from data.train texts, so its held-out part needs them in every stage.
    train_specs = recipe.data.train if stage == "fit" or cue_corpus else []
    eval_specs = (
        recipe.data.test if stage == "test" and recipe.data.test is not None else recipe.data.eval
    )
    assert isinstance(eval_specs, list)  # `all` was expanded when the recipe was resolved (benchmarks.matrix)
    if stage == "fit" and not train_specs and not cue_corpus:
        raise ConfigError("data.train: `fit` needs at least one training source")
    seen = set()
    for spec in eval_specs:
        variant = getattr(spec, "variant", None)
        if (spec.benchmark, spec.split, variant) in seen:
            twice = f"{spec.benchmark}/{spec.split}" + (f" as variant '{variant}'" if variant else "")
            raise ConfigError(f"data.eval lists {twice} twice (a split evaluated several ways needs a distinct `variant` per entry)")
        seen.add((spec.benchmark, spec.split, variant))
    # Every name and split was checked when the plan was resolved; now the files.
    train = [(get_benchmark(s.benchmark), s.split, getattr(s, "select", None)) for s in train_specs]
    evals = [(get_benchmark(s.benchmark), s.split) for s in eval_specs]
    return Loaded(
        # Lazily: a warm start takes sizes and labels from a cache and tokens from the store.
        train=[(b, split, TrainSource(b, split, select)) for b, split, select in train],
        eval=[(b, split, b.load(split)) for b, split in evals],
        train_specs=list(train_specs),
        eval_specs=list(eval_specs),
    )
