"""Progress as plain lines, for output that is not a terminal.

Under ``nohup``, SLURM or CI, stdout is a file: a progress bar is either off or a stream of
carriage returns nobody reads, and a long run looked dead. When stdout is not a terminal, ``fit``
prints one line every ``trainer.progress_every_s`` seconds while it trains (and while it
evaluates), e.g.::

    progress: epoch 0/2 (0-based), step 120 of 1500 (8%), 45.3 examples/s, elapsed 0:02:40, ETA 0:30:12

Steps are optimizer steps; examples/s counts every rank's examples; the ETA is the steps left
at the rate of this session (a resumed run counts from its resume). Epochs count from 0, as in
``metrics.jsonl`` and the file names, and the line says so. When the recipe's header states a
training speed for this kind of machine (``# Needs: ... (about 102 training examples/s) ...``) and the run is far
below it, the line says that too: a busy or slower machine, not a stuck program.
"""

from __future__ import annotations

import math
import sys
import time
from datetime import timedelta

import lightning.pytorch as pl
import torch

from negtrain.training.epochs import epoch_label


def wanted(every_s: float) -> bool:
    """Lines instead of a bar: an interval is set and stdout is not a terminal."""
    return every_s > 0 and not sys.stdout.isatty()


def clock(seconds: float) -> str:
    return str(timedelta(seconds=int(seconds)))


def batch_rows(batch) -> int:
    """The examples in a batch: the first dimension of its first tensor."""
    values = batch.values() if isinstance(batch, dict) else batch if isinstance(batch, (list, tuple)) else [batch]
    for value in values:
        if torch.is_tensor(value) and value.dim() > 0:
            return int(value.shape[0])
    return 0


#: A rate below this share of the recipe's stated one is "far below" it.
FAR_BELOW = 1 / 3
#: Seconds of training before the rate is compared: the first steps are slower (warm-up).
RATE_AFTER_S = 30.0


def slow_note(rate: float, expected: tuple[float, str] | None, elapsed: float) -> str | None:
    """What the progress line adds when ``rate`` is far below the recipe's ``expected`` (examples/s,
    the kind of machine it was measured on); None otherwise."""
    if expected is None or elapsed < RATE_AFTER_S or rate >= FAR_BELOW * expected[0]:
        return None
    return (f"far below the {expected[0]:g} examples/s the recipe's header states for an idle {expected[1]} machine "
            "(a busy or slower machine, not a stuck run)")


class ProgressLines(pl.Callback):
    def __init__(self, every_s: float, expected: tuple[float, str] | None = None) -> None:
        """``expected``: the training speed the recipe's header states for this kind of machine
        (examples/s, the kind), to say when this run is far below it."""
        self.every_s = every_s
        self.expected = expected
        self._start = self._last = time.monotonic()
        self._first_step = 0
        self._examples = 0

    def _due(self) -> bool:
        now = time.monotonic()
        if now - self._last < self.every_s:
            return False
        self._last = now
        return True

    def on_train_start(self, trainer: pl.Trainer, pl_module) -> None:
        self._start = self._last = time.monotonic()
        self._first_step = trainer.global_step
        self._examples = 0

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module, outputs, batch, batch_idx: int) -> None:
        self._examples += batch_rows(batch) * trainer.world_size
        if not trainer.is_global_zero or not self._due():
            return
        elapsed = max(time.monotonic() - self._start, 1e-9)
        step, total = trainer.global_step, trainer.estimated_stepping_batches
        parts = [(f"progress: {epoch_label(trainer.current_epoch, trainer.max_epochs)}" if trainer.max_epochs and trainer.max_epochs > 0
                  else f"progress: epoch {trainer.current_epoch}") + " (0-based)"]
        done = step - self._first_step
        if isinstance(total, (int, float)) and math.isfinite(total) and total > 0:
            parts.append(f"step {step} of {int(total)} ({100 * step / total:.0f}%)")
            eta = clock((total - step) * elapsed / done) if done > 0 else "unknown"
        else:
            parts.append(f"step {step}")
            eta = "unknown"
        rate = self._examples / elapsed
        parts += [f"{rate:.1f} examples/s", f"elapsed {clock(elapsed)}", f"ETA {eta}"]
        note = slow_note(rate, self.expected, elapsed)
        if note:
            parts.append(note)
        print(", ".join(parts), flush=True)

    def on_validation_batch_end(self, trainer: pl.Trainer, pl_module, outputs, batch, batch_idx: int, dataloader_idx: int = 0) -> None:
        if not trainer.is_global_zero or not self._due():
            return
        batches = trainer.num_val_batches
        total = batches[dataloader_idx] if isinstance(batches, list) and dataloader_idx < len(batches) else None
        of = f" of {int(total)}" if isinstance(total, (int, float)) and math.isfinite(total) else ""
        sets = getattr(pl_module, "eval_sets", None) or []
        name = sets[dataloader_idx].name if dataloader_idx < len(sets) else f"set {dataloader_idx + 1}"
        print(f"progress: evaluating {name}, batch {batch_idx + 1}{of}", flush=True)
