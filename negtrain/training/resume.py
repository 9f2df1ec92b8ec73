"""Resuming a killed ``fit``: ``python -m negtrain fit --resume RUN_DIR`` (:func:`negtrain.training.run.resume`).

What a checkpoint holds, so that a resumed run finishes with exactly the numbers of an
uninterrupted one (same seed, same machine, deterministic kernels):

- Lightning's own state: weights, optimizer, LR scheduler, epoch and global step, and the state
  of the checkpoint callbacks (the best score so far);
- ``negtrain_resume`` (written by :class:`ResumeState`):

  - ``rng``: the torch (CPU and CUDA), numpy and Python ``random`` states of every rank, captured
    when the checkpoint is written. Lightning does not save them; they are put back just before
    training continues (the resumed epoch's start, or its next batch for a mid-epoch checkpoint),
    so dropout and anything else random continue as if the run had never stopped;
  - ``metrics_lines``: ``metrics.jsonl`` as it was when the checkpoint was written (every line of
    the epochs up to and including the checkpoint's). On resume the file is rewritten to exactly
    these lines, so lines of an epoch that was cut short are dropped;
  - ``sampler``: the seed and the next epoch of the training batch sampler. Resuming refuses a
    ``recipe.yaml`` whose seed was edited since: the remaining epochs would draw other batches
    (and other RNG streams), and the run would match neither seed;
  - ``position``: the epoch, and how many of its batches were trained when the checkpoint was
    written (all of them for an epoch-end checkpoint).

- the state of :class:`~negtrain.training.recorder.RunRecorder`: the running counts and loss of
  the epoch so far, per rank, so the epoch's line in ``metrics.jsonl`` covers the batches before
  a mid-epoch checkpoint too.

Sampler position: the batch samplers (bucketing and mixing alike) draw an epoch's order from
``(seed, epoch)`` alone, with their own generator (:class:`negtrain.data.sampler.BatchSampler`),
and the training loader's position in that order (epoch and batches done) is saved in Lightning's
loop state (:class:`negtrain.data.resumable.ResumableLoader`). A run resumed from an epoch-end
checkpoint replays the next epoch's batches exactly; one resumed from a mid-epoch checkpoint
(``trainer.checkpoint_every_n_steps``, or a stop signal: :mod:`negtrain.training.preemption`)
continues with the batch after the last one trained. Random batch transforms seed themselves
from ``(seed, epoch, indices)``, so their draws are the same after a resume. A streamed corpus
(:mod:`negtrain.data.corpus_stream`) keeps the same protocol: its loader's state is the epoch,
the batches trained, the training lines consumed and the byte offset of the shuffle window a
resume re-reads; a checkpoint of a changed corpus file is refused.

Epoch-end checkpoints are settled on load (:func:`settle_epoch_end`): Lightning writes them
between counting the epoch processed and completed, which it resumes correctly only when the run
is bounded by epochs alone.

The newest checkpoint is chosen: every ``checkpoints/*.ckpt`` is opened (with ``weights_only``)
and the one with the highest global step wins (``last.ckpt`` on ties). Checkpoints are written
atomically (:mod:`negtrain.io.checkpoints`), so a half-written one only ever exists as a
``*.part`` file, which is never considered; any other damage (a truncated or foreign checkpoint,
a folder named ``last.ckpt``, a missing ``recipe.yaml``, ...) is one error line before any work
(:func:`check_run_dir`, :func:`find_checkpoint`). A run directory can be moved or copied between
runs: the checkpoint callbacks re-base their record of the best checkpoint onto the directory's
new place (:mod:`negtrain.training.checkpointing`).
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch

from negtrain.core.errors import NegtrainError
from negtrain.io.atomic import PART_SUFFIX, write_text
from negtrain.core.paths import is_inside
from negtrain.recipes import LoadedRecipe, load_recipe
from negtrain.training.epochs import epoch_label
from negtrain.training.resume_records import RUN_FOLDER, check_resumable

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


def gather(obj: Any) -> list[Any]:
    """Every rank's ``obj`` (a list of one outside distributed runs)."""
    if torch.distributed.is_available() and torch.distributed.is_initialized() and torch.distributed.get_world_size() > 1:
        out: list[Any] = [None] * torch.distributed.get_world_size()
        torch.distributed.all_gather_object(out, obj)
        return out
    return [obj]


