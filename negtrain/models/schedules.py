"""Learning-rate schedules: warmup, then linear decay, a constant rate or a half cosine.

The same functions as ``transformers.get_scheduler``'s ``linear``, ``constant_with_warmup`` and
``cosine`` (one half-cycle, no floor), value for value (``tests/test_schedules.py`` compares
them), written out because importing ``transformers.optimization`` takes seconds at every start
(2.7 s measured on a 2-core CPU) for three one-line formulas. Module-level functions bound with
``functools.partial``, as transformers does, so a scheduler's state saves into checkpoints and
loads from those written when transformers made it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR


def _warmup(step: int, warmup: int) -> float:
    return float(step) / float(max(1, warmup))


def _linear(step: int, *, num_warmup_steps: int, num_training_steps: int) -> float:
    if step < num_warmup_steps:
        return _warmup(step, num_warmup_steps)
    return max(0.0, float(num_training_steps - step) / float(max(1, num_training_steps - num_warmup_steps)))


def _constant(step: int, *, num_warmup_steps: int) -> float:
    if step < num_warmup_steps:
        return _warmup(step, num_warmup_steps)
    return 1.0


def _cosine(step: int, *, num_warmup_steps: int, num_training_steps: int) -> float:
    if step < num_warmup_steps:
        return _warmup(step, num_warmup_steps)
    progress = float(step - num_warmup_steps) / float(max(1, num_training_steps - num_warmup_steps))
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))


#: ``model.scheduler`` -> the factor of the learning rate at each optimizer step.
SCHEDULES: dict[str, Callable[..., float]] = {"linear": _linear, "constant": _constant, "cosine": _cosine}


def lr_schedule(name: str, optimizer: Optimizer, warmup_steps: int, total_steps: int) -> LambdaLR:
    """A per-step scheduler for ``model.scheduler`` ``name``: ``warmup_steps`` of linear warmup from
    0, then the schedule over the rest of ``total_steps``."""
    schedule = SCHEDULES[name]
    if name == "constant":
        return LambdaLR(optimizer, partial(schedule, num_warmup_steps=warmup_steps))
    return LambdaLR(optimizer, partial(schedule, num_warmup_steps=warmup_steps, num_training_steps=total_steps))
