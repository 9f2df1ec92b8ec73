"""The metric state syncs across ranks: a contrast set split over two processes scores whole.

Runs a real two-process gloo group on the CPU.
"""

from __future__ import annotations

import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from negtrain.metrics.grouped import GroupedAccuracy

GOLD = [0, 1, 0, 1, 1, 0, 1]
SUBSETS = ["a", "b", "c", "a", "b", "c", "a"]
GROUPS = ["g1", "g1", "g1", "g2", "g2", "g2", "g3"]
PREDS = [0, 1, 0, 1, 0, 0, 1]  # g2 has one wrong member


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, port: int, out) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        m = GroupedAccuracy(GOLD, SUBSETS, GROUPS)
        # Rank 0 gets indices 0, 2, 4, 6; rank 1 gets 1, 3, 5 and a padded repeat of 0 (as a
        # distributed sampler pads an uneven split). Every group straddles the ranks.
        idx = [0, 2, 4, 6] if rank == 0 else [1, 3, 5, 0]
        m.update(torch.tensor(idx), torch.tensor([PREDS[i] for i in idx]))
        values = {k: float(v) for k, v in m.compute().items()}
        out[rank] = values
    finally:
        dist.destroy_process_group()


def test_two_rank_sync_equals_single_process():
    single = GroupedAccuracy(GOLD, SUBSETS, GROUPS)
    single.update(torch.arange(len(GOLD)), torch.tensor(PREDS))
    expected = {k: float(v) for k, v in single.compute().items()}
    assert expected["consistency"] == 2 / 3  # g1 and g3 right, g2 not
    assert expected["accuracy"] == 6 / 7

    manager = mp.Manager()
    out = manager.dict()
    mp.start_processes(_worker, args=(_free_port(), out), nprocs=2, join=True, start_method="spawn")
    assert dict(out[0]) == expected
    assert dict(out[1]) == expected
