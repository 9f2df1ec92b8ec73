"""Checkpoints written atomically and read with ``weights_only``.

Lightning's own ``TorchCheckpointIO`` streams the checkpoint through an fsspec transaction without
an fsync, so a kill or power cut at the wrong moment can leave a truncated ``last.ckpt``. Here a
checkpoint is written to ``.<name>.<random>.part`` in the same folder, fsync'd and renamed over
the target (:func:`negtrain.io.atomic.write_with`): ``last.ckpt`` is always the previous or
the new complete checkpoint, and a ``*.part`` file is never a candidate for resuming.

Checkpoints are loaded with ``torch.load(weights_only=True)``: they hold only tensors and plain
data (the recipe, the RNG states, the metrics lines - see :mod:`negtrain.training.resume`), so
no pickled code runs when a checkpoint is opened.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO

from negtrain.core.errors import NegtrainError
from negtrain.io.atomic import write_with


class AtomicCheckpointIO(TorchCheckpointIO):
    def save_checkpoint(self, checkpoint: dict[str, Any], path, storage_options: Any | None = None) -> None:
        if storage_options is not None:
            raise TypeError(f"{type(self).__name__} takes no storage_options, got {storage_options!r}")
        write_with(Path(path), lambda out: torch.save(checkpoint, out))

    def load_checkpoint(self, path, map_location: Any | None = None, weights_only: bool | None = None) -> dict[str, Any]:
        # torch.load takes a device name; Lightning annotates map_location as a callable only.
        return super().load_checkpoint(path, map_location=map_location or "cpu", weights_only=True if weights_only is None else weights_only)  # type: ignore[arg-type]


def read_checkpoint(path: str | Path, what: str = "--checkpoint", require_recipe: bool = True) -> dict[str, Any]:
    """A negtrain checkpoint, loaded with ``weights_only``; anything else is one clear error."""
    path = Path(path)
    if not path.is_file():
        raise NegtrainError(f"{what} {path}: no such file")
    import pickle
    import zipfile

    if not zipfile.is_zipfile(path):
        raise NegtrainError(f"{what} {path}: not a PyTorch checkpoint (not a torch.save file)")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        raise NegtrainError(
            f"{what} {path}: holds pickled objects beyond tensors and plain data; not loaded (weights_only)"
        ) from None
    except Exception as exc:  # truncated or damaged
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise NegtrainError(f"{what} {path}: truncated or damaged checkpoint ({first[:200]})") from exc
    if not isinstance(ckpt, dict) or not isinstance(ckpt.get("state_dict"), dict):
        raise NegtrainError(f"{what} {path}: not a Lightning checkpoint (no state_dict)")
    if require_recipe and "negtrain_recipe" not in ckpt:
        raise NegtrainError(f"{what} {path}: not a checkpoint of a negtrain run (no negtrain_recipe)")
    return ckpt