def _as_int(n: float | int) -> int:
    return int(n) if n != float("inf") else -1


class ResumeState(pl.Callback):
    """Saves and restores what Lightning's checkpoint leaves out (see the module docstring)."""

    def __init__(self, run_dir: Path, seed: int) -> None:
        self.run_dir = Path(run_dir)
        self.seed = seed
        self._pending: dict[str, Any] | None = None

    def on_save_checkpoint(self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict[str, Any]) -> None:
        # Every rank runs this hook (dump_checkpoint), so gathering the ranks' states is safe.
        states = gather(rng_state())
        metrics = self.run_dir / "metrics.jsonl"
        lines = metrics.read_text(encoding="utf-8").splitlines() if trainer.is_global_zero and metrics.is_file() else []
        checkpoint[RESUME_KEY] = {
            "format": FORMAT,
            "rng": states,
            "metrics_lines": lines,
            "sampler": {"seed": self.seed, "next_epoch": trainer.current_epoch + 1},
            # Where in the epoch the checkpoint was written (the batch order itself is in
            # Lightning's loop state, from the training loader): mid-epoch, or at its end.
            "position": {
                "epoch": trainer.current_epoch,
                "batches_done": trainer.fit_loop.epoch_loop.batch_progress.current.processed,  # type: ignore[attr-defined]  # Lightning annotates the base tracker; this one is a _ProcessedTracker
                "epoch_batches": _as_int(trainer.num_training_batches),
            },
        }
        loader = trainer.train_dataloader
        if loader is not None and hasattr(loader, "state_dict"):
            # The batch sampler's position (data/resumable.py). Lightning saves it as well, but
            # restores it only when the loader is built after the checkpoint is loaded, which the
            # LR schedule's step estimate (built first) prevents; so it is put back here.
            checkpoint[RESUME_KEY]["loader"] = loader.state_dict()

    def on_load_checkpoint(self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict[str, Any]) -> None:
        self._pending = checkpoint.get(RESUME_KEY)
        # Called before Lightning restores its loops from the same dict, so the fix lands in time.
        settle_epoch_end(checkpoint.get("loops"))

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # Mid-epoch: the loader continues after the batches already trained. Its iterator was
        # created lazily (data/resumable.py), so this lands before its first batch.
        loader_state = (self._pending or {}).get("loader")
        position = (self._pending or {}).get("position") or {}
        mid_epoch = position.get("epoch") == trainer.current_epoch and position.get("batches_done", 0) < position.get("epoch_batches", 0)
        if loader_state and mid_epoch and trainer.train_dataloader is not None and hasattr(trainer.train_dataloader, "load_state_dict"):
            trainer.train_dataloader.load_state_dict(loader_state)

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # Just before the resumed epoch's first batch (dropout). In an uninterrupted run nothing
        # draws from the global RNGs between the checkpoint and this point either: the data
        # loaders' iterators take their base seed from their own generator (data/module.py), and
        # the batch order comes from the sampler's (seed, epoch) generator.
        self._restore_rng(trainer)

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int) -> None:
        # Resumed mid-epoch, Lightning does not start the epoch again: the RNGs are put back just
        # before the next batch's forward pass, where the checkpointed run took its next draw.
        self._restore_rng(trainer)

    def _restore_rng(self, trainer: pl.Trainer) -> None:
        if self._pending is None:
            return
        states = self._pending["rng"]
        set_rng_state(states[trainer.global_rank] if trainer.global_rank < len(states) else states[0])
        self._pending = None



