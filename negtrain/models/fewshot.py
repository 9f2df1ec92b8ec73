"""Few-shot prompts: solved examples from a named split put before each scored example.

The draw, per scored example, is deterministic from ``(seed, crc32(example id))``: the same seed
gives the same shots on every machine and in every process, another seed other shots, and one
example's shots do not depend on which other examples are scored (a row limit or a shard changes
nothing). The pool never offers a member of the scored example's contrast group (``Example.group``;
an example without a group is its own group) nor the example itself, so a ScoNe item is never shown
its own contrast set, and a benchmark with no train split (NaN-NLI) can draw from its test split.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np

from negtrain.benchmarks.base import Example
from negtrain.core.errors import ConfigError

#: Between two solved examples, and between the last one and the question.
SHOT_SEPARATOR = "\n\n"


def _group(example: Example) -> str:
    return example.group if example.group is not None else f"id:{example.id}"


def draw_shots(examples: Sequence[Example], pool: Sequence[Example], k: int, seed: int, where: str = "shots",
               fixed: bool = False) -> list[list[int]]:
    """Per example, ``k`` distinct indices into ``pool``, none of them in the example's group.

    ``fixed``: the pool is a paper's fixed shot set (``Benchmark.fixed_shot_splits``): every
    example gets its first ``k`` in file order, and a scored example in their groups is an error."""
    if k == 0:
        return [[] for _ in examples]
    if fixed:
        return _fixed_shots(examples, pool, k, where)
    banned_by_group: dict[str, set[int]] = {}
    by_id: dict[str, int] = {}
    for i, shot in enumerate(pool):
        banned_by_group.setdefault(_group(shot), set()).add(i)
        by_id[shot.id] = i
    out = []
    for ex in examples:
        banned = set(banned_by_group.get(_group(ex), ()))
        if ex.id in by_id:
            banned.add(by_id[ex.id])
        if len(pool) - len(banned) < k:
            raise ConfigError(f"{where}: {k} shots asked, but the pool has only {len(pool) - len(banned)} examples outside the group of {ex.id}")
        rng = np.random.default_rng([seed, zlib.crc32(ex.id.encode("utf-8"))])
        # A prefix of a random order, long enough to hold k allowed ones whatever is banned.
        order = rng.choice(len(pool), size=min(len(pool), k + len(banned)), replace=False)
        out.append([int(i) for i in order if int(i) not in banned][:k])
    return out


def _fixed_shots(examples: Sequence[Example], pool: Sequence[Example], k: int, where: str) -> list[list[int]]:
    if k > len(pool):
        raise ConfigError(f"{where}: {k} shots asked, but the fixed shot set has {len(pool)}")
    picks = list(range(k))
    groups = {_group(pool[j]) for j in picks} | {pool[j].id for j in picks}
    for ex in examples:
        if _group(ex) in groups or ex.id in groups:
            raise ConfigError(f"{where}: the fixed shots include {ex.id} or a member of its group; they would show the answer")
    return [list(picks) for _ in examples]
