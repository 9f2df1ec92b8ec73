"""Every recipe validates, names registered benchmarks and splits, and selects a reported metric."""

from __future__ import annotations

import fnmatch

import pytest

from negtrain.benchmarks.registry import get_benchmark
from negtrain.recipes import available_recipes, first_comment_line, load_recipe


@pytest.mark.parametrize("name", sorted(available_recipes()))
def test_recipe_is_consistent(name):
    recipe = load_recipe(name).recipe
    assert first_comment_line(available_recipes()[name])
    for spec in [*recipe.data.train, *recipe.data.eval, *(recipe.data.test or [])]:
        get_benchmark(spec.benchmark).check_split(spec.split)
    if recipe.selection.metric:
        bench, split, metric = recipe.selection.metric.split("/", 2)
        assert any(e.benchmark == bench and e.split == split for e in recipe.data.eval)
        patterns = [d.name.split("<")[0] + "*" for d in get_benchmark(bench).reported_metrics]
        assert any(fnmatch.fnmatchcase(metric, p) for p in patterns)
