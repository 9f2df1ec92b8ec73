"""This process's rank in a multi-process run, read from the environment its launcher set.

The same variables, in the same order, as Lightning reads at import (``RANK``, then
``LOCAL_RANK``, ``SLURM_PROCID``, ``JSM_NAMESPACE_RANK``; 0 when none is set), so a report card
knows whether it writes the card's files without importing Lightning: under DDP, Lightning's own
launcher starts each rank with these set, torchrun and SLURM likewise.
"""

from __future__ import annotations

import os

from negtrain.core.errors import NegtrainError

#: Lightning's order: ``SLURM_PROCID`` can be set when SLURM does not manage the processes, so
#: the launcher's ``LOCAL_RANK`` comes first.
RANK_VARIABLES = ("RANK", "LOCAL_RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK")


def process_rank() -> int:
    """The first of :data:`RANK_VARIABLES` that is set, as an int; 0 when none is."""
    for name in RANK_VARIABLES:
        value = os.environ.get(name)
        if value is not None:
            try:
                return int(value)
            except ValueError:
                raise NegtrainError(f"the environment variable {name}={value!r} is not a process rank (a whole number)") from None
    return 0
