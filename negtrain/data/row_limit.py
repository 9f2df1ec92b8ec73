"""Which rows of an evaluation split a row limit (``trainer.limit_val_batches``) keeps, in one
place for every path: a report card on any backend and ``fit``/``validate``/``test``'s
per-epoch evaluation.

The limit says how many rows (its batches of ``eval_batch_size``, counted as one device counts
them). Taking the split's first rows would take one condition: ScoNe's files are concatenated by
condition, so its first 64 rows are all ``no_negation`` and no contrast set is complete. The rows
kept are instead whole groups (a contrast set's every member, so every condition it spans), drawn
in a seeded order: the same rows on every backend, rank count and rerun, and as many as fit in
the limit.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from negtrain.core.errors import DataError
from negtrain.data.sampler import kept_batches


def limited_rows(examples: Sequence, limit: int | float | None, batch_size: int, seed: int, name: str = "the split") -> list[int] | None:
    """The rows of ``examples`` the limit keeps, in split order; None when it keeps all of them.

    Whole groups (an example without a group is its own), visited in an order drawn from
    ``seed``, each taken while it fits in the rows the limit allows; at least one group. A limit
    that keeps no batch at all is refused (``name``: the split, for the message)."""
    n = len(examples)
    n_batches = -(-n // batch_size)
    allowed = min(n, kept_batches(n_batches, limit) * batch_size) if limit is not None else n
    if allowed >= n:
        return None
    if allowed == 0:
        raise DataError(f"trainer.limit_val_batches={limit} keeps none of {name}'s {n_batches} batches; "
                        "give a larger fraction or a number of batches")
    members: dict[object, list[int]] = {}
    for i, ex in enumerate(examples):
        members.setdefault(ex.group if ex.group is not None else ("row", i), []).append(i)
    groups = list(members.values())
    kept: list[int] = []
    for g in np.random.default_rng([seed, n]).permutation(len(groups)).tolist():
        if len(kept) + len(groups[g]) <= allowed or not kept:
            kept += groups[g]
        if len(kept) >= allowed:
            break
    return sorted(kept)
