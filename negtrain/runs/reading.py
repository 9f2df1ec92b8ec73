"""Reading a finished run directory (what ``fit`` wrote): recipe, metrics, checkpoints, command.

Used by ``export``, ``push`` and ``report``; needs neither the data nor the model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, cast

from negtrain.benchmarks.registry import get_benchmark
from negtrain.config import Recipe, SelectionConfig, TrainerConfig, load_yaml, on_test_split, selection_split, validate_recipe, validate_section
from negtrain.core.errors import ConfigError, NegtrainError
from negtrain.io.records import EvalRecord, RunRecord, TrainRecord, read_records
from negtrain.metrics.cue_corpus import CUE_CORPUS_METRICS, CUE_CORPUS_NAME
from negtrain.metrics.declared import find
from negtrain.models import provenance
from negtrain.core.paths import contained



def is_detail(eval_name: str, key: str) -> bool:
    """Whether metric ``key`` of the eval set ``<benchmark>/<split>`` is one of its benchmark's
    fine-grained details (:attr:`negtrain.metrics.declared.Declared.detail`: TINAD's per-pattern
    breakdown and its authors' counts), which the report leaves out."""
    try:
        bench = get_benchmark(eval_name.split("/")[0])
    except NegtrainError:
        return False
    found = find(bench.reported_metrics, key)
    return found is not None and found.detail


def is_count(eval_name: str, key: str) -> bool:
    """Whether metric ``key`` of the eval set ``<benchmark>/<split>`` counts examples or groups (printed
    as an integer, never plotted or ranked), as its benchmark declares. A name no benchmark
    declares (an eval set of an older or foreign run) is read as a score."""
    bench_name = eval_name.split("/")[0]
    try:
        declared = get_benchmark(bench_name).reported_metrics
    except NegtrainError:
        # The cue-masking corpus is evaluated like a benchmark but is not registered.
        if bench_name != CUE_CORPUS_NAME:
            return False
        declared = CUE_CORPUS_METRICS
    found = find(declared, key)
    return found is not None and found.kind == "count"


@dataclass
class EpochResults:
    epoch: int
    #: "<benchmark>/<split>" -> metric name -> value (None where the metric was undefined)
    evals: dict[str, dict[str, float | None]] = field(default_factory=dict)
    train: TrainRecord | None = None
    #: "<benchmark>/<split>" -> metric name -> {"stderr": ..., "ci95": [lo, hi]} (runs before
    #: uncertainty was recorded have none)
    uncertainty: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    #: "<benchmark>/<split>" -> {"unit", "units", "resamples", "seed"} of the bootstrap
    bootstrap: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: "<benchmark>/<split>" -> its whole metrics line (its baseline, directions, subset, ...)
    lines: dict[str, dict[str, Any]] = field(default_factory=dict)


class RunDir:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        if not self.path.is_dir():
            raise NegtrainError(f"--run {self.path}: no such directory")
        if not (self.path / "recipe.yaml").is_file():
            raise NegtrainError(f"--run {self.path}: not a negtrain run directory (no recipe.yaml)")

    @property
    def name(self) -> str:
        return self.path.resolve().name

    @cached_property
    def recipe_text(self) -> str:
        return (self.path / "recipe.yaml").read_text(encoding="utf-8")

    @cached_property
    def recipe_name(self) -> str:
        match = re.match(r"# recipe: (\S+)", self.recipe_text)
        return match.group(1) if match else self.name

    @cached_property
    def recipe_data(self) -> Any:
        """``recipe.yaml`` as parsed, not validated."""
        return load_yaml(self.path / "recipe.yaml")

    @cached_property
    def recipe(self) -> Recipe:
        """The whole recipe, model section included: its family must be known in this process."""
        return validate_recipe(self.recipe_data, str(self.path / "recipe.yaml"))

    # A report reads these two sections alone, never the model: a run of any family is reported,
    # one kept outside negtrain included, whether or not it is registered in this process.

    @cached_property
    def trainer(self) -> TrainerConfig:
        return cast(TrainerConfig, validate_section(self.recipe_data, "trainer", str(self.path / "recipe.yaml")))

    @cached_property
    def selection(self) -> SelectionConfig:
        return cast(SelectionConfig, validate_section(self.recipe_data, "selection", str(self.path / "recipe.yaml")))

    @cached_property
    def _recorded_selection(self) -> dict[str, Any]:
        """provenance.json's ``selection``: what fit chose (a defaulted metric included) and whether on test rows."""
        found = (provenance.read(self.path) or {}).get("selection")
        return found if isinstance(found, dict) else {}

    @property
    def selected_by(self) -> str | None:
        """The metric the kept epoch was picked by: recipe.yaml's (fit names a defaulted one there),
        else the one provenance.json recorded (a run made before it did); None: not recorded."""
        metric = self.selection.metric or self._recorded_selection.get("metric")
        return metric if isinstance(metric, str) else None

    @property
    def selected_on_test(self) -> bool:
        """Whether the kept epoch was picked on a split holding test rows (selection.allow_test_split):
        as fit recorded it (negtrain.benchmarks.test_rows), else by the split's name."""
        if self.selection.epoch != "best":
            return False
        if "on_test_split" in self._recorded_selection:
            return bool(self._recorded_selection["on_test_split"])
        return on_test_split(self.selected_by)

    @cached_property
    def command(self) -> str | None:
        path = self.path / "command.txt"
        return path.read_text(encoding="utf-8").strip() if path.is_file() else None

    @cached_property
    def records(self) -> list[RunRecord]:
        path = self.path / "metrics.jsonl"
        if not path.is_file():
            raise NegtrainError(f"--run {self.path}: no metrics.jsonl (did the run finish an epoch?)")
        return read_records(path)

    @cached_property
    def epochs(self) -> list[EpochResults]:
        """The ``fit`` records per epoch, in epoch order."""
        by_epoch: dict[int, EpochResults] = {}
        # A report card (or a validate/test directory) has no fit epochs: its one evaluation is
        # read as epoch 0, so `report` compares cards with cards and runs alike.
        stages = {r.stage for r in self.records}
        wanted = "fit" if "fit" in stages else ("validate" if "validate" in stages else "test")
        for r in self.records:
            if r.stage != wanted:
                continue
            ep = by_epoch.setdefault(r.epoch, EpochResults(r.epoch))
            if isinstance(r, TrainRecord):
                ep.train = r
            elif isinstance(r, EvalRecord):
                ep.evals[r.name] = r.metrics
                ep.lines[r.name] = r.line
                ep.uncertainty[r.name] = r.uncertainty
                if r.bootstrap:
                    ep.bootstrap[r.name] = r.bootstrap
        return [by_epoch[e] for e in sorted(by_epoch)]

    @cached_property
    def directions(self) -> dict[str, set[str]]:
        """Per eval set, the metrics the run declared lower-is-better (runs write it on every line)."""
        out: dict[str, set[str]] = {}
        for r in self.records:
            if isinstance(r, EvalRecord) and r.lower_is_better is not None:
                out.setdefault(r.name, set()).update(r.lower_is_better)
        return out

    def epoch(self, epoch: int) -> EpochResults:
        for ep in self.epochs:
            if ep.epoch == epoch:
                return ep
        raise NegtrainError(f"{self.path / 'metrics.jsonl'}: no evaluation recorded for epoch {epoch}")

    @property
    def eval_names(self) -> list[str]:
        names: list[str] = []
        for ep in self.epochs:
            names += [n for n in ep.evals if n not in names]
        return names

    @property
    def model_name(self) -> str:
        """The name the run's exported model goes by: the recipe, then the run directory's name
        (once when the directory is already named after the recipe)."""
        name = self.name
        return name if name.startswith(self.recipe_name) else f"{self.recipe_name}-{name}"

    @property
    def is_evaluation(self) -> bool:
        """A report card or a validate/test directory: one evaluation, no training (no epochs,
        no loss, nothing to finish)."""
        return not any(r.stage == "fit" for r in self.records)

    @property
    def unfinished(self) -> str | None:
        """None for a run that trained to its end (``trainer.max_epochs`` or ``max_steps``); else
        how far it got, e.g. ``"trained 2 of 5 epochs"`` (killed, or still running)."""
        t = self.trainer
        trained = [ep.train for ep in self.epochs if ep.train]
        steps = max((r.global_step for r in trained), default=0)
        if len(trained) >= t.max_epochs or (t.max_steps and t.max_steps > 0 and steps >= t.max_steps):
            return None
        return f"trained {len(trained)} of {t.max_epochs} epochs"

    @property
    def selection_split(self) -> str | None:
        """``<benchmark>/<split>`` that ``selection.metric`` is computed on (None: not set)."""
        return selection_split(self.selected_by)

    def checkpoint(self, which: str) -> Path:
        folder = self.path / "checkpoints"
        if which == "last":
            path = folder / "last.ckpt"
            if not path.is_file():
                raise NegtrainError(f"--run {self.path}: no checkpoints/last.ckpt")
            return contained(path, folder, "checkpoint")
        if which != "best":
            raise ConfigError(f"--checkpoint must be 'best' or 'last', got '{which}'")
        found = sorted(folder.glob("best-epoch*.ckpt"), key=lambda p: p.stat().st_mtime)
        if not found and self.selection.epoch == "last":
            raise NegtrainError(f"--run {self.path}: the run keeps its last epoch (selection.epoch: last), so it has no "
                                "best checkpoint; use last")
        if not found:
            raise NegtrainError(f"--run {self.path}: no checkpoints/best-epoch*.ckpt (did the run evaluate?)")
        return contained(found[-1], folder, "checkpoint")

