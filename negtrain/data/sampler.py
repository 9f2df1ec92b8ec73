"""Batch sampling: shuffling, length bucketing, limits and sharding over ranks, in one place.

Batches are formed globally (identically on every rank, from the seed and the epoch, exactly the
batches one device would take) and then dealt out to the ranks: step ``s`` on ``W`` ranks is the
single device's batches ``s*W ... s*W+W-1``, one per rank. So under DDP each rank gets disjoint
whole batches and every rank steps the same number of times. With ``bucket`` on, examples are
sorted by length inside pools of ``pool_batches`` batches, so a batch holds examples of similar
length and padding stays small, while the order of batches is still shuffled.

A ``limit`` (Lightning's ``limit_*_batches``: a number of batches, or a fraction) is applied to
the single device's batches *before* they are dealt out, so it selects the same examples whatever
the number of ranks.

When the (limited) batches do not divide evenly over the ranks, the ranks left without a batch in
the last step get a *padding* batch: a repeat of real examples, marked ``padding``, so that every
rank still runs the step (DDP's gradient all-reduce needs all of them) while the training loss
gives it zero weight and the run counts only real examples. Evaluation metrics collapse repeated
example indices onto one slot, so padding never counts twice there either.

The sampler's position (its epoch and how many of that epoch's batches were trained on) is part
of a training checkpoint (:meth:`BatchSampler.state_dict`, through
:class:`negtrain.data.resumable.ResumableLoader`), so a run resumed from a mid-epoch checkpoint
continues with the very next batch.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

import numpy as np
import torch
from torch.utils.data import Sampler


class SampledBatch(list):
    """A batch of example indices that knows the epoch it was drawn for.

    Random batch transforms (cue masking, retention draws) seed themselves from (seed, epoch,
    indices), so their draws are the same in any dataloader worker, on any rank and after a
    resume, and still change from epoch to epoch.
    """

    def __init__(self, indices, epoch: int, padding: bool = False) -> None:
        super().__init__(indices)
        self.epoch = epoch
        #: A repeat of real examples that only keeps a rank in step with the others (see module doc).
        self.padding = padding


def kept_batches(n_batches: int, limit: int | float | None) -> int:
    """How many of ``n_batches`` a single device's batches Lightning's ``limit_*_batches`` keeps: an
    int that many, a float that fraction (rounded down), None all."""
    if limit is None:
        return n_batches
    if isinstance(limit, float):
        return int(n_batches * limit)
    return min(n_batches, int(limit))


class BatchSampler(Sampler[list[int]]):
    def __init__(
        self,
        lengths: torch.Tensor | np.ndarray,
        batch_size: int,
        *,
        shuffle: bool,
        bucket: bool,
        seed: int = 0,
        num_replicas: int = 1,
        rank: int = 0,
        pool_batches: int = 50,
        limit: int | float | None = None,
        rows: Sequence[int] | None = None,
    ) -> None:
        self.lengths = np.asarray(lengths)
        #: Only these examples (an evaluation split cut to a fair subset, negtrain.data.row_limit);
        #: None: every example.
        self.rows = None if rows is None else np.asarray(rows, dtype=np.int64)
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.bucket = bucket
        self.seed = seed
        self.num_replicas = num_replicas
        self.rank = rank
        self.pool_batches = pool_batches
        #: Lightning's limit_*_batches semantics on the single device's batches: an int keeps that
        #: many batches, a float that fraction of them (rounded down); None keeps all.
        self.limit = limit
        self.epoch = 0
        #: Batches of ``epoch`` this rank has handed to training (kept by the loader that consumes
        #: them; the sampler itself can run ahead of training when dataloader workers prefetch).
        self.batches_done = 0
        self._resume_at = 0  # batches the next pass skips: set by load_state_dict, used once

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    @property
    def sampler(self) -> BatchSampler:
        # Lightning advances the epoch through ``loader.batch_sampler.sampler.set_epoch``. This
        # batch sampler draws its own order, so it answers for its inner sampler; without this,
        # every epoch would replay epoch 0's batches (the same shuffle, buckets and mix).
        return self

    def epoch_indices(self, rng: np.random.Generator) -> np.ndarray:
        """Which examples this epoch visits, in order. Mixing samplers override this."""
        if self.rows is None:
            n = len(self.lengths)
            return rng.permutation(n) if self.shuffle else np.arange(n)
        return rng.permutation(self.rows) if self.shuffle else self.rows.copy()

    def epoch_plan(self) -> tuple[np.ndarray, np.ndarray]:
        """The epoch's batches as two arrays: ``order``, the examples in batch-forming order, and
        ``batch_order``, the batches in the order they are taken (batch ``j`` is
        ``order[j * batch_size : (j + 1) * batch_size]``). Two arrays, not a list of per-batch
        arrays, so an epoch of millions of examples costs a few bytes per example.
        """
        rng = np.random.default_rng([self.seed, self.epoch])
        order = self.epoch_indices(rng)
        if self.bucket:
            pool = self.batch_size * self.pool_batches
            for start in range(0, len(order), pool):
                chunk = order[start : start + pool]
                # Stable sort keeps the shuffled order among equal lengths. In place: the fancy
                # index copies the pool first.
                order[start : start + pool] = chunk[np.argsort(-self.lengths[chunk], kind="stable")]
        n_batches = -(-len(order) // self.batch_size)
        batch_order = rng.permutation(n_batches) if self.bucket and self.shuffle else np.arange(n_batches)
        return order, batch_order

    def global_batches(self) -> list[np.ndarray]:
        """The epoch's batches, in order, before any limit (see :meth:`epoch_plan`)."""
        order, batch_order = self.epoch_plan()
        return [order[j * self.batch_size : (j + 1) * self.batch_size] for j in batch_order.tolist()]

    def num_global_batches(self) -> int:
        """How many batches :meth:`global_batches` forms, before any limit."""
        return -(-(len(self.lengths) if self.rows is None else len(self.rows)) // self.batch_size)

    def kept_batches(self, n_batches: int) -> int:
        """How many of ``n_batches`` global batches the limit keeps."""
        return kept_batches(n_batches, self.limit)

    def state_dict(self) -> dict[str, int]:
        """Where training stands in the batch order: the seed, the epoch and this rank's batches done."""
        return {"seed": self.seed, "epoch": self.epoch, "batches_done": self.batches_done}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Continue after ``state["batches_done"]`` batches of ``state["epoch"]`` (on the next pass)."""
        if state.get("seed") != self.seed:
            raise ValueError(f"the checkpoint's batch order was drawn with seed {state.get('seed')}, not {self.seed}")
        done = int(state["batches_done"])
        if not 0 <= done <= len(self):
            raise ValueError(f"the checkpoint is {done} batches into an epoch of {len(self)} batches")
        self.epoch = int(state["epoch"])
        self.batches_done = self._resume_at = done

    @property
    def resume_at(self) -> int:
        """Batches the next pass skips: non-zero only for the first pass after a mid-epoch resume."""
        return self._resume_at

    def __iter__(self) -> Iterator[SampledBatch]:
        skip, self._resume_at = self._resume_at, 0
        order, batch_order = self.epoch_plan()
        batch_order = batch_order[: self.kept_batches(len(batch_order))]
        size = self.batch_size
        for position, padding in itertools.islice(self._dealt(len(batch_order)), skip, None):
            j = int(batch_order[position])
            yield SampledBatch(order[j * size : (j + 1) * size].tolist(), self.epoch, padding=padding)

    def _dealt(self, n_batches: int) -> Iterator[tuple[int, bool]]:
        """This rank's batches of the epoch, as positions among the ``n_batches`` kept global
        batches, in order, each with whether it is padding."""
        if self.num_replicas == 1:
            yield from ((position, False) for position in range(n_batches))
            return
        for step in range(0, n_batches, self.num_replicas):
            position = step + self.rank
            if position < n_batches:
                yield position, False
            else:
                # This rank has no batch left in the last step: repeat one (cyclically, in case
                # there are fewer batches than ranks) as zero-weight padding.
                yield position % n_batches, True

    def __len__(self) -> int:
        return -(-self.kept_batches(self.num_global_batches()) // self.num_replicas)
