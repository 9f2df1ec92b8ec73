"""Reading a negtrain checkpoint, with no Lightning: ``torch.load(weights_only=True)``. A
checkpoint holds only tensors and plain data (the recipe, the RNG states, the metrics lines - see
:mod:`negtrain.training.resume`), so no pickled code runs when one is opened; anything else is one
clear error. Training, export, ``init_from`` and the in-process evaluation backend all read
checkpoints through :func:`read_checkpoint`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from negtrain.core.errors import NegtrainError


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
