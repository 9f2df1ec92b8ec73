"""Mixing training sources: per-epoch counts from weights and sizes, and the sampler that draws them.

The semantics are documented on :class:`negtrain.config.MixConfig`. The counts are fixed by the
recipe; which examples fill them is drawn from the seed and the epoch, identically on every rank.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from negtrain.config import MAX_EPOCH_EXAMPLES, MixConfig
from negtrain.core.errors import ConfigError
from negtrain.data.sampler import BatchSampler


def shares(sizes: Sequence[int], weights: Sequence[float], mix: MixConfig) -> np.ndarray:
    """p_i: each source's configured share of an epoch."""
    n = np.asarray(sizes, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    # MixConfig requires a temperature with sampling: temperature.
    power = 1.0 / mix.temperature if mix.sampling == "temperature" and mix.temperature is not None else 1.0
    # In logs: at T = 0.01, n**(1/T) overflows float64 for any source over 1,200 examples.
    with np.errstate(divide="ignore"):
        log_mass = np.log(w) + power * np.log(n)
    mass = np.exp(log_mass - log_mass.max())
    return mass / mass.sum()


def apportion(total: int, p: np.ndarray) -> np.ndarray:
    """Integer counts summing to ``total`` closest to ``total * p`` (largest remainders; ties go
    to the earlier source)."""
    exact = total * p
    counts = np.floor(exact).astype(np.int64)
    short = total - int(counts.sum())
    order = sorted(range(len(p)), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in order[:short]:
        counts[i] += 1
    return counts


def epoch_counts(sizes: Sequence[int], weights: Sequence[float], mix: MixConfig) -> np.ndarray:
    """c_i: how many examples each source contributes to every epoch."""
    p = shares(sizes, weights, mix)
    if mix.epoch == "all":
        return apportion(int(sum(sizes)), p)
    if mix.epoch == "largest":
        big = int(np.argmax(sizes))
        exact = sizes[big] * p / p[big]
        if not exact.sum() <= MAX_EPOCH_EXAMPLES:  # also catches inf and nan
            raise ConfigError(
                f"data.mix.epoch 'largest': one pass over the largest source at these weights makes an epoch "
                f"of {exact.sum():.3g} examples, more than {MAX_EPOCH_EXAMPLES:,}; give the sources closer "
                "weights, or a number of examples as data.mix.epoch"
            )
        counts = np.rint(exact).astype(np.int64)
        counts[big] = sizes[big]
        return counts
    return apportion(int(mix.epoch), p)


def is_plain(sizes: Sequence[int], counts: Sequence[int] | np.ndarray) -> bool:
    """Whether every example is seen exactly once per epoch (then no mixing sampler is needed)."""
    return bool(np.array_equal(np.asarray(sizes), counts))


class MixingBatchSampler(BatchSampler):
    """A :class:`BatchSampler` whose epochs hold ``counts[i]`` examples of source i.

    Sources are consecutive blocks of the training set, in recipe order, of ``source_sizes``.
    """

    def __init__(self, lengths, batch_size: int, *, source_sizes: Sequence[int], counts: Sequence[int], **kwargs) -> None:
        super().__init__(lengths, batch_size, **kwargs)
        if sum(source_sizes) != len(self.lengths):
            raise ValueError(f"source sizes {list(source_sizes)} do not add up to {len(self.lengths)} examples")
        self.source_sizes = [int(n) for n in source_sizes]
        self.counts = [int(c) for c in counts]
        self.starts = np.concatenate([[0], np.cumsum(self.source_sizes)[:-1]]).astype(np.int64)

    def epoch_indices(self, rng: np.random.Generator) -> np.ndarray:
        parts = []
        for start, n, c in zip(self.starts, self.source_sizes, self.counts, strict=False):
            passes, rest = divmod(c, n)
            picks = [rng.permutation(n) for _ in range(passes)]
            picks.append(rng.choice(n, size=rest, replace=False) if rest else np.empty(0, dtype=np.int64))
            parts.append(start + np.concatenate(picks).astype(np.int64))
        order = np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
        return order[rng.permutation(len(order))] if self.shuffle else order

    def num_global_batches(self) -> int:
        return -(-sum(self.counts) // self.batch_size)
