"""One benchmark split evaluated every epoch, with everything that belongs to it.

An :class:`EvalSet` holds the benchmark, the split, its examples and their encoding, the metric
that scores it, how the model's outputs map to its labels, how a batch of it is predicted and
transformed (when the family needs more than its default), the last evaluation's result, and
the writing of that result's predictions file. The LightningModule, the run recorder and the
W&B tracker iterate over eval sets; nothing is kept in lists aligned by position.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from negtrain.benchmarks.base import AnswerKind, Benchmark, Example
from negtrain.config import eval_set_name
from negtrain.data.encoded import EncodedSplit
from negtrain.io.atomic import write_text
from negtrain.metrics.base import MISSING, UNPARSED
from negtrain.metrics.baselines import baselines
from negtrain.metrics.declared import headline
from negtrain.metrics.uncertainty import Uncertainty


@dataclass
class EvalResult:
    name: str  # "<benchmark>/<split>"
    metrics: dict[str, float]
    predictions: np.ndarray | None  # per example: a label id (generative: 1 right / 0 wrong), or MISSING; None: nothing to write
    note: str | None = None  # how the predictions were scored, if worth saying (the metric's note)
    texts: list[str | None] | None = None  # generative benchmarks: the generated answer per example
    #: stderr and ci95 per metric, filled in by the run recorder on rank zero (None elsewhere, or
    #: for a metric that cannot be bootstrapped)
    uncertainty: Uncertainty | None = None
    #: Per example, the model's response (generated text, or each label's score); None: not logged.
    responses: list[Any] | None = None
    #: Tokens generated over the split (None: nothing was generated).
    tokens_generated: int | None = None
    #: Per example, the fields its prediction line carries beyond the label (a model's scores,
    #: for re-scoring: the metric's ``prediction_fields``), or None.
    fields: list[dict | None] | None = None

    def predicted(self, examples: Sequence, labels: Sequence[str]) -> list[tuple[Any, str | None, bool]]:
        """(example, prediction, correct) for every example with a prediction.

        ``labels`` is the space the prediction ids index (the eval set's ``predicted_labels``, not
        the benchmark's gold labels: a 3-way head on a 2-way benchmark predicts 3-way ids). For a
        generative benchmark the prediction is the generated text, and correctness the metric's.
        """
        if self.predictions is None:
            return []
        rows: list[tuple[Any, str | None, bool]] = []
        for i, (ex, p) in enumerate(zip(examples, self.predictions.tolist(), strict=False)):
            if p == MISSING:
                continue
            if p == UNPARSED:  # a response no answer rule could read: no prediction, and wrong
                rows.append((ex, None, False))
            elif self.texts is not None:
                rows.append((ex, self.texts[i], bool(p)))
            else:
                rows.append((ex, labels[p], labels[p] == ex.label))
        return rows


@dataclass(eq=False)
class ScoredSplit:
    """One benchmark split as it is scored, recorded and written, whatever answered it: a model
    in this process (an :class:`EvalSet`) or a backend answering requests (:mod:`negtrain.evaluation.served`).
    What it needs beyond the examples (an encoding, an evaluator) belongs to :class:`EvalSet`."""

    benchmark: Benchmark
    split: str
    examples: list[Example]
    _: KW_ONLY
    #: The label space prediction ids index (one of the benchmark's ``spaces()``); None: its labels.
    predicted_labels: tuple[str, ...] | None = None
    #: The torchmetrics metric scoring this set (an ExampleMetric). The module registers it as a
    #: child, so Lightning moves it to the device and DDP syncs it.
    metric: Any = None
    #: Few-shot prompts: per example, the ids of the solved examples shown before it.
    shot_ids: list[list[str]] | None = None
    #: (shots asked, fewest allowed) when a row may be shown fewer shots to fit the model's
    #: context (``min_shots``): each prediction line then says how many it was shown (``n_shots``),
    #: and the metrics line counts the rows per number (``shots_used``). None: every row has all.
    shots_rule: tuple[int, int] | None = None
    #: The last evaluation of this set, read by the run recorder and the W&B tracker.
    result: EvalResult | None = None
    #: How a language model answers it when not by its default (a strategy's answering: greedy
    #: generation read by an answer rule). None: the family's default.
    answering: Any = None
    #: Per example, the exact prompt text the model saw (after the chat template); None: not kept.
    prompts: list[str] | None = None
    #: A name for this evaluation of the split when the split is evaluated several ways (a
    #: protocol's variant, e.g. "conditional_q/few").
    variant: str | None = None
    #: Write each example's prompt and response beside its prediction.
    log_samples: bool = True
    #: Generated completions to be judged by people (ScoNe-NLG): each prediction is the
    #: completion's text, and the metric only counts them.
    completions: bool = False
    #: The setting that cut the examples scored to part of the split, as the recipe writes it
    #: (``trainer.limit_val_batches=2``); None: every example is offered to the model.
    cut_by: str | None = None
    #: How many of the examples were offered to the model when ``cut_by`` cut them (None: not
    #: counted here): a benchmark whose metrics have no ``n`` (negated LAMA's probes) says its
    #: part of the split through it.
    offered: int | None = None

    def __post_init__(self) -> None:
        if self.predicted_labels is None:
            self.predicted_labels = tuple(self.benchmark.labels)

    @property
    def name(self) -> str:
        return eval_set_name(self.benchmark.name, self.split, self.variant)

    def prediction_rows(self) -> list[tuple[Example, bool, dict[str, Any]]]:
        """(example, correct, row) per line of the predictions file for the last result, in the
        split's order; the W&B tables show the same rows. A row holds the example's id, the
        predicted label (or generated answer; null for a response no answer rule could read), the
        gold label, with few-shot prompts the ids of the shots it was shown, what the metric needs
        to re-score it (``EvalResult.fields``), and (``log_samples``) the exact ``prompt`` and the
        model's ``response``."""
        if self.result is None or self.result.predictions is None:
            return []
        shots = dict(zip((e.id for e in self.examples), self.shot_ids, strict=False)) if self.shot_ids else None
        fields = dict(zip((e.id for e in self.examples), self.result.fields, strict=False)) if self.result.fields else {}
        position = {e.id: i for i, e in enumerate(self.examples)}
        responses = self.result.responses if self.log_samples else None
        assert self.predicted_labels is not None  # __post_init__ fills it
        predicted = {ex.id: (prediction, correct) for ex, prediction, correct in self.result.predicted(self.examples, self.predicted_labels)}
        rows = []
        # An example with fields but no prediction (a probe the model could not score, with the
        # reason) gets a line too, so a re-score counts it as the run did.
        for ex in self.examples:
            if ex.id not in predicted and not fields.get(ex.id):
                continue
            prediction, correct = predicted.get(ex.id, (None, False))
            row: dict[str, Any] = {"id": ex.id, "prediction": prediction, "label": ex.label}
            if shots:
                row["shots"] = shots[ex.id]
                if self.shots_rule is not None:
                    row["n_shots"] = len(shots[ex.id])
            row.update(fields.get(ex.id) or {})
            if self.answering is not None:  # read by an answer rule: say whether it could read it
                row["unparsed"] = prediction is None
            if self.log_samples and self.prompts is not None:
                row["prompt"] = self.prompts[position[ex.id]]
            if responses is not None:
                row["response"] = responses[position[ex.id]]
            rows.append((ex, correct, row))
        return rows

    def predictions_file(self, suffix: str) -> str:
        """``<benchmark>-<split>-<suffix>.jsonl``; a variant's file is named by the variant
        (``scone-test-conditional_q-few.jsonl``)."""
        tail = self.variant.replace("/", "-") if self.variant else suffix
        return f"{self.benchmark.name}-{self.split}-{tail}.jsonl"

    def write_predictions(self, run_dir: Path, suffix: str) -> None:
        """``predictions/<benchmark>-<split>-<suffix>.jsonl`` (see :meth:`predictions_file`) from the
        last result: one line per :meth:`prediction_rows` row."""
        if self.result is None or self.result.predictions is None:
            return
        rows = [json.dumps(row) for _, _, row in self.prediction_rows()]
        write_text(run_dir / "predictions" / self.predictions_file(suffix), "".join(r + "\n" for r in rows))


@dataclass(eq=False)
class EvalSet(ScoredSplit):
    """One benchmark split evaluated every epoch by a model in this process."""

    encoded: EncodedSplit
    _: KW_ONLY
    #: How an NLI head's class ids become ids in ``predicted_labels``. None: not a classifier.
    label_map: torch.Tensor | None = None
    #: An LM's label benchmark: per label (in label order), its verbalizer's continuation ids,
    #: the texts it scores. None: not scored by verbalizers.
    choices: list[list[int]] | None = None
    #: ``(module, batch) -> predictions`` when this set is predicted otherwise than the family's
    #: default (a masked LM's probes and held-out corpus sentences).
    evaluator: Callable | None = None
    #: ``(padded batch, epoch) -> batch``, applied after padding (the masks of held-out sentences).
    transform: Callable | None = None
    #: A language model's set: its requests and how their answers are read
    #: (:class:`negtrain.engine.entry_requests.EntryRequests`); a batch is only its rows' indices.
    requests: Any = None

    def __deepcopy__(self, memo: dict) -> EvalSet:
        # An eval set is the run's data, not model state: a copy of the module (EMA's averaged
        # model) shares it instead of duplicating every encoded example.
        return self

    def label_map_on(self, device: torch.device) -> torch.Tensor:
        """``label_map`` on ``device``, moved there once."""
        assert self.label_map is not None, f"{self.name} has no label map"
        if self.label_map.device != device:
            self.label_map = self.label_map.to(device)
        return self.label_map


def json_number(value: float) -> float | None:
    # NaN and ±inf have no JSON spelling (json.dumps would write the invalid NaN/Infinity).
    return round(value, 6) if math.isfinite(value) else None


def shots_used(eval_set: ScoredSplit) -> dict[str, Any]:
    """How many shots the scored rows were shown, for a split whose rows may drop shots to fit the
    model's context: ``{"asked": 9, "fewest": 8, "rows": {"9": n, "8": m}}`` (rows per number of
    shots, most first; only rows with a prediction)."""
    assert eval_set.shots_rule is not None and eval_set.shot_ids is not None and eval_set.result is not None
    asked, fewest = eval_set.shots_rule
    predicted = eval_set.result.predictions
    counts: dict[int, int] = {}
    for i, ids in enumerate(eval_set.shot_ids):
        if predicted is None or predicted[i] != MISSING:
            counts[len(ids)] = counts.get(len(ids), 0) + 1
    return {"asked": asked, "fewest": fewest, "rows": {str(k): counts[k] for k in sorted(counts, reverse=True)}}


def eval_record(eval_set: ScoredSplit, epoch: int, stage: str, seconds: float) -> dict:
    """The metrics.jsonl line of an eval set's last result (any backend that scored it)."""
    result = eval_set.result
    assert result is not None, f"{eval_set.name}: recorded before it was scored"
    record: dict[str, Any] = {
        "epoch": epoch,
        "stage": stage,
        "benchmark": eval_set.benchmark.name,
        "split": eval_set.split,
        "metrics": {k: json_number(v) for k, v in result.metrics.items()},
        # The benchmark's declared directions, so a reader (report, a plot) needs no registry.
        "lower_is_better": [k for k in result.metrics if not eval_set.benchmark.is_higher_better(k)],
        "eval_seconds": round(seconds, 3),
    }
    if eval_set.variant:
        record["variant"] = eval_set.variant
    if eval_set.shots_rule is not None and eval_set.shot_ids is not None:
        record["shots_used"] = shots_used(eval_set)
    if result.tokens_generated is not None:
        record["tokens_generated"] = result.tokens_generated
    if result.uncertainty is not None:
        record["uncertainty"] = result.uncertainty.as_json()
        record["bootstrap"] = result.uncertainty.described()
    if result.note:
        record["note"] = result.note
    # Part of the split: how much (n of N), and what cut it, written where the numbers are.
    n = result.metrics.get("n")
    if n is not None and not math.isnan(n) and n < len(eval_set.examples):
        record["subset"] = {"of": len(eval_set.examples), "cut_by": eval_set.cut_by or "predictions missing for the rest"}
    elif (n is None or math.isnan(n)) and eval_set.offered is not None and eval_set.offered < len(eval_set.examples):
        record["subset"] = {"of": len(eval_set.examples), "cut_by": eval_set.cut_by or "predictions missing for the rest",
                            "scored": eval_set.offered}
    if eval_set.benchmark.answer_type is AnswerKind.LABEL and not eval_set.completions:
        baseline = baselines(eval_set.metric, headline(result.metrics), eval_set.predicted_labels or eval_set.benchmark.labels)
        if baseline is not None:
            record["baseline"] = baseline
    return record
