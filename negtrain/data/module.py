"""The LightningDataModule: training sources and evaluation sets, encoded once."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader

from negtrain.benchmarks.base import Benchmark, Example
from negtrain.config import DataConfig
from negtrain.data.collate import PadCollator
from negtrain.data.encoded import EncodedSplit
from negtrain.data.sampler import BatchSampler


@dataclass
class EvalSet:
    """One benchmark split evaluated every epoch."""

    benchmark: Benchmark
    split: str
    examples: list[Example]
    encoded: EncodedSplit

    @property
    def name(self) -> str:
        return f"{self.benchmark.name}/{self.split}"


@dataclass
class TrainSet:
    encoded: EncodedSplit
    extras: dict[str, torch.Tensor]  # per-example training tensors, e.g. target masks
    sources: list[str]  # "<benchmark>/<split>" per source, in recipe order
    source_sizes: list[int]


class NegtrainData(pl.LightningDataModule):
    def __init__(
        self,
        config: DataConfig,
        seed: int,
        pad_id: int,
        train: TrainSet | None,
        eval_sets: Sequence[EvalSet],
        pad_left: bool = False,
        eval_extras: Callable[[EvalSet], dict[str, torch.Tensor]] | None = None,
    ) -> None:
        super().__init__()
        self.config = config
        self.seed = seed
        self.pad_id = pad_id
        self.train = train
        self.eval_sets = list(eval_sets)
        self.pad_left = pad_left
        self.eval_extras = eval_extras

    def _world(self) -> tuple[int, int]:
        trainer = self.trainer
        return (trainer.world_size, trainer.global_rank) if trainer is not None else (1, 0)

    def _loader(self, encoded: EncodedSplit, extras, batch_size: int, shuffle: bool) -> DataLoader:
        world, rank = self._world()
        sampler = BatchSampler(
            encoded.lengths,
            batch_size,
            shuffle=shuffle,
            bucket=self.config.bucket_by_length,
            seed=self.seed,
            num_replicas=world,
            rank=rank,
        )
        return DataLoader(
            range(len(encoded)),
            batch_sampler=sampler,
            collate_fn=PadCollator(encoded, self.pad_id, extras, pad_left=self.pad_left),
            num_workers=self.config.num_workers,
            persistent_workers=self.config.num_workers > 0,
        )

    def train_dataloader(self) -> DataLoader:
        assert self.train is not None, "the recipe has no data.train sources"
        return self._loader(self.train.encoded, self.train.extras, self.config.batch_size, shuffle=True)

    def val_dataloader(self) -> list[DataLoader]:
        return [
            self._loader(s.encoded, self.eval_extras(s) if self.eval_extras else None, self.config.eval_batch_size, shuffle=False)
            for s in self.eval_sets
        ]

    test_dataloader = val_dataloader
