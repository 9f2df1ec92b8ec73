"""A report card knows its process rank from the launcher's environment, read as Lightning reads
it (the same variables, the same order), without importing Lightning."""

from __future__ import annotations

import pytest

from negtrain.core.errors import NegtrainError
from negtrain.core.process_rank import RANK_VARIABLES, process_rank

CASES = [
    {},
    {"RANK": "3"},
    {"LOCAL_RANK": "1"},
    {"SLURM_PROCID": "2"},
    {"JSM_NAMESPACE_RANK": "5"},
    {"SLURM_PROCID": "7", "LOCAL_RANK": "0"},  # SLURM set, yet the launcher's local rank wins
    {"RANK": "4", "LOCAL_RANK": "1", "SLURM_PROCID": "9"},
]


@pytest.mark.parametrize("env", CASES)
def test_the_rank_is_the_one_lightning_reads(env, monkeypatch):
    from lightning_fabric.utilities.rank_zero import _get_rank  # the reference, imported by the test only

    for name in RANK_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert process_rank() == (_get_rank() or 0)


def test_hand_computed_ranks(monkeypatch):
    for name in RANK_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert process_rank() == 0
    monkeypatch.setenv("SLURM_PROCID", "6")
    assert process_rank() == 6
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert process_rank() == 1


def test_a_rank_that_is_no_number_is_one_clear_error(monkeypatch):
    for name in RANK_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RANK", "zero")
    with pytest.raises(NegtrainError, match="RANK='zero' is not a process rank"):
        process_rank()
