"""The metric state syncs across ranks: a contrast set split over two processes scores whole,
and the held-out masked-LM sums pool over both.

Runs a real two-process gloo group on the CPU.
"""

from __future__ import annotations

import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from negtrain.metrics.grouped import GroupedAccuracy
from negtrain.metrics.mlm import HeldOutMLMMetric
from negtrain.metrics.uncertainty import estimate

COUNT = {"n", "groups_scored"}.__contains__
GOLD = [0, 1, 0, 1, 1, 0, 1]
SUBSETS = ["a", "b", "c", "a", "b", "c", "a"]
GROUPS = ["g1", "g1", "g1", "g2", "g2", "g2", "g3"]
PREDS = [0, 1, 0, 1, 0, 0, 1]  # g2 has one wrong member
# Held-out MLM per example: CE sum, masked tokens, cues right, cues masked.
MLM_VALUES = [[2.0, 2, 1, 1], [3.0, 1, 0, 1], [1.0, 4, 2, 2], [0.5, 1, 1, 1], [6.0, 3, 0, 2], [1.5, 1, 1, 1], [2.0, 4, 1, 2]]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, port: int, out) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        # Rank 0 gets indices 0, 2, 4, 6; rank 1 gets 1, 3, 5 and a padded repeat of 0 (as a
        # distributed sampler pads an uneven split). Every group straddles the ranks.
        idx = [0, 2, 4, 6] if rank == 0 else [1, 3, 5, 0]
        m = GroupedAccuracy(GOLD, SUBSETS, GROUPS)
        m.update(torch.tensor(idx), torch.tensor([PREDS[i] for i in idx]))
        mlm = HeldOutMLMMetric(num_examples=len(MLM_VALUES))
        mlm.update(torch.tensor(idx), torch.tensor([MLM_VALUES[i] for i in idx]))
        out[rank] = {k: float(v) for k, v in m.compute().items()}
        out[f"mlm{rank}"] = {k: float(v) for k, v in mlm.compute().items()}
        # The bootstrap runs on the state compute() scored: every rank's predictions, not this rank's.
        out[f"uncertainty{rank}"] = estimate(m, m.last_outcomes, 200, 0, COUNT).metrics
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
    # Pooled by hand over all seven examples, example 0 counted once despite the padded repeat.
    mlm = {"mlm_loss": 16.0 / 16, "cue_recovery_accuracy": 6 / 10, "n_masked": 16.0, "n_cues": 10.0}
    assert dict(out["mlm0"]) == mlm
    assert dict(out["mlm1"]) == mlm
    whole = estimate(single, single.last_outcomes, 200, 0, COUNT).metrics
    assert out["uncertainty0"] == whole and out["uncertainty1"] == whole
    assert whole["consistency"]["ci95"] is not None
