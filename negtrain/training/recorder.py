"""The run record: metrics.jsonl, prediction files and the per-epoch table.

``metrics.jsonl`` holds one JSON object per epoch, benchmark and split::

    {"epoch": 0, "stage": "fit", "benchmark": "scone", "split": "test", "eval_seconds": 1.2,
     "metrics": {"accuracy": 0.97, "accuracy/one_scoped": 0.95, ..., "consistency": 0.9}}

and, for training, one line per epoch with ``"benchmark": "train"`` carrying the epoch's loss,
``train_examples``, ``train_seconds``, ``train_examples_per_second`` and ``sources``: per training
source ``"<benchmark>/<split>"``, its ``size``, its configured ``share`` of an epoch (see
``data.mix``) and ``examples``, how many of its examples were trained on in that epoch (summed
over ranks, repeats included)::

    "sources": {"mnli/train": {"size": 392702, "share": 0.93, "examples": 392702}, ...}

An evaluation line carries a ``note`` when the metric qualifies how it scored (e.g. a 2-way model
scored on the binary view of a 3-way benchmark).
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import lightning.pytorch as pl
import numpy as np
import torch
from lightning.pytorch.utilities import rank_zero_only

from negtrain.data.module import NegtrainData
from negtrain.io.atomic import append_lines, write_text
from negtrain.models.base import EvalResult


def _json_number(value: float) -> float | None:
    # NaN and ±inf have no JSON spelling (json.dumps would write the invalid NaN/Infinity).
    return round(value, 6) if math.isfinite(value) else None


def format_table(epoch: int, results: list[EvalResult], eval_sets: list) -> str:
    lines = [f"epoch {epoch} evaluation"]
    width = max((len(r.name) for r in results), default=10)
    for r, eval_set in zip(results, eval_sets):
        cells = [f"{k}={int(v)}" if eval_set.benchmark.is_count(k) else f"{k}={v:.4f}"
                 for k, v in r.metrics.items() if not math.isnan(v)]
        lines.append(f"  {r.name:<{width}}  " + "  ".join(cells))
        if r.note:
            lines.append(f"  {'':<{width}}  note: {r.note}")
    return "\n".join(lines)


class RunRecorder(pl.Callback):
    def __init__(self, run_dir: Path, stage: str = "fit", print_table: bool = True) -> None:
        self.run_dir = run_dir
        self.stage = stage
        self.print_table = print_table
        self._train_start = 0.0
        self._train_seconds: float | None = None
        self._train_examples = 0
        self._source_counts: np.ndarray | None = None
        self._eval_start = 0.0
        self._eval_spans: dict[int, list[float]] = {}

    @property
    def metrics_path(self) -> Path:
        return self.run_dir / "metrics.jsonl"

    # ---- training throughput ------------------------------------------------------------
    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._train_start = time.perf_counter()
        self._train_seconds = None
        self._train_examples = 0
        data = trainer.datamodule
        if isinstance(data, NegtrainData) and data.train is not None:
            self._source_counts = np.zeros(len(data.train.source_sizes), dtype=np.int64)
            self._source_ends = np.cumsum(data.train.source_sizes)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self._train_examples += len(batch["index"])
        if self._source_counts is not None:
            source = np.searchsorted(self._source_ends, batch["index"].cpu().numpy(), side="right")
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
        loss = trainer.callback_metrics.get("train/loss_epoch")
        record = {
            "epoch": trainer.current_epoch,
            "stage": self.stage,
            "benchmark": "train",
            "split": "train",
            "metrics": {"loss": _json_number(float(loss)) if loss is not None else None},
            "train_examples": examples,
            "train_seconds": round(seconds, 3),
            "train_examples_per_second": round(examples / seconds, 2) if seconds > 0 else None,
            "global_step": trainer.global_step,
        }
        data = trainer.datamodule
        if isinstance(data, NegtrainData) and data.train is not None and self._source_counts is not None:
            record["sources"] = {
                name: {"size": size, "share": round(share, 6), "examples": int(count)}
                for name, size, share, count in zip(data.train.sources, data.train.source_sizes, data.train_shares, counts)
            }
        self._write(trainer, [json.dumps(record)])

    # ---- evaluation ---------------------------------------------------------------------
    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        self._record_eval(trainer, pl_module)

    def on_test_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._record_eval(trainer, pl_module)

    def _record_eval(self, trainer: pl.Trainer, pl_module) -> None:
        seconds = time.perf_counter() - self._eval_start
        results: list[EvalResult] = pl_module.eval_results
        data = trainer.datamodule
        epoch = trainer.current_epoch
        lines = []
        for i, (result, eval_set) in enumerate(zip(results, data.eval_sets)):
            record = {
                "epoch": epoch,
                "stage": self.stage,
                "benchmark": eval_set.benchmark.name,
                "split": eval_set.split,
                "metrics": {k: _json_number(v) for k, v in result.metrics.items()},
                # The benchmark's declared directions, so a reader (report, a plot) needs no registry.
                "lower_is_better": [k for k in result.metrics if not eval_set.benchmark.is_higher_better(k)],
                "eval_seconds": round(self._span(i, seconds), 3),
            }
            if result.note:
                record["note"] = result.note
            lines.append(json.dumps(record))
            self._write_predictions(trainer, eval_set, result, epoch)
        self._write(trainer, lines)
        if self.print_table and trainer.is_global_zero:
            print(format_table(epoch, results, data.eval_sets), flush=True)

    def _span(self, index: int, fallback: float) -> float:
        span = self._eval_spans.get(index)
        return span[1] - span[0] if span else fallback

    def _write_predictions(self, trainer: pl.Trainer, eval_set, result: EvalResult, epoch: int) -> None:
        if not trainer.is_global_zero or result.predictions is None:
            return
        # Label benchmarks: the predicted label. Generative benchmarks: the generated answer text.
        rows = [
            json.dumps({"id": ex.id, "prediction": prediction, "label": ex.label})
            for ex, prediction, _ in result.predicted(eval_set.examples, eval_set.predicted_labels)
        ]
        suffix = f"epoch{epoch}" if self.stage == "fit" else self.stage
        name = f"{eval_set.benchmark.name}-{eval_set.split}-{suffix}.jsonl"
        write_text(self.run_dir / "predictions" / name, "".join(r + "\n" for r in rows))

    @rank_zero_only
    def _write(self, trainer: pl.Trainer, lines: list[str]) -> None:
        append_lines(self.metrics_path, lines)
