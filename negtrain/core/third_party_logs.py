"""Quieting the libraries negtrain drives, in one place: their warnings and progress bars restate
what negtrain's own lines say (which model loads, which weights are new, how far a run is).

``quiet_model_logs`` is for a command that loads a model (a card, an export); ``quiet_training_logs``
adds Lightning's and bitsandbytes' chatter for a run. Both import transformers, so a command calls
them after its cheap checks: a refusal should not wait for torch to load.
"""

from __future__ import annotations

import logging
import os
import warnings


def quiet_model_logs() -> None:
    """transformers' warnings and progress bars off, and the tokenizers' fork warning."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def quiet_training_logs() -> None:
    """``quiet_model_logs``, and what Lightning and bitsandbytes print on every run."""
    quiet_model_logs()
    for name in ("bitsandbytes", "lightning.fabric.utilities.seed"):
        logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", message=".*LeafSpec.*")
    warnings.filterwarnings("ignore", message=".*does not have many workers.*")
    # A run directory holds its checkpoints by design: `fit --resume` continues into it, and a new
    # run refuses a directory that already holds one, so Lightning's "Checkpoint directory ...
    # exists and is not empty" only ever restates that.
    warnings.filterwarnings("ignore", message="Checkpoint directory .* exists and is not empty")
    # Lightning's advertising and restatements of our own settings, on every run.
    logging.getLogger("lightning.pytorch.utilities.rank_zero").addFilter(_drop_lightning_chatter)


def _drop_lightning_chatter(record: logging.LogRecord) -> bool:
    message = record.getMessage()
    return not (message.startswith("💡 Tip") or "was configured so 100% of the batches" in message)
