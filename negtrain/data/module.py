"""The LightningDataModule: training sources and evaluation sets, encoded once."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader

from negtrain.config import DataConfig
from negtrain.data.collate import BatchIndices, PadCollator
from negtrain.data.corpus_stream import StreamLoader
from negtrain.data.encoded import EncodedSplit
from negtrain.data.eval_set import EvalSet
from negtrain.data.mixing import MixingBatchSampler, epoch_counts, is_plain, shares
from negtrain.data.resumable import ResumableLoader
from negtrain.data.row_limit import limited_rows
from negtrain.data.sampler import BatchSampler
from negtrain.core.errors import DataError


@dataclass
class TrainSet:
    encoded: EncodedSplit | None  # None: a stream (below)
    extras: dict[str, torch.Tensor]  # per-example training tensors, e.g. target masks
    sources: list[str]  # "<benchmark>/<split>" per source, in recipe order
    source_sizes: list[int]
    #: A corpus read as a stream (negtrain.data.corpus_stream.CorpusStream), in place of
    #: ``encoded``: its loader makes, tokenizes and transforms its own batches.
    stream: Any = None


class NegtrainData(pl.LightningDataModule):
    def __init__(
        self,
        config: DataConfig,
        seed: int,
        pad_id: int,
        train: TrainSet | None,
        eval_sets: Sequence[EvalSet],
        pad_left: bool = False,
    ) -> None:
        super().__init__()
        self.config = config
        self.seed = seed
        self.pad_id = pad_id
        self.train = train
        self.eval_sets = list(eval_sets)
        self.pad_left = pad_left
        #: Per training source: its configured share of an epoch and its examples per epoch.
        self.train_shares: list[float] = []
        self.train_counts: list[int] = []
        #: trainer.limit_train_batches / limit_val_batches, applied by the batch samplers to the
        #: batches one device would take, so a limit means the same examples on any number of
        #: ranks (see :meth:`set_limits`). None: no limit.
        self.limit_train: int | float | None = None
        self.limit_eval: int | float | None = None
        if train is not None:
            empty = [name for name, size in zip(train.sources, train.source_sizes, strict=False) if size == 0]
            if empty:
                raise DataError(
                    f"data.train: {', '.join(empty)} has no training examples; check the data files, "
                    "or drop the source from the recipe"
                )
            weights = [s.weight for s in config.train]
            if len(weights) != len(train.source_sizes):
                raise ValueError(f"{len(train.source_sizes)} training sources but {len(weights)} data.train entries")
            self.train_shares = shares(train.source_sizes, weights, config.mix).tolist()
            self.train_counts = epoch_counts(train.source_sizes, weights, config.mix).tolist()

    def set_limits(self, train: int | float | None, eval: int | float | None) -> None:
        """Lightning's ``limit_*_batches`` (an int: that many batches of ``batch_size`` /
        ``eval_batch_size``; a float: that fraction of them), counted in the batches a single
        device takes. Lightning would count them per rank, so 2 ranks would see twice the examples.
        """
        def kept(limit):  # the float 1.0 is "all"; the int 1 is one batch
            return None if limit is None or (isinstance(limit, float) and limit == 1.0) else limit

        self.limit_train, self.limit_eval = kept(train), kept(eval)
        for eval_set in self.eval_sets:  # each record then says what cut it
            eval_set.cut_by = None if self.limit_eval is None else f"trainer.limit_val_batches={self.limit_eval}"

    def _world(self) -> tuple[int, int]:
        trainer = self.trainer
        return (trainer.world_size, trainer.global_rank) if trainer is not None else (1, 0)

    def _loader(self, encoded: EncodedSplit, extras, batch_size: int, shuffle: bool, mixed: bool = False, name: str = "",
                rows: list[int] | None = None) -> DataLoader:
        """``rows``: only these examples (an evaluation split's fair subset under a row limit,
        which then replaces the limit)."""
        world, rank = self._world()
        # Evaluation always sorts by length: its order cannot change a metric (predictions are
        # scored by example index), and batches of equal-length inputs carry almost no padding.
        # For training, bucketing changes the trajectory, so there it is the recipe's choice.
        bucket = self.config.bucket_by_length if shuffle else True
        limit = self.limit_train if shuffle else (None if rows is not None else self.limit_eval)
        common: dict[str, Any] = dict(shuffle=shuffle, bucket=bucket, seed=self.seed, num_replicas=world, rank=rank, limit=limit)
        if mixed and self.train is not None and not is_plain(self.train.source_sizes, self.train_counts):  # mixed: the training loader
            sampler: BatchSampler = MixingBatchSampler(
                encoded.lengths, batch_size, source_sizes=self.train.source_sizes, counts=self.train_counts, **common
            )
        else:
            # Every example once per epoch: exactly the unmixed sampler.
            sampler = BatchSampler(encoded.lengths, batch_size, rows=rows, **common)
        if limit and sampler.kept_batches(sampler.num_global_batches()) == 0:
            setting = "limit_train_batches" if shuffle else "limit_val_batches"
            raise DataError(
                f"trainer.{setting}={limit} keeps none of {name}'s {sampler.num_global_batches()} batches; "
                "give a larger fraction or a number of batches"
            )
        # Training: the loader's position in the epoch goes into checkpoints (mid-epoch resume).
        loader_class = ResumableLoader if shuffle else DataLoader
        return loader_class(
            BatchIndices(len(encoded)),
            batch_sampler=sampler,
            collate_fn=PadCollator(encoded, self.pad_id, extras, pad_left=self.pad_left),
            num_workers=self.config.num_workers,
            persistent_workers=self.config.num_workers > 0,
            # Creating an iterator draws a base seed; from its own generator it leaves the global
            # torch RNG alone, so the RNG state a checkpoint saves is the one the next epoch's
            # first batch sees, whether or not the run was resumed (batches themselves come from
            # the sampler's (seed, epoch) generator).
            generator=torch.Generator().manual_seed(self.seed),
        )

    def train_dataloader(self) -> DataLoader:
        assert self.train is not None, "the recipe has no data.train sources"
        if self.train.stream is not None:
            world, rank = self._world()
            stream = self.train.stream.for_rank(self.config.batch_size, world, rank, self.limit_train)
            if self.limit_train and stream.global_batches() == 0:
                raise DataError(f"trainer.limit_train_batches={self.limit_train} keeps none of the corpus's batches; give a larger fraction or a number of batches")
            return StreamLoader(stream, num_workers=self.config.num_workers)
        assert self.train.encoded is not None  # a training set without a stream is encoded
        return self._loader(self.train.encoded, self.train.extras, self.config.batch_size, shuffle=True, mixed=True, name="the training set")

    def val_dataloader(self) -> list[DataLoader]:
        # Under a row limit each split gives whole contrast groups drawn with the seed, as a
        # report card does (negtrain.data.row_limit), not its first (or shortest) rows.
        return [
            self._loader(s.encoded, None, self.config.eval_batch_size, shuffle=False, name=s.name,
                         rows=limited_rows(s.examples, self.limit_eval, self.config.eval_batch_size, self.seed, s.name))
            for s in self.eval_sets
        ]

    test_dataloader = val_dataloader
