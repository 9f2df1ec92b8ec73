"""Resuming a killed ``fit``: ``python -m negtrain fit --resume RUN_DIR`` (:func:`negtrain.training.run.resume`).

What a checkpoint holds, so that a resumed run finishes with exactly the numbers of an
uninterrupted one (same seed, same machine, deterministic kernels):

- Lightning's own state: weights, optimizer, LR scheduler, epoch and global step, and the state
  of the checkpoint callbacks (the best score so far);
- ``negtrain_resume`` (written by :class:`ResumeState`):

  - ``rng``: the torch (CPU and CUDA), numpy and Python ``random`` states of every rank, captured
    when the checkpoint is written. Lightning does not save them; they are put back just before
    the next training epoch starts, so dropout and anything else random continue as if the run had
    never stopped;
  - ``metrics_lines``: ``metrics.jsonl`` as it was when the checkpoint was written (every line of
    the epochs up to and including the checkpoint's). On resume the file is rewritten to exactly
    these lines, so lines of an epoch that was cut short are dropped;
  - ``sampler``: the seed and the next epoch of the training batch sampler. Resuming refuses a
    ``recipe.yaml`` whose seed was edited since: the remaining epochs would draw other batches
    (and other RNG streams), and the run would match neither seed.

Sampler position: checkpoints are written at epoch ends only, and the batch samplers (bucketing
and mixing alike) draw an epoch's order from ``(seed, epoch)`` alone, with their own generator
(:class:`negtrain.data.sampler.BatchSampler`). Resuming at epoch ``e + 1`` therefore replays
epoch ``e + 1``'s batches exactly; an epoch that was cut short is redone from its start.

The newest complete checkpoint is chosen: every ``checkpoints/*.ckpt`` is opened (with
``weights_only``), those that do not load or hold no ``negtrain_resume`` state are skipped, and the
one with the highest global step wins (``last.ckpt`` on ties). Checkpoints are written atomically
(:mod:`negtrain.io.checkpoints`), so a half-written one only ever exists as a ``*.part``
file, which is never considered.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch

from negtrain.errors import NegtrainError
from negtrain.io.atomic import PART_SUFFIX, write_text
from negtrain.paths import is_inside
from negtrain.recipes import LoadedRecipe, load_recipe

RESUME_KEY = "negtrain_resume"
FORMAT = 1


# ---- RNG states as plain data (loadable with weights_only) -----------------------------------


def rng_state() -> dict[str, Any]:
    np_state = np.random.get_state(legacy=False)
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": {
            "bit_generator": np_state["bit_generator"],
            "key": torch.from_numpy(np_state["state"]["key"].astype(np.int64)),
            "pos": int(np_state["state"]["pos"]),
            "has_gauss": int(np_state["has_gauss"]),
            "gauss": float(np_state["gauss"]),
        },
        "python": random.getstate(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    n = state["numpy"]
    np.random.set_state(
        {
            "bit_generator": n["bit_generator"],
            "state": {"key": n["key"].numpy().astype(np.uint32), "pos": n["pos"]},
            "has_gauss": n["has_gauss"],
            "gauss": n["gauss"],
        }
    )
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _gather(obj: Any) -> list[Any]:
    """Every rank's ``obj`` (a list of one outside distributed runs)."""
    if torch.distributed.is_available() and torch.distributed.is_initialized() and torch.distributed.get_world_size() > 1:
        out: list[Any] = [None] * torch.distributed.get_world_size()
        torch.distributed.all_gather_object(out, obj)
        return out
    return [obj]


class ResumeState(pl.Callback):
    """Saves and restores what Lightning's checkpoint leaves out (see the module docstring)."""

    def __init__(self, run_dir: Path, seed: int) -> None:
        self.run_dir = Path(run_dir)
        self.seed = seed
        self._pending: dict[str, Any] | None = None

    def on_save_checkpoint(self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict[str, Any]) -> None:
        # Every rank runs this hook (dump_checkpoint), so gathering the ranks' states is safe.
        states = _gather(rng_state())
        metrics = self.run_dir / "metrics.jsonl"
        lines = metrics.read_text(encoding="utf-8").splitlines() if trainer.is_global_zero and metrics.is_file() else []
        checkpoint[RESUME_KEY] = {
            "format": FORMAT,
            "rng": states,
            "metrics_lines": lines,
            "sampler": {"seed": self.seed, "next_epoch": trainer.current_epoch + 1},
        }

    def on_load_checkpoint(self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict[str, Any]) -> None:
        self._pending = checkpoint.get(RESUME_KEY)

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # Just before the resumed epoch's first batch (dropout). In an uninterrupted run nothing
        # draws from the global RNGs between the checkpoint and this point either: the data
        # loaders' iterators take their base seed from their own generator (data/module.py), and
        # the batch order comes from the sampler's (seed, epoch) generator.
        if self._pending is None:
            return
        states = self._pending["rng"]
        set_rng_state(states[trainer.global_rank] if trainer.global_rank < len(states) else states[0])
        self._pending = None



# ---- choosing the checkpoint and preparing the run directory --------------------------------


@dataclass
class Candidate:
    path: Path
    epoch: int
    global_step: int
    state: dict[str, Any]


def load_checkpoint(path: Path) -> dict[str, Any]:
    return torch.load(path, map_location="cpu", weights_only=True, mmap=True)


