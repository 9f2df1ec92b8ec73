"""Checkpoints written atomically and read with ``weights_only``.

Lightning's own ``TorchCheckpointIO`` streams the checkpoint through an fsspec transaction without
an fsync, so a kill or power cut at the wrong moment can leave a truncated ``last.ckpt``. Here a
checkpoint is written to ``.<name>.<random>.part`` in the same folder, fsync'd and renamed over
the target (:func:`negtrain.io.atomic.write_with`): ``last.ckpt`` is always the previous or
the new complete checkpoint, and a ``*.part`` file is never a candidate for resuming.

Checkpoints are loaded with ``torch.load(weights_only=True)`` (:mod:`negtrain.io.checkpoint_reading`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO

from negtrain.io.atomic import write_with
# Reading one needs no Lightning: its own module, so the in-process backend reads a run's checkpoint
# without importing Lightning; imported here for the code that reads it from here.


class AtomicCheckpointIO(TorchCheckpointIO):
    def save_checkpoint(self, checkpoint: dict[str, Any], path, storage_options: Any | None = None) -> None:
        if storage_options is not None:
            raise TypeError(f"{type(self).__name__} takes no storage_options, got {storage_options!r}")
        write_with(Path(path), lambda out: torch.save(checkpoint, out))

    def load_checkpoint(self, path, map_location: Any | None = None, weights_only: bool | None = None) -> dict[str, Any]:
        # torch.load takes a device name; Lightning annotates map_location as a callable only.
        return super().load_checkpoint(path, map_location=map_location or "cpu", weights_only=True if weights_only is None else weights_only)  # type: ignore[arg-type]  # a device name, as above
