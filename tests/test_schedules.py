"""negtrain's learning-rate schedules give transformers' values at every step, and their state
round-trips through a checkpoint's state dict, also one written by a transformers scheduler."""

from __future__ import annotations

import pytest
import torch
from transformers import get_scheduler

from negtrain.models.schedules import lr_schedule

HF_NAMES = {"linear": "linear", "constant": "constant_with_warmup", "cosine": "cosine"}


def _optimizer() -> torch.optim.Optimizer:
    return torch.optim.AdamW([torch.nn.Parameter(torch.zeros(2))], lr=3e-5)


def _lrs(scheduler, optimizer, steps: int) -> list[float]:
    out = []
    for _ in range(steps):
        out.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return out


@pytest.mark.parametrize("name", ["linear", "constant", "cosine"])
@pytest.mark.parametrize("warmup,total", [(0, 10), (3, 17), (6, 100), (1, 1)])
def test_every_step_matches_transformers(name, warmup, total):
    ours_opt, hf_opt = _optimizer(), _optimizer()
    ours = lr_schedule(name, ours_opt, warmup, total)
    hf = get_scheduler(HF_NAMES[name], hf_opt, num_warmup_steps=warmup, num_training_steps=total)
    # Past the end too: linear stays at 0, cosine climbs no further than transformers' does.
    assert _lrs(ours, ours_opt, total + 5) == _lrs(hf, hf_opt, total + 5)


def test_hand_computed_values():
    opt = _optimizer()
    lrs = _lrs(lr_schedule("linear", opt, 2, 6), opt, 7)
    assert lrs == pytest.approx([0.0, 1.5e-5, 3e-5, 2.25e-5, 1.5e-5, 0.75e-5, 0.0])
    opt = _optimizer()
    lrs = _lrs(lr_schedule("cosine", opt, 0, 4), opt, 5)
    assert lrs == pytest.approx([3e-5, 3e-5 * (1 + 2**-0.5) / 2, 1.5e-5, 3e-5 * (1 - 2**-0.5) / 2, 0.0], abs=1e-12)


def test_state_resumes_also_from_a_transformers_scheduler():
    hf_opt = _optimizer()
    hf = get_scheduler("linear", hf_opt, num_warmup_steps=2, num_training_steps=10)
    _lrs(hf, hf_opt, 4)
    opt = _optimizer()
    ours = lr_schedule("linear", opt, 2, 10)
    ours.load_state_dict(hf.state_dict())
    opt.load_state_dict(hf_opt.state_dict())
    assert _lrs(ours, opt, 6) == _lrs(hf, hf_opt, 6)
