"""Mixing and sampling at scale: a 1M-row source keeps the documented shares and the per-(seed,
epoch) determinism, in compact arrays; and the batches of a fixed case are the ones the sampler
has always drawn (a change of data layout must not change a run's trajectory)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from negtrain.config import MixConfig
from negtrain.data.mixing import MixingBatchSampler, epoch_counts, shares
from negtrain.data.sampler import BatchSampler

SIZES = [1_000_000, 20_000, 3_000]
WEIGHTS = [1.0, 2.0, 1.0]


def _sampler(mix: MixConfig, seed: int = 3, **kw) -> MixingBatchSampler:
    lengths = np.random.default_rng(0).integers(5, 120, size=sum(SIZES)).astype(np.int32)
    counts = epoch_counts(SIZES, WEIGHTS, mix)
    return MixingBatchSampler(lengths, 64, source_sizes=SIZES, counts=counts, shuffle=True, bucket=True, seed=seed, **kw)


def _per_source(batches) -> np.ndarray:
    order = np.concatenate(batches)
    return np.bincount(np.searchsorted(np.cumsum(SIZES), order, side="right"), minlength=len(SIZES))


@pytest.mark.parametrize("epoch", ["all", "largest", 200_000])
def test_million_row_source_keeps_documented_shares(epoch):
    mix = MixConfig(sampling="temperature", temperature=2.0, epoch=epoch)
    p = shares(SIZES, WEIGHTS, mix)
    # The documented formula: p_i = w_i * n_i^(1/T) / sum_j w_j * n_j^(1/T).
    mass = np.array(WEIGHTS) * np.array(SIZES) ** 0.5
    assert np.allclose(p, mass / mass.sum())
    sampler = _sampler(mix)
    tracemalloc.start()
    batches = sampler.global_batches()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    realised = _per_source(batches)
    assert realised.tolist() == epoch_counts(SIZES, WEIGHTS, mix).tolist()
    total = realised.sum()
    assert np.all(np.abs(realised - p * total) <= 1.0 + (p * total) * 1e-9) or epoch == "largest"
    if epoch == "largest":
        assert realised[0] == SIZES[0] and np.allclose(realised / total, p, atol=1e-5)
    # Compact: index arrays, not a Python int per row (which alone would be 28+ bytes a row).
    assert peak / sum(SIZES) < 64, f"{peak / sum(SIZES):.1f} bytes per row"
    # A source smaller than its count is seen in whole passes plus distinct extras.
    small = np.concatenate(batches)
    small = small[small >= SIZES[0] + SIZES[1]] - SIZES[0] - SIZES[1]
    seen = np.bincount(small, minlength=SIZES[2])
    assert seen.max() - seen.min() <= 1


def test_million_row_mix_is_deterministic_per_seed_and_epoch():
    mix = MixConfig(sampling="temperature", temperature=2.0, epoch=300_000)
    a, b = _sampler(mix), _sampler(mix)
    for epoch in (0, 1):
        a.set_epoch(epoch)
        b.set_epoch(epoch)
        assert all(np.array_equal(x, y) for x, y in zip(a.global_batches(), b.global_batches(), strict=False))
    a.set_epoch(0)
    b.set_epoch(1)
    assert not np.array_equal(np.concatenate(a.global_batches()), np.concatenate(b.global_batches()))
    other = _sampler(mix, seed=4)
    assert not np.array_equal(np.concatenate(a.global_batches()), np.concatenate(other.global_batches()))
    # Two ranks deal out one global epoch: disjoint batches that together are the epoch.
    ranks = [_sampler(mix, num_replicas=2, rank=r) for r in (0, 1)]
    dealt = [list(r) for r in ranks]
    assert len(dealt[0]) == len(dealt[1])
    assert sum(len(b) for r in dealt for b in r) >= 300_000


LENGTHS = np.array([5, 3, 9, 1, 7, 2, 8, 4, 6, 10, 3, 5, 2, 7])


def test_same_seed_gives_the_batches_it_always_gave():
    """Recorded from the sampler before the data-at-scale changes; must never drift."""
    plain = {
        0: [[10, 5], [6, 4, 8, 0], [9, 2, 13, 11], [7, 1, 12, 3]],
        1: [[9, 6, 8, 11], [5, 3], [0, 7, 1, 12], [2, 4, 13, 10]],
    }
    mixed = {
        0: [[8, 11, 13], [9, 4, 13], [12, 5, 11], [10, 7, 10]],
        1: [[5, 13, 11], [7, 13, 12], [2, 12, 6], [11, 10, 1]],
    }
    for epoch in (0, 1):
        s = BatchSampler(LENGTHS, 4, shuffle=True, bucket=True, seed=7, pool_batches=2)
        s.set_epoch(epoch)
        assert [list(b) for b in s] == plain[epoch]
        m = MixingBatchSampler(LENGTHS, 3, source_sizes=[10, 4], counts=[5, 7], shuffle=True, bucket=False, seed=7)
        m.set_epoch(epoch)
        assert [list(b) for b in m] == mixed[epoch]
