"""The one scoring path of a benchmark split, whatever answered it (a model in this process or a
backend answering requests): the metric's values become the split's result
(:func:`scored_result`), then its bootstrap intervals, its ``metrics.jsonl`` line and its
predictions file (:func:`record_scored`). The line is handed on in memory to whoever writes it
(the run recorder, the report card); nothing writes it to be read back.

Re-scoring a predictions file (:mod:`negtrain.evaluation.predictions`, :mod:`negtrain.evaluation.across_splits`) has
no split object, only the metric: it takes the intervals from the same
:func:`negtrain.metrics.uncertainty.uncertainty_of`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from negtrain.data.eval_set import EvalResult, ScoredSplit, eval_record
from negtrain.metrics.uncertainty import uncertainty_of


def scored_result(metric: Any, name: str, texts: list[str | None] | None = None, also_note: str | None = None) -> EvalResult:
    """The result of ``metric`` (an ExampleMetric, synced over ranks by its ``compute``): its
    values, predictions and the fields a prediction line carries; the note is the metric's (known
    once it has computed), then ``also_note``."""
    values = {k: float(v) for k, v in metric.compute().items()}
    predictions = None if metric.last_predictions is None else metric.last_predictions.copy()
    note = "; ".join(n for n in (metric.note, also_note) if n) or None
    return EvalResult(name, values, predictions, note, texts, fields=_with_empty(metric.prediction_fields(), metric.last_empty))


def _with_empty(fields: list[dict | None] | None, empty) -> list[dict | None] | None:
    """The prediction lines' fields, with ``"empty": true`` on the lines whose response was empty,
    so that ``evaluate --predictions`` counts them (``n_empty``) as the run did."""
    if empty is None or not empty.any():
        return fields
    out: list[dict | None] = list(fields) if fields is not None else [None] * len(empty)
    for i in empty.nonzero()[0].tolist():
        out[i] = {**(out[i] or {}), "empty": True}
    return out


def record_scored(scored: ScoredSplit, epoch: int, stage: str, seconds: float, *, bootstrap: tuple[int, int] | None,
                  predictions_dir: Path | None, suffix: str) -> dict[str, Any]:
    """The metrics line of ``scored``'s last result, after its bootstrap intervals (``bootstrap``:
    resamples and seed; None: not estimated here, e.g. on a rank other than zero); its predictions
    file is written into ``predictions_dir`` (None: not written here)."""
    result = scored.result
    assert result is not None, f"{scored.name} has not been scored"
    if bootstrap is not None:
        resamples, seed = bootstrap
        result.uncertainty = uncertainty_of(scored.metric, resamples, seed, scored.benchmark.is_count)
    line = eval_record(scored, epoch, stage, seconds)
    if predictions_dir is not None:
        scored.write_predictions(predictions_dir, suffix)
    return line
