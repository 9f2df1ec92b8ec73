"""The batch sampler: every example once per epoch, length buckets, determinism, DDP shards."""

from __future__ import annotations

import lightning.pytorch as pl
import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

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


def test_only_the_repeated_batch_is_marked_padding():
    shards = [list(BatchSampler(LENGTHS, 16, shuffle=True, bucket=True, seed=5, num_replicas=2, rank=r)) for r in (0, 1)]
    # 63 batches: rank 0 takes batches 0, 2, ..., 62 and rank 1 takes 1, ..., 61, then a repeat.
    assert [b.padding for b in shards[0]] == [False] * 32
    assert [b.padding for b in shards[1]] == [False] * 31 + [True]
    real = [tuple(b) for shard in shards for b in shard if not b.padding]
    assert len(real) == len(set(real)) == 63
    assert sorted(_flat(real)) == list(range(len(LENGTHS)))


def test_fewer_batches_than_ranks_pad_cyclically():
    shards = [list(BatchSampler(np.ones(5), 4, shuffle=False, bucket=False, num_replicas=4, rank=r)) for r in range(4)]
    assert [[list(b) for b in shard] for shard in shards] == [[[0, 1, 2, 3]], [[4]], [[0, 1, 2, 3]], [[4]]]
    assert [shard[0].padding for shard in shards] == [False, False, True, True]


def _one_device(limit, lengths=LENGTHS, batch=16, **kw):
    return list(BatchSampler(lengths, batch, shuffle=True, bucket=True, seed=7, limit=limit, **kw))


def test_a_limit_keeps_the_same_examples_on_any_number_of_ranks():
    full = _one_device(None)
    assert [list(b) for b in _one_device(5)] == [list(b) for b in full[:5]]  # Lightning's meaning on one device
    assert [list(b) for b in _one_device(0.25)] == [list(b) for b in full[:15]]  # int(63 * 0.25) batches
    assert len(_one_device(1000)) == 63
    for limit, kept in [(5, 5), (6, 6), (0.25, 15), (1, 1)]:
        for world in (2, 3):
            samplers = [BatchSampler(LENGTHS, 16, shuffle=True, bucket=True, seed=7, limit=limit, num_replicas=world, rank=r) for r in range(world)]
            shards = [list(s) for s in samplers]
            assert all(len(shard) == len(s) == -(-kept // world) for shard, s in zip(shards, samplers, strict=False))
            real = sorted(tuple(b) for shard in shards for b in shard if not b.padding)
            assert real == sorted(tuple(b) for b in full[:kept]), (limit, world)


class _RecordBatches(pl.LightningModule):
    """Records the example indices of every training batch, per epoch."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.seen: dict[int, list[list[int]]] = {}

    def training_step(self, batch, batch_idx):
        self.seen.setdefault(self.current_epoch, []).append(batch.tolist())
        return (self.weight * 0).sum()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def _fit_epochs(sampler: BatchSampler, epochs: int) -> dict[int, list[list[int]]]:
    module = _RecordBatches()
    loader = DataLoader(range(len(sampler.lengths)), batch_sampler=sampler)
    trainer = pl.Trainer(
        max_epochs=epochs, accelerator="cpu", logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, use_distributed_sampler=False,
    )
    trainer.fit(module, train_dataloaders=loader)
    return module.seen


def test_the_real_trainer_draws_a_new_order_every_epoch():
    # Lightning moves samplers to the next epoch itself; a batch sampler it cannot reach would
    # replay epoch 0 every epoch. The order of epoch e must be exactly (seed, e)'s.
    seen = _fit_epochs(BatchSampler(LENGTHS[:200], 16, shuffle=True, bucket=True, seed=7), epochs=3)
    assert sorted(seen) == [0, 1, 2]
    assert seen[0] != seen[1] and seen[1] != seen[2] and seen[0] != seen[2]
    for epoch, batches in seen.items():
        expected = BatchSampler(LENGTHS[:200], 16, shuffle=True, bucket=True, seed=7)
        expected.set_epoch(epoch)
        assert batches == list(expected)


def test_a_fraction_that_keeps_no_batch_is_an_error():
    from negtrain.config import DataConfig
    from negtrain.data.encoded import EncodedSplit
    from negtrain.data.module import NegtrainData, TrainSet
    from negtrain.core.errors import DataError

    encoded = EncodedSplit.from_lists([[1, 2, 3]] * 40, None)
    train = TrainSet(encoded, extras={}, sources=["monli/train"], source_sizes=[40])
    data = NegtrainData(DataConfig(train=[{"benchmark": "monli", "split": "train"}], batch_size=8), 0, 0, train, [])
    data.set_limits(0.1, None)  # int(5 batches * 0.1) = 0
    with pytest.raises(DataError, match=r"limit_train_batches=0.1 keeps none of the training set's 5 batches"):
        data.train_dataloader()
    data.set_limits(0.2, None)
    batches = list(data.train_dataloader())
    assert [len(b["index"]) for b in batches] == [8] and batches[0]["real"].all()
    data.set_limits(1, None)  # the int 1 is one batch, not "all"
    assert len(data.train_dataloader()) == 1
    data.set_limits(1.0, None)
    assert len(data.train_dataloader()) == 5


def _loader(sampler: BatchSampler, workers: int = 0):
    from negtrain.data.collate import BatchIndices
    from negtrain.data.resumable import ResumableLoader

    return ResumableLoader(BatchIndices(len(LENGTHS)), batch_sampler=sampler, collate_fn=list, num_workers=workers)


def test_a_loaded_position_continues_with_the_next_batch():
    full = BatchSampler(LENGTHS, 16, shuffle=True, bucket=True, seed=5, num_replicas=2, rank=1)
    full.set_epoch(3)
    expected = [list(b) for b in full]
    resumed = BatchSampler(LENGTHS, 16, shuffle=True, bucket=True, seed=5, num_replicas=2, rank=1)
    resumed.load_state_dict({"seed": 5, "epoch": 3, "batches_done": 7})
    assert [list(b) for b in resumed] == expected[7:]
    # Once: the next pass (the next epoch, or the same one again) is whole.
    assert [list(b) for b in resumed] == expected
    with pytest.raises(ValueError, match="seed 6, not 5"):
        resumed.load_state_dict({"seed": 6, "epoch": 3, "batches_done": 7})
    with pytest.raises(ValueError, match="100 batches into an epoch of 32 batches"):
        resumed.load_state_dict({"seed": 5, "epoch": 3, "batches_done": 100})


@pytest.mark.parametrize("workers", [0, 2])
def test_the_loader_counts_batches_handed_out_not_prefetched(workers):
    """With workers the sampler runs ahead; the position saved is what training received."""
    sampler = BatchSampler(LENGTHS, 16, shuffle=True, bucket=True, seed=5)
    sampler.set_epoch(2)
    loader = _loader(sampler, workers)
    it = iter(loader)
    got = [next(it) for _ in range(5)]
    state = loader.state_dict()
    assert state == {"seed": 5, "epoch": 2, "batches_done": 5}
    rest = list(it)
    resumed = _loader(BatchSampler(LENGTHS, 16, shuffle=True, bucket=True, seed=5), workers)
    resumed.load_state_dict(state)
    again = list(resumed)
    assert [list(b) for b in again] == [list(b) for b in rest]
    assert resumed.state_dict() == {"seed": 5, "epoch": 2, "batches_done": len(sampler)}
    assert [list(b) for b in got + rest] == [list(b) for b in sampler]
