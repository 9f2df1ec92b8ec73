"""The run record: metrics.jsonl, prediction files and the per-epoch table.

``metrics.jsonl`` holds one JSON object per epoch, benchmark and split, each written as a typed
record through :mod:`negtrain.io.records` (the one writer; its reader is the one every command uses)::

    {"epoch": 0, "stage": "fit", "benchmark": "scone", "split": "test", "eval_seconds": 1.2,
     "metrics": {"accuracy": 0.97, "accuracy/one_scoped": 0.95, ..., "consistency": 0.9}}

and, for training, one line per epoch with ``"benchmark": "train"`` carrying the epoch's loss,
``train_examples``, ``train_seconds``, ``train_examples_per_second`` and ``sources``: per training
source ``"<benchmark>/<split>"``, its ``size``, its configured ``share`` of an epoch (see
``data.mix``) and ``examples``, how many of its examples were trained on in that epoch (summed
over ranks; a source oversampled by ``data.mix`` counts its repeats, a DDP padding batch counts
nothing)::

    "sources": {"mnli/train": {"size": 392702, "share": 0.93, "examples": 392702}, ...}

An evaluation line also carries ``"uncertainty"``: per metric (counts excepted) its ``stderr`` and,
with ``evaluation.bootstrap`` > 0, its ``ci95`` from the cluster bootstrap; and ``"bootstrap"``: the
unit resampled, how many units there were, the resamples and the seed::

    "uncertainty": {"consistency": {"stderr": 0.021, "ci95": [0.815, 0.9]}, ...},
    "bootstrap": {"unit": "contrast set", "units": 200, "resamples": 1000, "seed": 0}

A run that picks its epoch on a test split (``selection.allow_test_split: true``) marks every
training line and every line of that split with ``"selected_on_test": "<metric>"``. A run that
trains on rows of a split it reports as test (``data.allow_test_rows: true``) marks every line of
that split with ``"trained_on_test": "<training split>"``.

An evaluation line carries a ``note`` when the metric qualifies how it scored (e.g. a 2-way model
scored on the binary view of a 3-way benchmark).

The epoch's loss is the mean of the training loss over the epoch's examples on every rank, kept
by this callback (in float64) rather than read from Lightning's logged ``train/loss_epoch``: the
running sums and counts of the epoch so far are part of every checkpoint (:meth:`RunRecorder.state_dict`),
so an epoch resumed from a mid-epoch checkpoint gets the line an uninterrupted one would have.
"""

from __future__ import annotations

import math
import shutil
import sys
import textwrap
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import cast

import lightning.pytorch as pl
import numpy as np
import torch
from lightning.pytorch.callbacks import TQDMProgressBar
from lightning.pytorch.utilities import rank_zero_only
from tqdm import tqdm

# The one scoring path (data/scoring.py) lives on the data floor, so a served card writes its line
# as a run does, without Lightning.
from negtrain.data.eval_set import EvalResult, EvalSet, json_number as _json_number
from negtrain.data.scoring import record_scored
from negtrain.config import selection_split
from negtrain.data.module import NegtrainData
from negtrain.io.records import TRAIN, EvalRecord, RunRecord, TrainRecord, append_records
from negtrain.benchmarks.registry import BENCHMARKS
from negtrain.metrics.declared import find
from negtrain.metrics.uncertainty import format_stderr
from negtrain.training.epochs import epoch_label
from negtrain.training.resume import gather


def table_width() -> int:
    """The width the per-epoch table is laid out for: the terminal's (``COLUMNS``), else 100."""
    return max(60, min(shutil.get_terminal_size((100, 24)).columns, 160))


