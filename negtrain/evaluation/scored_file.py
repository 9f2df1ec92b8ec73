"""What scoring a predictions file gives (:class:`Scored`), and how ``evaluate --predictions``
prints it (:func:`format_scored`): the result of :mod:`negtrain.evaluation.predictions`, apart
from the reading and checking of the file's lines."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from negtrain.benchmarks.registry import get_benchmark
from negtrain.metrics.uncertainty import Uncertainty, format_interval, format_stderr


@dataclass
class Scored:
    benchmark: str
    split: str
    predictions_file: str
    examples: int  # in the split
    scored: int  # with a prediction
    predicted_labels: tuple[str, ...]
    metrics: dict[str, float]
    notes: list[str] = field(default_factory=list)
    uncertainty: Uncertainty | None = None

    def as_json(self) -> dict:
        return {
            "benchmark": self.benchmark,
            "split": self.split,
            "predictions": self.predictions_file,
            "examples": self.examples,
            "scored": self.scored,
            "complete": self.scored == self.examples,
            "predicted_labels": list(self.predicted_labels),
            "notes": self.notes,
            "metrics": {k: (None if math.isnan(v) else v) for k, v in self.metrics.items()},
            **({"uncertainty": self.uncertainty.as_json(), "bootstrap": self.uncertainty.described()}
               if self.uncertainty is not None else {}),
        }


def format_scored(s: Scored) -> str:
    bench = get_benchmark(s.benchmark)
    lines = [f"{s.benchmark}/{s.split}: {s.scored} of {s.examples} examples scored, predictions {s.predictions_file}"]
    spread = s.uncertainty.metrics if s.uncertainty is not None else {}
    if s.uncertainty is not None:
        how = s.uncertainty.described()
        boot = (f"95% CI: percentile bootstrap over {how['units']} resampled {how['unit']}s "
                f"({how['resamples']} resamples, seed {how['seed']})" if how["resamples"] else "no bootstrap")
        lines.append(f"  (± standard error; {boot})")
    details = {k for k in s.metrics if bench.declared(k).detail}  # e.g. TINAD's per-pattern breakdown: in --json only
    width = max((len(k) for k in s.metrics), default=0)
    for k, v in ((k, v) for k, v in s.metrics.items() if k not in details):
        shown = "-" if math.isnan(v) else str(int(v)) if bench.is_count(k) else f"{v:.4f}"
        extra = f"{format_stderr(spread.get(k)):<8}  {format_interval(spread.get(k))}".rstrip() if k in spread and not math.isnan(v) else ""
        lines.append(f"  {k:<{width}}  {shown}{('  ' + extra) if extra else ''}")
    lines += [f"  (and {len(details)} numbers of the breakdown, per pattern and counts: see --json)"] * bool(details) + [f"note: {n}" for n in s.notes]
    return "\n".join(lines)