def settle_epoch_end(loops: dict[str, Any] | None) -> bool:
    """Make an epoch-end checkpoint's loop state read as "epoch finished, next one not begun".

    ``last.ckpt`` is written in ``on_train_epoch_end``, after Lightning counted the epoch
    ``processed`` but before it counts it ``completed``. Lightning 2.6 resumes such a checkpoint
    correctly only when training is bounded by epochs alone: with ``trainer.max_steps`` set
    (iteration-based training) it treats it as "restarted on epoch end", runs the end of that epoch
    a second time (evaluation, records, ``processed`` + 1) without training, and the run then stops
    one epoch early, or at once, with the remaining epochs never trained. Here the state is put
    where the next epoch's start would put it: the epoch ``completed``, and the per-epoch
    ("current") counters of the batch, scheduler and optimizer progress at zero. Resuming then
    starts the next epoch from its first batch whatever bounds the run. Applied on load, so
    checkpoints written before this fix resume correctly too. True when the state was changed.
    """
    fit = (loops or {}).get("fit_loop")
    if not isinstance(fit, dict) or not isinstance(fit.get("epoch_progress"), dict):
        return False
    epochs = fit["epoch_progress"]
    at_end = all(
        isinstance(epochs.get(part), dict)
        and epochs[part].get("ready") == epochs[part].get("started") == epochs[part].get("processed")
        and epochs[part].get("completed") == epochs[part].get("processed", 0) - 1
        for part in ("total", "current")
    )
    batches = fit.get("epoch_loop.batch_progress") or {}
    if not at_end or not batches.get("is_last_batch"):
        return False  # mid-epoch, mid-evaluation, or already consistent: Lightning's own handling is right
    for part in ("total", "current"):
        epochs[part]["completed"] = epochs[part]["processed"]

    def zero(progress: Any, *parts: str) -> None:
        if isinstance(progress, dict):
            for part in parts:
                if isinstance(progress.get(part), dict):
                    progress[part] = {key: 0 for key in progress[part]}

    batches["is_last_batch"] = False
    zero(batches, "current")
    zero(fit.get("epoch_loop.scheduler_progress"), "current")
    optim = (fit.get("epoch_loop.automatic_optimization.optim_progress") or {}).get("optimizer") or {}
    for counter in optim.values():
        zero(counter, "current")
    zero(fit.get("epoch_loop.manual_optimization.optim_step_progress"), "current")
    # The next epoch's start clears the evaluation's per-epoch count as well.
    val = fit.get("epoch_loop.val_loop.batch_progress")
    zero(val, "total", "current")
    if isinstance(val, dict):
        val["is_last_batch"] = False
    return True


# ---- choosing the checkpoint and preparing the run directory --------------------------------


@dataclass
class Candidate:
    path: Path
    epoch: int
    global_step: int
    state: dict[str, Any]

    @property
    def batches_done(self) -> int | None:
        """Batches of ``epoch`` trained when the checkpoint was written; None: the epoch's end."""
        position = self.state.get("position") or {}
        done, total = position.get("batches_done"), position.get("epoch_batches")
        if isinstance(done, int) and isinstance(total, int) and 0 <= done and (total < 0 or done < total):
            return done
        return None

    @property
    def epochs_done(self) -> int:
        """Epochs finished (with their evaluation) at this checkpoint."""
        return self.epoch if self.batches_done is not None else self.epoch + 1

    def describe(self) -> str:
        where = (
            f"epoch {self.epoch} after {self.batches_done} of {self.state['position']['epoch_batches']} batches"
            if self.batches_done is not None
            else f"end of epoch {self.epoch}"
        )
        return f"{where}, step {self.global_step}"


def load_checkpoint(path: Path) -> dict[str, Any]:
    return torch.load(path, map_location="cpu", weights_only=True, mmap=True)


def _damaged(run_dir: Path, what: str, fix: str) -> NegtrainError:
    return NegtrainError(f"--resume {run_dir}: {what}; {fix}")


