"""How an epoch is named wherever a person reads it: one convention for the table, the progress
bar, resume messages and file names, so "epoch 2" means the same thing everywhere."""

from __future__ import annotations


def epoch_label(epoch: int, max_epochs: int | None) -> str:
    """The one way epochs are shown: counted from 0, as in ``metrics.jsonl``, the prediction and
    checkpoint file names and Lightning's progress bar (``Epoch 2/4``: the third of five)."""
    return f"epoch {epoch}/{max_epochs - 1}" if max_epochs and max_epochs > 0 else f"epoch {epoch}"