def format_block(result: EvalResult, is_count: Callable[[str], bool], width: int, unscored_reason: str | None = None) -> list[str]:
    """One eval set: its name, then ``metric value`` cells in aligned columns that fit ``width``.

    Values are rounded (4 decimals; counts, by the benchmark's declaration, as integers). A metric
    that is NaN had nothing to score; it is left out of the grid and named on a line of its own,
    with ``unscored_reason``.
    """

    spread = result.uncertainty.metrics if result.uncertainty is not None else {}

    def _cell(key: str, value: float) -> str:
        # A score carries its standard error (counts have none): ``0.9717±0.0048``.
        return str(int(value)) if is_count(key) else f"{value:.4f}{format_stderr(spread.get(key))}"

    # A benchmark's fine-grained details (TINAD's per-pattern breakdown and its authors' counts,
    # some 1,700 numbers) are written to metrics.jsonl; the table counts them.
    bench = BENCHMARKS.get(result.name.split("/")[0])
    details = {k for k in result.metrics if bench is not None and (d := find(bench.reported_metrics, k)) is not None and d.detail}
    finite = [(k, v) for k, v in result.metrics.items() if not math.isnan(v) and k not in details]
    # Scores first, in the metric's order; the counts (n, groups_scored, ...) after them.
    shown = dict([kv for kv in finite if not is_count(kv[0])] + [kv for kv in finite if is_count(kv[0])])
    unscored = [k for k, v in result.metrics.items() if math.isnan(v) and k not in details]
    lines = [f"  {result.name}"]
    if shown:
        key_w = max(len(k) for k in shown)
        val_w = max(len(_cell(k, v)) for k, v in shown.items())
        cell_w = key_w + 2 + val_w
        per_row = max(1, (width - 4 + 3) // (cell_w + 3))
        cells = [f"{k:<{key_w}}  {_cell(k, v):>{val_w}}" for k, v in shown.items()]
        for i in range(0, len(cells), per_row):
            lines.append("    " + "   ".join(cells[i : i + per_row]).rstrip())
    if unscored:
        why = f" ({unscored_reason})" if unscored_reason else ""
        lines += wrapped(f"not scored{why}: " + ", ".join(unscored), width)
    if details:
        lines += wrapped(f"and {len(details)} numbers of the breakdown (per pattern, the authors' counts): in metrics.jsonl", width)
    if result.note:
        lines += wrapped(f"note: {result.note}", width)
    return lines


def wrapped(text: str, width: int, indent: str = "    ") -> list[str]:
    """``text`` broken between words to fit ``width``, continuation lines indented two more."""
    return textwrap.wrap(text, width=width, initial_indent=indent, subsequent_indent=indent + "  ", break_on_hyphens=False) or [indent]


def format_table(
    title: str, results: list[EvalResult], is_count: Sequence[Callable[[str], bool]], width: int | None = None,
    unscored_reason: str | None = None,
) -> str:
    """The evaluation table printed once per epoch (``fit``) or once (``validate``, ``test``);
    ``is_count``: per result, which of its metrics are counts (the benchmark's ``is_count``)."""
    width = width or table_width()
    lines = [title]
    for r, count in zip(results, is_count, strict=False):
        lines += format_block(r, count, width, unscored_reason)
    return "\n".join(lines)


def limit_reason(limit: int | float, setting: str) -> str | None:
    """Why a metric may have had no example: an evaluation limit, named, or None when unlimited."""
    if isinstance(limit, float) and limit >= 1.0:
        return None
    return f"{setting}={limit} left no example for them"


class RunRecorder(pl.Callback):
    def __init__(self, run_dir: Path, stage: str = "fit", print_table: bool = True,
                 listeners: Sequence[Callable[[RunRecord], None]] = (), selected_on_test: str | None = None,
                 trained_on_test: Mapping[str, str] | None = None) -> None:
        #: Reported split (``<benchmark>/<split>``) -> the training split that shares its rows:
        #: every line of that split says so (``"trained_on_test": "<training split>"``).
        self.trained_on_test = dict(trained_on_test or {})
        #: The selection metric, where it is on a test split: every line of that split says so
        #: (``"selected_on_test": "<metric>"``), as does every training line.
        self.selected_on_test = selected_on_test
        #: Called with every record as it is written (rank zero): the W&B tracker's ``record``.
        self.listeners = list(listeners)
        self.run_dir = run_dir
        self.stage = stage
        self.print_table = print_table
        self._train_start = 0.0
        self._train_seconds: float | None = None
        self._train_examples = 0
        self._source_counts: np.ndarray | None = None
        # The epoch's loss as sum(loss * batch size) and sum(batch size), this rank's share.
        self._loss_sum = 0.0
        self._loss_weight = 0
        #: Counts of an epoch cut short, from a mid-epoch checkpoint: continued instead of zeroed.
        self._restored: list[dict] | None = None
        self._continued_epoch: int | None = None
        self._epoch = 0
        self._eval_start = 0.0
        self._eval_spans: dict[int, list[float]] = {}

    @property
    def metrics_path(self) -> Path:
        return self.run_dir / "metrics.jsonl"

    # ---- training throughput ------------------------------------------------------------
    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # A run resumed from a mid-epoch checkpoint continues that epoch without Lightning calling
        # on_train_epoch_start again: its counts so far come from the checkpoint, here.
        ranks, self._restored = self._restored, None
        restored = ranks[trainer.global_rank] if ranks and trainer.global_rank < len(ranks) else None
        if restored is not None and restored["epoch"] == trainer.current_epoch:
            self._start_epoch(trainer)
            self._train_examples = restored["examples"]
            self._loss_sum, self._loss_weight = restored["loss_sum"], restored["loss_weight"]
            if self._source_counts is not None and len(restored["sources"]) == len(self._source_counts):
                self._source_counts[:] = restored["sources"]
            # Training time so far, so examples per second stay per second of training.
            self._train_start -= restored.get("seconds", 0.0)
            self._continued_epoch = trainer.current_epoch

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._continued_epoch == trainer.current_epoch:
            self._continued_epoch = None  # already started from the checkpoint's counts
            return
        self._start_epoch(trainer)

    def _start_epoch(self, trainer: pl.Trainer) -> None:
        self._train_start = time.perf_counter()
        self._train_seconds = None
        self._train_examples = 0
        self._loss_sum, self._loss_weight = 0.0, 0
        self._epoch = trainer.current_epoch
        data = getattr(trainer, "datamodule", None)  # set by Lightning's data connector
        if isinstance(data, NegtrainData) and data.train is not None:
            self._source_counts = np.zeros(len(data.train.source_sizes), dtype=np.int64)
            self._source_ends = np.cumsum(data.train.source_sizes)

    # ---- the epoch so far, in checkpoints (every rank's own counts) --------------------------
    def state_dict(self) -> dict:
        # Every rank runs this while a checkpoint is written, so gathering is a safe collective.
        mine = {
            "epoch": self._epoch,
            "examples": self._train_examples,
            "loss_sum": float(self._loss_sum),
            "loss_weight": self._loss_weight,
            "sources": self._source_counts.tolist() if self._source_counts is not None else [],
            "seconds": time.perf_counter() - self._train_start,
        }
        return {"ranks": gather(mine)}

    def load_state_dict(self, state: dict) -> None:
        # Applied when training starts, if the checkpoint was written inside the resumed epoch.
        self._restored = list(state.get("ranks") or [])

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        # Real examples only: a DDP padding batch (a repeat that keeps a rank in step) trains on nothing.
        index = batch["index"][batch["real"]] if "real" in batch else batch["index"]
        size = len(index)
        self._train_examples += size
        if isinstance(outputs, dict) and "step_mean" in outputs:
            # DDP: the step's mean over every rank's examples (NegtrainModule._global_mean); each
            # rank weighs it by its own real examples, so the sum over ranks weighs it by the step's.
            step_mean = outputs["step_mean"].to(torch.float64)
        else:
            loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
            # Lightning hands back the loss divided by the accumulation factor it backpropagated.
            step_mean = None if loss is None else loss.detach().to(torch.float64) * trainer.accumulate_grad_batches
        if step_mean is not None:
            # A float64 tensor on the loss's device: no host sync per step.
            self._loss_sum = self._loss_sum + step_mean * size
            self._loss_weight += size
        if self._source_counts is not None:
            source = np.searchsorted(self._source_ends, index.cpu().numpy(), side="right")
            self._source_counts += np.bincount(source, minlength=len(self._source_counts))

    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # The first evaluation of a training epoch ends its training time.
        if self._train_seconds is None and self._train_examples:
            self._train_seconds = time.perf_counter() - self._train_start
        self._eval_start = time.perf_counter()
        self._eval_spans = {}

    on_test_start = on_validation_start

    def on_validation_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0) -> None:
        # Eval sets run one after another; each one's span is from its first batch to its last.
        now = time.perf_counter()
        self._eval_spans.setdefault(dataloader_idx, [now, now])

    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0) -> None:
        self._eval_spans[dataloader_idx][1] = time.perf_counter()

    on_test_batch_start = on_validation_batch_start
    on_test_batch_end = on_validation_batch_end

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        seconds = self._train_seconds if self._train_seconds is not None else time.perf_counter() - self._train_start
        # Every rank calls this hook, so a sum over ranks is a safe collective. Ranks can see
        # different batch sizes (a short last batch), so the count is summed, not multiplied.
        local = [self._train_examples] + (self._source_counts.tolist() if self._source_counts is not None else [])
        summed = trainer.strategy.reduce(torch.tensor(local, dtype=torch.long, device=pl_module.device), reduce_op="sum")
        examples, counts = int(summed[0]), summed[1:].tolist()
        # The epoch's loss, the mean over every rank's examples. Kept here rather than read from
        # Lightning's logged `train/loss_epoch`, whose running sums a mid-epoch checkpoint lacks.
        loss_parts = torch.tensor([float(self._loss_sum), float(self._loss_weight)], dtype=torch.float64, device=pl_module.device)
        loss_sum, loss_weight = trainer.strategy.reduce(loss_parts, reduce_op="sum").tolist()
        loss = loss_sum / loss_weight if loss_weight else None
        record = {
            "epoch": trainer.current_epoch,
            "stage": self.stage,
            "benchmark": TRAIN,
            "split": TRAIN,
            "metrics": {"loss": _json_number(float(loss)) if loss is not None else None},
            "train_examples": examples,
            "train_seconds": round(seconds, 3),
            "train_examples_per_second": round(examples / seconds, 2) if seconds > 0 else None,
            "global_step": trainer.global_step,
        }
        if self.selected_on_test:
            record["selected_on_test"] = self.selected_on_test
        data = getattr(trainer, "datamodule", None)
        if isinstance(data, NegtrainData) and data.train is not None and self._source_counts is not None:
            record["sources"] = {
                name: {"size": size, "share": round(share, 6), "examples": int(count)}
                for name, size, share, count in zip(data.train.sources, data.train.source_sizes, data.train_shares, counts, strict=False)
            }
        self._write(trainer, [TrainRecord(record)])

    # ---- evaluation ---------------------------------------------------------------------
    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        self._record_eval(trainer, pl_module)

    def on_test_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._record_eval(trainer, pl_module)

    def _record_eval(self, trainer: pl.Trainer, pl_module) -> None:
        seconds = time.perf_counter() - self._eval_start
        eval_sets: list[EvalSet] = pl_module.eval_sets
        epoch = trainer.current_epoch
        lines: list[RunRecord] = []
        for i, eval_set in enumerate(eval_sets):  # i: the set's dataloader index
            # Rank zero estimates the intervals (from the state compute() just scored, gathered from
            # every rank) and writes the predictions file (label benchmarks: the predicted label;
            # generative benchmarks: the generated answer text).
            zero = trainer.is_global_zero
            lines.append(EvalRecord(record_scored(
                eval_set, epoch, self.stage, self._span(i, seconds),
                bootstrap=(pl_module.bootstrap_resamples, pl_module.bootstrap_seed) if zero else None,
                predictions_dir=self.run_dir if zero else None, suffix=f"epoch{epoch}" if self.stage == "fit" else self.stage,
            )))
        if self.selected_on_test:
            split = selection_split(self.selected_on_test)
            for line in lines:
                if isinstance(line, EvalRecord) and line.name == split:
                    line.line["selected_on_test"] = self.selected_on_test
        for line in lines:
            if isinstance(line, EvalRecord) and line.name in self.trained_on_test:
                line.line["trained_on_test"] = self.trained_on_test[line.name]
        self._write(trainer, lines)
        if self.print_table and trainer.is_global_zero:
            title = f"{epoch_label(epoch, trainer.max_epochs)} (0-based) evaluation" if self.stage == "fit" else f"{self.stage}:"
            # The recipe's limit, which our samplers apply (Lightning itself is told "all" so that a
            # limit means the same examples on any number of ranks).
            limit = getattr(getattr(trainer, "datamodule", None), "limit_eval", None)
            setting = "trainer.limit_val_batches"  # the one recipe setting behind both Lightning limits
            reason = None if limit is None else limit_reason(limit, setting)
            # Every set's result was recorded just above (record_scored).
            _print_above_progress_bar(trainer, format_table(title, cast(list[EvalResult], [s.result for s in eval_sets]), [s.benchmark.is_count for s in eval_sets], unscored_reason=reason))

    def _span(self, index: int, fallback: float) -> float:
        span = self._eval_spans.get(index)
        return span[1] - span[0] if span else fallback

    @rank_zero_only
    def _write(self, trainer: pl.Trainer, records: list[RunRecord]) -> None:
        """Each record to metrics.jsonl (through the one writer, :mod:`negtrain.io.records`) and
        then to every listener (the W&B tracker), as it is written: nothing reads back the file to
        learn what was just recorded."""
        append_records(self.metrics_path, records)
        for record in records:
            for listener in self.listeners:
                listener(record)


def _print_above_progress_bar(trainer: pl.Trainer, text: str) -> None:
    """Print without cutting into a progress bar: tqdm's bar is cleared and redrawn around the
    text (``tqdm.write``); Rich's live display already moves printed lines above itself."""
    if isinstance(trainer.progress_bar_callback, TQDMProgressBar):
        tqdm.write(text)
        sys.stdout.flush()
    else:
        print(text, flush=True)