def find_checkpoint(run_dir: Path) -> tuple[Candidate | None, list[str]]:
    """The newest complete, resumable checkpoint of a run, and why others were skipped."""
    folder = Path(run_dir) / "checkpoints"
    found: list[Candidate] = []
    skipped: list[str] = []
    for path in sorted(folder.glob("*.ckpt")) if folder.is_dir() else []:
        if path.name.startswith(".") or path.name.endswith(PART_SUFFIX):
            continue
        if not is_inside(path, folder):
            skipped.append(f"{path.name}: leads outside {folder}; refused")
            continue
        try:
            ckpt = load_checkpoint(path)
        except Exception as exc:  # truncated, not a torch file, or unsafe to load: never resume from it
            skipped.append(f"{path.name}: unreadable ({type(exc).__name__})")
            continue
        state = ckpt.get(RESUME_KEY) if isinstance(ckpt, dict) else None
        if not isinstance(state, dict) or state.get("format") != FORMAT:
            skipped.append(f"{path.name}: no negtrain resume state")
            continue
        found.append(Candidate(path, int(ckpt.get("epoch", -1)), int(ckpt.get("global_step", -1)), state))
    if not found:
        return None, skipped
    best = max(found, key=lambda c: (c.global_step, c.epoch, c.path.name == "last.ckpt"))
    return best, skipped


def is_complete(candidate: Candidate, max_epochs: int, max_steps: int) -> bool:
    return candidate.epoch + 1 >= max_epochs or (max_steps > 0 and candidate.global_step >= max_steps)


def _epoch_of(line: str) -> int:
    """A metrics line's epoch; -1 for a line without one, which every rewind keeps."""
    try:
        value = json.loads(line).get("epoch")
    except (json.JSONDecodeError, AttributeError):
        return -1
    return value if isinstance(value, int) else -1


def rewind(run_dir: Path, candidate: Candidate | None) -> None:
    """Put the run's records back to the checkpoint: ``metrics.jsonl`` as the checkpoint saw it,
    and no prediction files of later epochs (without a checkpoint: no records at all)."""
    run_dir = Path(run_dir)
    lines = list(candidate.state.get("metrics_lines", [])) if candidate else []
    keep_through = candidate.epoch if candidate else -1
    lines = [line for line in lines if _epoch_of(line) <= keep_through]
    metrics = run_dir / "metrics.jsonl"
    if lines:
        write_text(metrics, "".join(line + "\n" for line in lines))
    else:
        metrics.unlink(missing_ok=True)
    predictions = run_dir / "predictions"
    if predictions.is_dir():
        for path in predictions.glob("*-epoch*.jsonl"):
            epoch = path.stem.rpartition("-epoch")[2]
            if epoch.isdigit() and int(epoch) > keep_through:
                path.unlink()
    for leftover in run_dir.rglob(f"*{PART_SUFFIX}"):
        if leftover.is_file():
            leftover.unlink(missing_ok=True)


def check_run_dir(run_dir: Path) -> Path:
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise NegtrainError(f"--resume {run_dir}: no such directory")
    if not (run_dir / "recipe.yaml").is_file():
        raise NegtrainError(f"--resume {run_dir}: not a negtrain run directory (no recipe.yaml)")
    return run_dir


@dataclass
class ResumePlan:
    """What :func:`negtrain.training.run.resume` continues: the run's recipe and checkpoint."""

    loaded: LoadedRecipe
    run_dir: Path
    checkpoint: Path | None  # None: no complete checkpoint yet, so training starts from the beginning


def plan_resume(run_dir: Path) -> ResumePlan | None:
    """Check ``run_dir`` and rewind it to its newest complete checkpoint; None when the run is
    already complete (said on stdout). ``run.resume`` then continues the training."""
    run_dir = check_run_dir(run_dir)
    loaded = load_recipe(str(run_dir / "recipe.yaml"))
    candidate, skipped = find_checkpoint(run_dir)
    for note in skipped:
        print(f"resume: skipping checkpoints/{note}", flush=True)
    recorded_seed = (candidate.state.get("sampler") or {}).get("seed") if candidate else None
    if recorded_seed is not None and recorded_seed != loaded.recipe.seed:
        raise NegtrainError(
            f"--resume {run_dir}: recipe.yaml has seed {loaded.recipe.seed}, but {candidate.path.name} was "
            f"trained with seed {recorded_seed}; put seed: {recorded_seed} back (or start a new run for the new seed)"
        )
    t = loaded.recipe.trainer
    if candidate is not None and is_complete(candidate, t.max_epochs, t.max_steps):
        print(
            f"run {run_dir} is already complete: {candidate.path.name} is the end of epoch {candidate.epoch} "
            f"of {t.max_epochs} (step {candidate.global_step}); nothing to do",
            flush=True,
        )
        return None
    rewind(run_dir, candidate)
    if candidate is None:
        print(f"resume: {run_dir} has no complete checkpoint yet; training it from the start", flush=True)
    else:
        print(
            f"resuming {run_dir} from {candidate.path.name}: end of epoch {candidate.epoch}, step {candidate.global_step}; "
            f"continuing with epoch {candidate.epoch + 1} of {t.max_epochs}",
            flush=True,
        )
    return ResumePlan(loaded, run_dir, candidate.path if candidate else None)
