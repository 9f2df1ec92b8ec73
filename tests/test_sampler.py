"""The batch sampler: every example once per epoch, length buckets, determinism, DDP shards."""

from __future__ import annotations

import numpy as np

from negtrain.data.sampler import BatchSampler

LENGTHS = np.random.default_rng(0).integers(5, 200, size=1003)


def _flat(batches):
    return [i for b in batches for i in b]


def test_every_example_exactly_once_with_bucketing():
    s = BatchSampler(LENGTHS, 16, shuffle=True, bucket=True, seed=1)
    flat = _flat(list(s))
    assert sorted(flat) == list(range(len(LENGTHS)))
    assert len(list(s)) == len(s)


def test_bucketed_batches_are_tight():
    s = BatchSampler(LENGTHS, 16, shuffle=True, bucket=True, seed=1)
    bucketed = np.mean([LENGTHS[b].max() - LENGTHS[b].min() for b in s])
    r = BatchSampler(LENGTHS, 16, shuffle=True, bucket=False, seed=1)
    random = np.mean([LENGTHS[b].max() - LENGTHS[b].min() for b in r])
    assert bucketed < random / 5


def test_deterministic_per_seed_and_epoch():
    a = list(BatchSampler(LENGTHS, 16, shuffle=True, bucket=True, seed=3))
    b = list(BatchSampler(LENGTHS, 16, shuffle=True, bucket=True, seed=3))
    c = list(BatchSampler(LENGTHS, 16, shuffle=True, bucket=True, seed=4))
    assert a == b and a != c
    s = BatchSampler(LENGTHS, 16, shuffle=True, bucket=True, seed=3)
    s.set_epoch(1)
    assert list(s) != a


def test_no_shuffle_keeps_order():
    s = BatchSampler(LENGTHS, 100, shuffle=False, bucket=False)
    assert _flat(list(s)) == list(range(len(LENGTHS)))


def test_ranks_get_disjoint_batches_and_equal_steps():
    shards = [list(BatchSampler(LENGTHS, 16, shuffle=True, bucket=True, seed=5, num_replicas=2, rank=r)) for r in (0, 1)]
    assert len(shards[0]) == len(shards[1]) == len(BatchSampler(LENGTHS, 16, shuffle=True, bucket=True, num_replicas=2))
    n_batches = -(-len(LENGTHS) // 16)  # 63: odd, so one batch is repeated as padding
    padded = [tuple(b) for b in shards[0] + shards[1]]
    assert len(padded) == n_batches + 1
    assert len(set(padded)) == n_batches
    assert sorted(set(_flat(shards[0] + shards[1]))) == list(range(len(LENGTHS)))
