"""Mid-epoch checkpoints: every N optimizer steps, and when the job is told to stop.

A cluster stops a job with SIGTERM (and SLURM, asked with ``--signal=USR1@<seconds>``, warns
with SIGUSR1 first). Lightning's own handling ends ``fit`` at the next batch with exit code 0, so
the scheduler records success, and without a checkpoint since the last epoch end. Here both
signals are taken over once training starts: the signal only sets a flag, and at the end of the
next optimizer step every rank (they agree through a collective, so all stop at the same step)
writes a mid-epoch ``last.ckpt``, then ``fit`` stops with :class:`Preempted`, which the CLI turns
into exit code 128 + the signal number (143 for SIGTERM, 138 for SIGUSR1, 130 for SIGINT, where
a second SIGINT stops at once). Under DDP launched by
Lightning, rank 0 forwards the signal to the ranks it started.

A mid-epoch checkpoint holds the batch sampler's position, the epoch's running counts and loss
and the RNG states, so ``fit --resume`` continues with the next batch and ends with the numbers of
an uninterrupted run (:mod:`negtrain.training.resume`). No mid-epoch checkpoint is written for an
epoch's last batch: its evaluation and the epoch-end checkpoint come next. A signal that arrives
then (or during evaluation) stops the run right after that checkpoint, at the start of the next
epoch; one that arrives in the last epoch's evaluation lets the run finish.

Checkpoints are written atomically (:mod:`negtrain.io.checkpoints`), so a kill during
the write leaves the previous ``last.ckpt`` whole.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import lightning.pytorch as pl
import torch

from negtrain.core.errors import Preempted, Stopped
from negtrain.core.paths import resume_command

#: The signals that stop training with a checkpoint (where the platform has them). SIGINT (Ctrl+C)
#: too; a second SIGINT stops at once, from the last checkpoint written.
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGUSR1", "SIGINT") if hasattr(signal, name))


class MidEpochCheckpoint(pl.Callback):
    """Writes ``path`` (the run's ``last.ckpt``) every ``every_n_steps`` optimizer steps and on a stop signal."""

    def __init__(self, path: Path, every_n_steps: int | None, run_dir: Path) -> None:
        self.path = Path(path)
        self.every_n_steps = every_n_steps
        self.run_dir = run_dir
        self._received: int | None = None
        self._last_step = 0
        self._launcher: object = None  # the strategy's launcher, once training starts

    @property
    def received_signal(self) -> int | None:
        """The stop signal this process received (None: none yet)."""
        return self._received

    # ---- signals ---------------------------------------------------------------------------
    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # After Lightning installed its handlers (so these replace them) and restored any checkpoint.
        self._last_step = trainer.global_step
        self._launcher = trainer.strategy.launcher
        connector = getattr(trainer, "_signal_connector", None)
        if connector is not None and getattr(connector, "received_sigterm", False):
            # A SIGTERM that reached Lightning's handler while the run was starting.
            self._received = signal.SIGTERM
            connector.received_sigterm = False
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                signal.signal(signum, self._on_signal)

    def _on_signal(self, signum: int, frame) -> None:
        first = self._received is None
        if not first and signum == signal.SIGINT:
            raise Stopped(signum, f"stopped by SIGINT (twice: without a new checkpoint); continue with: {resume_command(self.run_dir)}")
        if first:
            self._received = signum
        kill = getattr(self._launcher, "kill", None)
        if first and kill is not None:
            kill(signum)  # the ranks Lightning launched as child processes (none elsewhere)

    def _stop_signal(self, trainer: pl.Trainer) -> int | None:
        """The signal every rank stops for (a collective: called at the same point on all ranks)."""
        received = self._received or 0
        if trainer.world_size > 1 and torch.distributed.is_available() and torch.distributed.is_initialized():
            flag = torch.tensor([received], device=trainer.strategy.root_device)
            torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX)
            received = int(flag.item())
        return received or None

    # ---- checkpoints -----------------------------------------------------------------------
    def on_train_batch_end(self, trainer: pl.Trainer, pl_module, outputs, batch, batch_idx: int) -> None:
        signum = self._stop_signal(trainer)
        stepped = trainer.global_step != self._last_step
        self._last_step = trainer.global_step
        # Between optimizer steps the accumulated gradients would be lost; at the epoch's last
        # batch (or the run's last step) evaluation and the epoch-end checkpoint follow.
        epoch_ends = batch_idx + 1 >= trainer.num_training_batches or (
            trainer.max_steps > 0 and trainer.global_step >= trainer.max_steps
        )
        if not stepped or epoch_ends:
            return
        due = self.every_n_steps is not None and trainer.global_step % self.every_n_steps == 0
        if due or signum:
            # The full training state (optimizer, loops, callbacks), which resuming needs: said
            # explicitly, or Lightning announces "`weights_only` was not set, defaulting to
            # `False`". That is about what is saved; the file holds only tensors and plain data
            # and is loaded with weights_only=True all the same (negtrain.io.checkpoints).
            trainer.save_checkpoint(self.path, weights_only=False)
        if signum:
            self._stop(
                trainer, signum,
                f"wrote {self._relative(self.path)} (epoch {trainer.current_epoch}, after {batch_idx + 1} of "
                f"{trainer.num_training_batches} batches, step {trainer.global_step})",
            )

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # A signal during the last batch or the evaluation of the previous epoch: its checkpoint is written.
        signum = self._stop_signal(trainer)
        if signum:
            where = f"{self._relative(self.path)} is the newest checkpoint" if self.path.is_file() else "no checkpoint was written yet"
            self._stop(trainer, signum, f"stopped before epoch {trainer.current_epoch}; {where}")

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._received and trainer.is_global_zero:
            print(f"received {signal.Signals(self._received).name} during the last evaluation; the run finished", flush=True)

    def _stop(self, trainer: pl.Trainer, signum: int, what: str) -> None:
        name = signal.Signals(signum).name
        message = f"stopped by {name}: {what}; continue with: {resume_command(self.run_dir)}"
        if trainer.is_global_zero:
            print(message, flush=True)
        raise Preempted(signum, message)

    def _relative(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.run_dir))
        except ValueError:
            return str(path)
