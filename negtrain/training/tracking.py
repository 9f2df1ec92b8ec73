"""Weights & Biases tracking for ``fit``, through Lightning's ``WandbLogger``.

What a W&B run holds:

- **config**: the resolved recipe, exactly the dict saved as ``recipe.yaml`` (:func:`negtrain.config.to_dict`),
  and under ``provenance`` the run's ``provenance.json`` (versions, machine, model revision, data hashes);
- **metrics**: every benchmark metric as ``<benchmark>/<split>/<metric>``, logged by the module at the
  end of each evaluation, with ``epoch`` as its x-axis; the training loss (``train/loss_step``,
  ``train/loss_epoch``); and, per epoch, the training examples seen from each source
  (``train/sources/<benchmark>/<split>``: examples drawn this epoch) and throughput, from the ``metrics.jsonl`` record the run recorder hands the tracker as it writes it;
- **summary**: the best value of the selection metric (``best/<monitor>``, also written under the
  metric's own name so a sweep optimises the best epoch, not the last), its epoch and checkpoint;
- each metric's uncertainty, as in ``metrics.jsonl``: ``<benchmark>/<split>/<metric>/stderr``,
  ``.../ci95_low`` and ``.../ci95_high`` per epoch;
- optionally (``logger.log_predictions``) every epoch's predictions as a ``wandb.Table``: the rows
  of the predictions file, with the few-shot ids each prompt showed (``shots``) and every further
  field of the line (``prompt`` and ``response`` when samples are logged).

Without an API key, or with ``WANDB_MODE=offline``, the run is written offline under
``<run dir>/wandb/`` and the ``wandb sync`` command is printed; nothing waits for a login prompt.
``WANDB_MODE=disabled`` (or ``logger: none``) writes no W&B files at all.

``fit --resume`` continues the same W&B run: the run id is kept in ``<run dir>/wandb/run_id``
(W&B resumes it with ``resume="allow"``), and epochs the killed process already sent are not sent
again.
"""

from __future__ import annotations

import json
import os
import re
import sys
import uuid
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.utilities import rank_zero_only

from negtrain.config import Recipe, to_dict
from negtrain.io.atomic import write_text
from negtrain.io.records import EvalRecord, RunRecord, TrainRecord
from negtrain.core.secrets import redact, redact_text
from negtrain.core.wandb_mode import wandb_mode
from negtrain.training.build import best_score

RUN_ID_FILE = Path("wandb") / "run_id"


def make_logger(recipe: Recipe, run_dir: Path, resuming: bool = False, provenance: dict[str, Any] | None = None):
    """A ``WandbLogger`` for the recipe's ``logger`` section, or None when tracking is off.

    ``resuming``: continue the W&B run recorded in the run directory, if there is one.
    ``provenance``: the run's ``provenance.json`` record, sent as the config's ``provenance`` key.
    """
    cfg = recipe.logger
    if cfg.backend == "none":
        return None
    mode = wandb_mode()
    if mode == "disabled":
        return None
    import wandb
    from lightning.pytorch.loggers import WandbLogger

    if mode == "offline" and not os.environ.get("WANDB_MODE"):
        print("W&B: no API key found (WANDB_API_KEY or `wandb login`); writing the run offline", flush=True)
    # Everything sent comes from the masked recipe (negtrain.core.secrets), never from raw values.
    config = to_dict(recipe)
    masked = config["logger"]
    if provenance is not None:  # masked as provenance.json is (a token in a model path, say)
        config["provenance"] = redact(provenance, by_key=False)
    # W&B records the program's arguments in its run metadata; a secret typed on the command line
    # must not travel with them.
    argv_has_secret = any(redact_text(a) != a for a in sys.argv)
    if argv_has_secret:
        print("W&B: the command line contains a secret; run metadata (arguments, host) is not recorded", flush=True)
    id_file = run_dir / RUN_ID_FILE
    run_id = id_file.read_text(encoding="utf-8").strip() if resuming and id_file.is_file() else None
    if run_id:
        print(f"W&B: continuing run {run_id}", flush=True)
    logger = WandbLogger(
        # Our own id, so a resumed fit can name the run it continues (WandbLogger resumes "allow").
        id=run_id or uuid.uuid4().hex[:8],
        project=masked["project"],
        entity=masked["entity"],
        name=masked["name"] or run_dir.name,
        group=masked["group"],
        tags=list(masked["tags"]) or None,
        save_dir=str(run_dir),
        config=config,
        # mode, not offline=True: WandbLogger(offline=True) sets WANDB_MODE for the whole process.
        mode=mode,
        job_type="fit",
        settings=wandb.Settings(init_timeout=120, silent=True, save_code=False, x_disable_meta=argv_has_secret),
    )
    # WandbLogger always passes anonymous=None, which wandb>=0.2x warns about on every run.
    logger._wandb_init.pop("anonymous", None)
    return logger


