"""Whether a folder handed to ``fit --resume`` is a run to continue, asked before anything in it
changes (:func:`negtrain.training.resume.check_run_dir`).

Resuming a run without a checkpoint trains it from the start and rewinds its records to none:
right for a run killed before its first checkpoint, which has no records yet; a loss of records
for anything else.
"""

from __future__ import annotations

from pathlib import Path

from negtrain.core.errors import NegtrainError
from negtrain.io.atomic import PART_SUFFIX

#: What ``fit --resume`` continues, said when it is handed something else.
RUN_FOLDER = "a run folder is the --output-dir `fit` wrote: recipe.yaml, model/ and checkpoints/*.ckpt"


def _has_checkpoint(run_dir: Path) -> bool:
    folder = run_dir / "checkpoints"
    return folder.is_dir() and any(
        not p.name.startswith(".") and not p.name.endswith(PART_SUFFIX) for p in folder.glob("*.ckpt"))


def check_resumable(run_dir: Path) -> None:
    """Records without a checkpoint are never resumed: resuming would train from the start and
    rewind (delete) those records. Such a folder is a report card's or an evaluation's (the user
    meant the run's folder), or a finished run whose checkpoints were deleted; either way the
    records stay, and starting over is the user's explicit choice."""
    if _has_checkpoint(run_dir):
        return
    metrics = run_dir / "metrics.jsonl"
    if not metrics.is_file() or metrics.stat().st_size == 0:
        return  # killed before its first record: training from the start loses nothing
    if (run_dir / "card.md").exists() or not (run_dir / "model").is_dir():
        found = "a report card's folder (card.md)" if (run_dir / "card.md").exists() else "an evaluation's folder (no model/)"
        raise NegtrainError(f"--resume {run_dir}: this is {found} with records and no checkpoint, not a run to continue; "
                            f"{RUN_FOLDER}")
    raise NegtrainError(
        f"--resume {run_dir}: the run has records (metrics.jsonl) but no checkpoint (checkpoints/*.ckpt was deleted?), "
        f"so resuming would train it again over them; to start over, train into a new folder: "
        f"python -m negtrain fit --recipe {run_dir / 'recipe.yaml'} --output-dir NEW_DIR")
