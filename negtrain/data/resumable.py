"""The training DataLoader whose position in the epoch is saved in checkpoints.

Lightning saves and restores a training dataloader's position when the loader has
``state_dict`` / ``load_state_dict`` (its "stateful dataloader" protocol: the state goes into
the fit loop's part of the checkpoint, and is loaded back before the resumed epoch's iterator is
created). A plain DataLoader has neither, so a run resumed from a mid-epoch checkpoint would
replay the epoch from its first batch.

The position is counted here, where batches are handed to the training loop, and not in the
sampler: with dataloader workers the sampler runs ahead of training by the prefetched batches.
Lightning asks for the next batch only when it trains on it (the loader has a length, so its
fetcher does not prefetch), so at a checkpoint ``batches_done`` is exactly the batches trained on.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from torch.utils.data import DataLoader

from negtrain.data.sampler import BatchSampler


class ResumableLoader(DataLoader):
    """A DataLoader over a :class:`BatchSampler` that saves and restores the sampler's position."""

    batch_sampler: BatchSampler  # checked in __init__

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not isinstance(self.batch_sampler, BatchSampler):
            raise TypeError(f"ResumableLoader needs a negtrain BatchSampler, got {type(self.batch_sampler).__name__}")

    def __iter__(self) -> Iterator[Any]:  # type: ignore[override]  # the base iterator's batches, counted by a generator
        sampler: BatchSampler = self.batch_sampler
        # The count starts where the sampler's first pass after a resume starts.
        sampler.batches_done = sampler.resume_at
        for batch in super().__iter__():
            sampler.batches_done += 1  # before handing it out: at the batch's checkpoint it is done
            yield batch

    def state_dict(self) -> dict[str, int]:
        return self.batch_sampler.state_dict()

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.batch_sampler.load_state_dict(state)
