"""Few-shot draws: deterministic per seed, different across seeds, never from the scored group."""

from __future__ import annotations

import pytest

from negtrain.benchmarks.base import Example
from negtrain.benchmarks.registry import get_benchmark
from negtrain.core.errors import ConfigError
from negtrain.models.fewshot import draw_shots


def _groups(examples):
    return {e.id: (e.group or e.id) for e in examples}


@pytest.mark.parametrize("bench,split,pool_split", [("scone", "test", "test"), ("negnli-rte", "test", "all"), ("nannli", "test", "test")])
def test_draws_are_seeded_and_never_from_the_group(data_dir, bench, split, pool_split):
    b = get_benchmark(bench)
    examples, pool = b.load(split), b.load(pool_split)
    group_of = _groups(pool)
    a = draw_shots(examples, pool, 4, seed=1)
    again = draw_shots(examples, pool, 4, seed=1)
    other = draw_shots(examples, pool, 4, seed=2)
    assert a == again
    assert sum(x != y for x, y in zip(a, other, strict=False)) > 0.9 * len(examples)
    for ex, picks in zip(examples, a, strict=False):
        assert len(picks) == 4 and len(set(picks)) == 4
        for j in picks:
            assert pool[j].id != ex.id
            assert group_of[pool[j].id] != (ex.group or ex.id), (ex.id, pool[j].id)
    # One example's shots do not depend on which others are scored.
    assert draw_shots(examples[5:6], pool, 4, seed=1) == a[5:6]


def test_group_exclusion_by_hand():
    pool = [Example(f"p{i}", ("x", "y"), "entailment", group=f"g{i % 3}") for i in range(6)]  # groups g0 g1 g2, two each
    scored = [Example("s", ("x", "y"), "entailment", group="g1")]
    for seed in range(20):
        (picks,) = draw_shots(scored, pool, 4, seed)
        assert sorted(picks) == [0, 2, 3, 5]  # every example outside g1: p1 and p4 never
    with pytest.raises(ConfigError, match="5 shots asked, but the pool has only 4 examples outside the group of s"):
        draw_shots(scored, pool, 5, 0)
    # An example without a group is only kept from itself.
    loner = Example("p0", ("x", "y"), "entailment")
    for seed in range(10):
        (picks,) = draw_shots([loner], pool, 5, seed)
        assert 0 not in picks