def find_checkpoint(run_dir: Path) -> tuple[Candidate | None, list[str]]:
    """The newest resumable checkpoint of a run.

    Every ``checkpoints/*.ckpt`` must be a complete checkpoint written by ``negtrain fit``: one
    that is damaged (truncated, a folder, a link out of the run, not a torch file, another
    program's) is an error naming it, not skipped. Atomic writes mean ``fit`` never leaves such
    a file (a half-written checkpoint is a ``.*.part`` file, which is ignored), so it was damaged
    or put there from outside, and resuming from an older checkpoint would silently redo, and then
    overwrite, the work it held. The second value lists ignored leftovers, for the record.
    """
    run_dir = Path(run_dir)
    folder = run_dir / "checkpoints"
    found: list[Candidate] = []
    ignored: list[str] = []
    if folder.exists() and not folder.is_dir():
        raise _damaged(run_dir, "checkpoints is not a folder", "move it aside")
    for path in sorted(folder.glob("*.ckpt")) if folder.is_dir() else []:
        if path.name.startswith(".") or path.name.endswith(PART_SUFFIX):
            ignored.append(f"{path.name}: a temporary file")
            continue
        name = f"checkpoints/{path.name}"
        fix = f"move {name} out of the run directory to resume from its other checkpoints"
        if not is_inside(path, folder):
            raise _damaged(run_dir, f"{name} leads outside {folder}", fix)
        if not path.is_file():
            kind = "a folder" if path.is_dir() else "a broken link" if path.is_symlink() else "not a regular file"
            raise _damaged(run_dir, f"{name} is {kind}, not a checkpoint", fix)
        try:
            ckpt = load_checkpoint(path)
        except Exception as exc:  # truncated, not a torch file, or unsafe to load: never resume from it
            raise _damaged(run_dir, f"{name} is truncated or damaged (cannot be read: {type(exc).__name__})", fix) from exc
        state = ckpt.get(RESUME_KEY) if isinstance(ckpt, dict) else None
        if not isinstance(state, dict) or state.get("format") != FORMAT:
            raise _damaged(run_dir, f"{name} was not written by `negtrain fit` (no resume state)", fix)
        epoch, step = ckpt.get("epoch"), ckpt.get("global_step")
        if not isinstance(epoch, int) or not isinstance(step, int) or epoch < 0 or step < 0:
            raise _damaged(run_dir, f"{name} has no valid epoch and step", fix)
        found.append(Candidate(path, epoch, step, state))
    if not found:
        return None, ignored
    best = max(found, key=lambda c: (c.global_step, c.epochs_done, c.path.name == "last.ckpt"))
    return best, ignored


def is_complete(candidate: Candidate, max_epochs: int, max_steps: int) -> bool:
    return candidate.epochs_done >= max_epochs or (max_steps > 0 and candidate.global_step >= max_steps)


def _epoch_of(line: str) -> int:
    """A metrics line's epoch; -1 for a line without one, which every rewind keeps."""
    try:
        value = json.loads(line).get("epoch")
    except (json.JSONDecodeError, AttributeError):
        return -1
    return value if isinstance(value, int) else -1


def rewind(run_dir: Path, candidate: Candidate | None) -> None:
    """Put the run's records back to the checkpoint: ``metrics.jsonl`` as the checkpoint saw it,
    and no prediction files of epochs it had not finished (without a checkpoint: no records)."""
    run_dir = Path(run_dir)
    lines = list(candidate.state.get("metrics_lines", [])) if candidate else []
    keep_through = candidate.epochs_done - 1 if candidate else -1
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


#: What a run directory may hold, and what each entry must be (checked before any work).
RUN_ENTRIES = {"recipe.yaml": "file", "metrics.jsonl": "file", "command.txt": "file", "checkpoints": "folder", "predictions": "folder", "model": "folder"}


def check_run_dir(run_dir: Path) -> Path:
    """A run directory that ``fit --resume`` can continue, or a one-line error saying what is wrong."""
    run_dir = Path(run_dir)
    if not run_dir.exists():
        raise NegtrainError(f"--resume {run_dir}: no such directory")
    if not run_dir.is_dir():
        raise NegtrainError(f"--resume {run_dir}: not a directory")
    if not (run_dir / "recipe.yaml").exists():
        raise NegtrainError(f"--resume {run_dir}: not a negtrain run directory (no recipe.yaml); {RUN_FOLDER}")
    for name, kind in RUN_ENTRIES.items():
        path = run_dir / name
        if path.exists() or path.is_symlink():
            ok = path.is_file() if kind == "file" else path.is_dir()
            if not ok:
                raise _damaged(run_dir, f"{name} is not a {kind}", f"a run keeps its {name} as a {kind}; move the wrong one aside")
    _check_model_config(run_dir)
    check_resumable(run_dir)
    if (run_dir / "predictions").is_dir():
        for path in (run_dir / "predictions").iterdir():
            if path.suffix == ".jsonl" and not path.is_file():
                raise _damaged(run_dir, f"predictions/{path.name} is not a file", "move it aside")
    if not os.access(run_dir, os.W_OK | os.X_OK):
        raise NegtrainError(f"--resume {run_dir}: the run directory is not writable")
    for name in ("checkpoints", "predictions"):
        folder = run_dir / name
        if folder.is_dir() and not os.access(folder, os.W_OK | os.X_OK):
            raise NegtrainError(f"--resume {run_dir}: {name}/ is not writable")
    return run_dir