class WandbTracker(pl.Callback):
    """What Lightning does not log by itself: per-source counts, prediction tables, the epoch axis.

    The run recorder hands it every record it writes to ``metrics.jsonl`` (:meth:`record`, one of
    :class:`negtrain.training.recorder.RunRecorder`'s listeners), so W&B and the file hold the same
    numbers whatever the order of the callbacks, and nothing re-reads the file. Its keys are charted against ``epoch`` (``define_metric``), and ``step_sync``
    (set up by ``WandbLogger``) fills in ``trainer/global_step``.
    """

    def __init__(self, logger, run_dir: Path, eval_names: list[str], log_predictions: bool = False) -> None:
        self.logger = logger
        self.run_dir = run_dir
        self.eval_names = eval_names
        self.log_predictions = log_predictions

    @rank_zero_only
    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        run = self.logger.experiment
        write_text(self.run_dir / RUN_ID_FILE, run.id + "\n")
        run.define_metric("epoch")
        for name in self.eval_names:
            run.define_metric(f"{name}/*", step_metric="epoch")
        run.define_metric("train/sources/*", step_metric="epoch")
        run.define_metric("train/examples*", step_metric="epoch")

    def record(self, record: RunRecord) -> None:
        """A record the run recorder has just written (on rank zero only; a resumed fit sends only
        the epochs it runs itself). Training lines: per-source counts and throughput; evaluation
        lines: each metric's standard error and 95% interval (:func:`uncertainty_metrics`)."""
        if isinstance(record, EvalRecord):
            spread = uncertainty_metrics(record)
            if spread:
                self.logger.experiment.log({"epoch": record.epoch, **spread})
            return
        if not isinstance(record, TrainRecord):
            return
        metrics: dict[str, Any] = {"epoch": record.epoch}
        for source, info in record.sources.items():
            # The realised number of examples drawn from the source this epoch.
            metrics[f"train/sources/{source}"] = info["examples"]
        if record.train_examples is not None:
            metrics["train/examples"] = record.train_examples
        if record.train_examples_per_second is not None:
            metrics["train/examples_per_second"] = record.train_examples_per_second
        self.logger.experiment.log(metrics)

    @rank_zero_only
    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking or not self.log_predictions:
            return
        epoch = trainer.current_epoch
        self.logger.experiment.log({"epoch": epoch, **prediction_tables(pl_module.eval_sets, epoch)})


def uncertainty_metrics(record: EvalRecord) -> dict[str, float]:
    """An evaluation record's standard errors and 95% intervals, as ``metrics.jsonl`` holds them:
    ``<benchmark>/<split>/<metric>/stderr``, ``.../ci95_low``, ``.../ci95_high`` (charted against
    ``epoch`` with the metric itself). An undefined value is NaN, as an undefined metric is; a
    metric without an interval (no bootstrap) sends no bounds."""
    out: dict[str, float] = {}
    name = record.name
    for key, entry in record.uncertainty.items():
        prefix = f"{name}/{key}"
        if "stderr" in entry:
            out[f"{prefix}/stderr"] = float("nan") if entry["stderr"] is None else float(entry["stderr"])
        ci = entry.get("ci95")
        if ci:
            out[f"{prefix}/ci95_low"] = float("nan") if ci[0] is None else float(ci[0])
            out[f"{prefix}/ci95_high"] = float("nan") if ci[1] is None else float(ci[1])
    return out


#: The first columns of a W&B prediction table. ``shots``: the few-shot examples' ids shown before
#: the prompt (empty without shots); every further field of the prediction line (a model's scores,
#: ``unparsed``, the ``prompt`` and ``response`` of a logged sample) follows as its own column.
TABLE_COLUMNS = ["id", "prediction", "label", "correct", "subset", "shots", "epoch"]


def prediction_tables(eval_sets, epoch: int) -> dict[str, Any]:
    """Per eval set, a ``wandb.Table`` of the rows its predictions file holds this epoch
    (:meth:`negtrain.data.eval_set.EvalSet.prediction_rows`, the same rows)."""
    import wandb

    tables: dict[str, Any] = {}
    for eval_set in eval_sets:
        rows = eval_set.prediction_rows()
        if not rows:
            continue
        extra = list(dict.fromkeys(k for _, _, row in rows for k in row if k not in TABLE_COLUMNS))
        data = [
            [row["id"], row["prediction"], row["label"], correct, ex.subset or "", ", ".join(row.get("shots") or []), epoch]
            + [_cell(row.get(k)) for k in extra]
            for ex, correct, row in rows
        ]
        tables[f"predictions/{eval_set.name}"] = wandb.Table(columns=TABLE_COLUMNS + extra, data=data)
    return tables


def _cell(value: Any) -> Any:
    """A table cell: text and numbers as they are, anything structured as its JSON."""
    return value if value is None or isinstance(value, (str, int, float, bool)) else json.dumps(value)


_EPOCH = re.compile(r"epoch(\d+)")


@rank_zero_only
def finish(logger, trainer: pl.Trainer, selection, run_dir: Path) -> None:
    """Write the best selection value into the run summary, close the run, print a sync hint."""
    if logger is None:
        return
    import wandb

    run = logger.experiment
    ckpt = trainer.checkpoint_callback
    best = best_score(ckpt)
    if selection is not None and best is not None:
        assert isinstance(ckpt, ModelCheckpoint)  # a best score is a ModelCheckpoint's
        run.summary[f"best/{selection.monitor}"] = best
        run.summary["best/selected_on"] = selection.monitor  # the metric the epoch was picked by, named
        # A sweep reads the summary value of its metric: make it the best epoch's, not the last's.
        run.summary[selection.monitor] = best
        match = _EPOCH.search(Path(ckpt.best_model_path).name)
        if match:
            run.summary["best/epoch"] = int(match.group(1))
        run.summary["best/checkpoint"] = os.path.relpath(ckpt.best_model_path, run_dir)
        # The monitored split is one the run reports: its best value is a best-of-N over epochs.
        run.summary["best/optimistic"] = trainer.current_epoch > 1
        # Picked on a split holding test rows (selection.allow_test_split: true): the summary says so.
        run.summary["best/selected_on_test"] = bool(getattr(selection, "on_test", False))
    offline = run.settings.mode in {"offline", "dryrun"} or getattr(run, "offline", False)
    run_path = Path(run.dir).parent
    run.finish()
    if wandb.run is run:  # pragma: no cover - finish() clears it
        wandb.finish()
    if offline:
        print(f"W&B run written offline to {run_path}; upload it with: wandb sync {run_path}", flush=True)
