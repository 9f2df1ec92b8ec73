"""Every recipe validates, names registered benchmarks and splits, and selects a reported metric."""

from __future__ import annotations

import fnmatch

import pytest

from negtrain.benchmarks.matrix import scorable, trained_splits
from negtrain.benchmarks.registry import get_benchmark
from negtrain.recipes import available_recipes, first_comment_line, load_recipe


@pytest.mark.parametrize("name", sorted(available_recipes()))
def test_recipe_is_consistent(name):
    recipe = load_recipe(name).recipe
    assert first_comment_line(available_recipes()[name])
    evals = (
        scorable(recipe.model.family, trained=trained_splits(recipe.data.train)) if recipe.data.eval == "all" else [(e.benchmark, e.split) for e in recipe.data.eval]
    )
    for bench, split in [*((s.benchmark, s.split) for s in recipe.data.train), *evals, *((s.benchmark, s.split) for s in recipe.data.test or [])]:
        get_benchmark(bench).check_split(split)
    if recipe.selection.metric:
        bench, split, metric = recipe.selection.metric.split("/", 2)
        assert (bench, split) in evals
        patterns = [d.name.split("<")[0] + "*" for d in get_benchmark(bench).reported_metrics]
        assert any(fnmatch.fnmatchcase(metric, p) for p in patterns)
