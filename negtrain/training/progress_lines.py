"""One progress display, the same in a terminal and in a log.

Under ``nohup``, SLURM or CI, stdout is a file: a progress bar is either off or a stream of
carriage returns nobody reads, and a long run looked dead; in a terminal, Lightning's bar showed
less than the log (no examples/s, an ETA for the current epoch only). So ``fit`` shows one line,
the same words in both places, e.g.::

    progress: epoch 0/2 (0-based), step 120 of 1500 (8%), 45.3 examples/s, elapsed 0:02:40, ETA 0:30:12 (evaluation included)

In a log it is a new line every ``trainer.progress_every_s`` seconds; in a terminal the same line
is redrawn in place every second (and Lightning's bar is off).

Steps are optimizer steps; examples/s counts every rank's training examples over the time spent
training (evaluation left out); the ETA is the steps left at that rate plus the evaluations left,
each as long as the last one took (before the first has run, the line says evaluation is not in
it yet). A resumed run counts from its resume. Epochs count from 0, as in ``metrics.jsonl`` and
the file names, and the line says so. When the recipe's header states a training speed for this
kind of machine (``# Needs: ... (about 102 training examples/s) ...``) and the run is far below it,
the line says that too: a busy or slower machine, not a stuck program.
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
    """The progress line instead of Lightning's bar: an interval is set (a terminal or a log)."""
    return every_s > 0


#: Seconds between redraws of the line in a terminal.
TERMINAL_EVERY_S = 1.0


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
    def __init__(self, every_s: float, expected: tuple[float, str] | None = None, terminal: bool | None = None) -> None:
        """``expected``: the training speed the recipe's header states for this kind of machine
        (examples/s, the kind), to say when this run is far below it. ``terminal``: redraw the
        line in place (default: whether stdout is a terminal)."""
        self.terminal = sys.stdout.isatty() if terminal is None else terminal
        self.every_s = TERMINAL_EVERY_S if self.terminal else every_s
        self.expected = expected
        self._start = self._last = time.monotonic()
        self._first_step = 0
        self._examples = 0
        #: Evaluation so far in this session: its seconds, how many evaluations, and when the one
        #: running started (None: none running).
        self._eval_seconds = 0.0
        self._evals = 0
        self._eval_started: float | None = None
        self._open_line = False  # a terminal line drawn without its newline yet

    def _due(self) -> bool:
        now = time.monotonic()
        if now - self._last < self.every_s:
            return False
        self._last = now
        return True

    def _show(self, text: str) -> None:
        if self.terminal:
            sys.stdout.write("\r\x1b[K" + text)
            sys.stdout.flush()
            self._open_line = True
        else:
            print(text, flush=True)

    def _end_line(self) -> None:
        """A terminal's line ends before anything else prints (the epoch's table, a warning)."""
        if self._open_line:
            sys.stdout.write("\n")
            sys.stdout.flush()
            self._open_line = False

    def on_train_start(self, trainer: pl.Trainer, pl_module) -> None:
        self._start = self._last = time.monotonic()
        self._first_step = trainer.global_step
        self._examples = 0

    def on_validation_start(self, trainer: pl.Trainer, pl_module) -> None:
        self._eval_started = time.monotonic()

    def on_validation_end(self, trainer: pl.Trainer, pl_module) -> None:
        if self._eval_started is not None:
            self._eval_seconds += time.monotonic() - self._eval_started
            self._evals += 1
            self._eval_started = None
        self._end_line()

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module) -> None:
        self._end_line()

    def on_train_end(self, trainer: pl.Trainer, pl_module) -> None:
        self._end_line()

    def on_exception(self, trainer: pl.Trainer, pl_module, exception: BaseException) -> None:
        self._end_line()

    def eta(self, steps_left: float, steps_per_s: float, epochs_left: int, evaluates: bool) -> str:
        """The steps left at this session's training rate, plus the evaluations left at the last
        one's length (``epochs_left`` evaluations, this epoch's included)."""
        train = steps_left / steps_per_s
        if not evaluates or epochs_left <= 0:
            return clock(train)
        if self._evals == 0:
            return f"{clock(train)} + evaluation (not timed yet)"
        return f"{clock(train + epochs_left * self._eval_seconds / self._evals)} (evaluation included)"

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module, outputs, batch, batch_idx: int) -> None:
        self._examples += batch_rows(batch) * trainer.world_size
        if not trainer.is_global_zero or not self._due():
            return
        elapsed = max(time.monotonic() - self._start, 1e-9)
        training = max(elapsed - self._eval_seconds, 1e-9)  # the time spent training, not evaluating
        step, total = trainer.global_step, trainer.estimated_stepping_batches
        parts = [(f"progress: {epoch_label(trainer.current_epoch, trainer.max_epochs)}" if trainer.max_epochs and trainer.max_epochs > 0
                  else f"progress: epoch {trainer.current_epoch}") + " (0-based)"]
        done = step - self._first_step
        if isinstance(total, (int, float)) and math.isfinite(total) and total > 0:
            parts.append(f"step {step} of {int(total)} ({100 * step / total:.0f}%)")
            epochs_left = (trainer.max_epochs - trainer.current_epoch) if trainer.max_epochs and trainer.max_epochs > 0 else 0
            evaluates = bool(getattr(pl_module, "eval_sets", None))  # a run with benchmarks evaluates every epoch
            eta = self.eta(total - step, done / training, epochs_left, evaluates) if done > 0 else "unknown"
        else:
            parts.append(f"step {step}")
            eta = "unknown"
        rate = self._examples / training
        parts += [f"{rate:.1f} examples/s", f"elapsed {clock(elapsed)}", f"ETA {eta}"]
        note = slow_note(rate, self.expected, training)
        if note:
            parts.append(note)
        self._show(", ".join(parts))

    def on_validation_batch_end(self, trainer: pl.Trainer, pl_module, outputs, batch, batch_idx: int, dataloader_idx: int = 0) -> None:
        if not trainer.is_global_zero or not self._due():
            return
        batches = trainer.num_val_batches
        total = batches[dataloader_idx] if isinstance(batches, list) and dataloader_idx < len(batches) else None
        of = f" of {int(total)}" if isinstance(total, (int, float)) and math.isfinite(total) else ""
        sets = getattr(pl_module, "eval_sets", None) or []
        name = sets[dataloader_idx].name if dataloader_idx < len(sets) else f"set {dataloader_idx + 1}"
        self._show(f"progress: evaluating {name}, batch {batch_idx + 1}{of}")
