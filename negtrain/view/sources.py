"""What a PATH given to ``negtrain view`` holds: one or more evaluations ("sources"), each a list
of eval sets with their ``metrics.jsonl`` record and predictions file.

A report card, an evaluation directory (``validate``/``test``) and a protocol output hold one
evaluation; a run directory holds one per epoch with predictions, so two epochs of a run are
compared like two cards.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from negtrain.core.errors import NegtrainError
from negtrain.io.records import EvalRecord, read_records


@dataclass
class EvalSet:
    record: EvalRecord
    predictions: Path

    @property
    def benchmark(self) -> str:
        return self.record.benchmark

    @property
    def split(self) -> str:
        return self.record.split

    @property
    def variant(self) -> str | None:
        return self.record.get("variant")

    @property
    def name(self) -> str:
        """``<benchmark>/<split>`` and, for a protocol's variant, ``/<variant>``: what pairs eval
        sets across sources."""
        return f"{self.benchmark}/{self.split}" + (f"/{self.variant}" if self.variant else "")


@dataclass
class Source:
    label: str  # shown in the site: the folder's name, and the epoch for a run
    path: Path
    kind: str  # "card" (a card or evaluation directory), "run" (one epoch of a run), "protocol"
    epoch: int | None = None
    sets: list[EvalSet] = field(default_factory=list)
    #: A run's every fit record, for the per-epoch curves (only on a run's sources).
    curves: dict[str, dict[str, list[list[float | None]]]] = field(default_factory=dict)


def _predictions_file(folder: Path, record: EvalRecord) -> Path:
    """The file the recorder wrote for ``record`` (:meth:`negtrain.data.eval_set.EvalSet.predictions_file`)."""
    variant = record.get("variant")
    tail = variant.replace("/", "-") if variant else (f"epoch{record.epoch}" if record.stage == "fit" else record.stage)
    return folder / "predictions" / f"{record.benchmark}-{record.split}-{tail}.jsonl"


def _curves(records: list[EvalRecord]) -> dict[str, dict[str, list[list[float | None]]]]:
    """Per eval set, per metric, [epoch, value] in epoch order."""
    out: dict[str, dict[str, list[list[float | None]]]] = {}
    for r in sorted(records, key=lambda r: r.epoch):
        for key, value in r.metrics.items():
            out.setdefault(r.name, {}).setdefault(key, []).append([r.epoch, value])
    return out


def read_sources(path: Path) -> list[Source]:
    """The evaluations under ``path``; an error names what is missing."""
    path = Path(path)
    if not path.is_dir():
        raise NegtrainError(f"{path}: not a directory (view takes a run directory, a report card or a protocol output)")
    metrics = path / "metrics.jsonl"
    if not metrics.is_file():
        raise NegtrainError(f"{path}: no metrics.jsonl; not a run directory, report card or protocol output")
    evals = [r for r in read_records(metrics) if isinstance(r, EvalRecord)]
    if not evals:
        raise NegtrainError(f"{metrics}: no evaluation recorded")
    name = path.resolve().name
    kind = "protocol" if (path / "protocol.md").is_file() else "card"
    fit = [r for r in evals if r.stage == "fit"]
    if fit:
        sources = []
        curves = _curves(fit)
        for epoch in sorted({r.epoch for r in fit}):
            sets = [EvalSet(r, _predictions_file(path, r)) for r in fit if r.epoch == epoch]
            sets = [s for s in sets if s.predictions.is_file()]
            if sets:
                sources.append(Source(f"{name} epoch {epoch}", path, "run", epoch, sets, curves))
        if not sources:
            raise NegtrainError(f"{path / 'predictions'}: no predictions file of any epoch (the run writes them per epoch)")
        return sources
    # A card, protocol or validate/test directory: one evaluation (the test stage when both).
    stage = "test" if any(r.stage == "test" for r in evals) else "validate"
    records = [r for r in evals if r.stage == stage]
    sets = [EvalSet(r, _predictions_file(path, r)) for r in records]
    missing = [s.predictions.name for s in sets if not s.predictions.is_file()]
    if missing:
        raise NegtrainError(f"{path / 'predictions'}: no {', '.join(missing)}; the viewer shows every example of every benchmark it lists")
    return [Source(name, path, kind, None, sets)]