def _check_model_config(run_dir: Path) -> None:
    """``model/config.json`` is what ``export`` and ``init_from`` read the model from; a resume keeps
    it, so a damaged one is an error now, not at export."""
    path = run_dir / "model" / "config.json"
    if not path.exists():
        return
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        config = None
    if not isinstance(config, dict) or not isinstance(config.get("model_type"), str):
        raise _damaged(run_dir, "model/config.json is damaged (not a model config)",
                       "remove the model/ folder: the resume writes it again from the recipe's model")


def check_checkpoint_fits(module: torch.nn.Module, checkpoint: Path, run_dir: Path) -> None:
    """The checkpoint's weights are exactly the module's (names and shapes; an adapter run's, its
    trainable ones), checked before Lightning loads them, which fails with a traceback or, for an
    adapter run (loaded non-strictly), not at all."""
    state = load_checkpoint(checkpoint).get("state_dict")
    if not isinstance(state, dict):
        raise _damaged(run_dir, f"checkpoints/{checkpoint.name} holds no weights", "move it aside")
    own = module.state_dict()
    if getattr(module, "adapter_only", False):
        trainable = {n for n, p in module.named_parameters() if p.requires_grad}
        missing = sorted(trainable - set(state))
    else:
        missing = sorted(set(own) - set(state))
    unexpected = sorted(set(state) - set(own))
    shapes = [f"{k} {list(state[k].shape)} here {list(own[k].shape)}" for k in sorted(set(state) & set(own))
              if hasattr(state[k], "shape") and tuple(state[k].shape) != tuple(own[k].shape)]
    problems = [f"{len(v)} {what} (e.g. {v[0]})" for what, v in
                (("weights missing", missing), ("unknown weights", unexpected), ("weights of another shape", shapes)) if v]
    if problems:
        raise _damaged(run_dir, f"checkpoints/{checkpoint.name} does not fit the recipe's model: {'; '.join(problems)}",
                       "was recipe.yaml's model changed? put it back, or move the checkpoint aside")


@dataclass
class ResumePlan:
    """What :func:`negtrain.training.run.resume` continues: the run's recipe and checkpoint."""

    loaded: LoadedRecipe
    run_dir: Path
    checkpoint: Path | None  # None: no complete checkpoint yet, so training starts from the beginning


def plan_resume(run_dir: Path) -> ResumePlan | None:
    """Check ``run_dir`` and rewind it to its newest checkpoint; None when the run is already
    complete (said on stdout). ``run.resume`` then continues the training.

    Everything that can be wrong with the directory is found here, before any work: its layout,
    its recipe, every checkpoint (see :func:`check_run_dir`, :func:`find_checkpoint`).
    """
    run_dir = check_run_dir(run_dir)
    loaded = load_recipe(str(run_dir / "recipe.yaml"))
    candidate, _ = find_checkpoint(run_dir)
    recorded_seed = (candidate.state.get("sampler") or {}).get("seed") if candidate else None
    if candidate is not None and recorded_seed is not None and recorded_seed != loaded.recipe.seed:
        raise NegtrainError(
            f"--resume {run_dir}: recipe.yaml has seed {loaded.recipe.seed}, but {candidate.path.name} was "
            f"trained with seed {recorded_seed}; put seed: {recorded_seed} back (or start a new run for the new seed)"
        )
    t = loaded.recipe.trainer
    if candidate is not None and is_complete(candidate, t.max_epochs, t.max_steps):
        print(
            f"run {run_dir} is already complete: {candidate.path.name} is the {candidate.describe()} "
            f"(of {t.max_epochs} epochs, counted from 0); nothing to do",
            flush=True,
        )
        return None
    rewind(run_dir, candidate)
    if candidate is None:
        print(f"resume: {run_dir} has no complete checkpoint yet; training it from the start", flush=True)
    else:
        then = (
            f"continuing {epoch_label(candidate.epoch, t.max_epochs)} with batch {candidate.batches_done + 1}"
            if candidate.batches_done is not None
            else f"continuing with {epoch_label(candidate.epoch + 1, t.max_epochs)}"
        )
        print(f"resuming {run_dir} from {candidate.path.name}: {candidate.describe()}; {then}", flush=True)
    return ResumePlan(loaded, run_dir, candidate.path if candidate else None)
