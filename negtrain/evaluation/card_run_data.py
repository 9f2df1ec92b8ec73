"""What a report card says about the run its weights came from, where that qualifies its numbers:
the epoch was picked on test rows (bold), the card scores pairs the run trained on (bold, with
how many), or the card scores the split the run picked its epoch on (a note).

The run is the folder of the checkpoint (``<run>/checkpoints/<file>.ckpt``), read from its
``recipe.yaml`` and ``provenance.json``; which splits share rows is the benchmarks' declaration
(:mod:`negtrain.benchmarks.test_rows`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from negtrain.benchmarks.test_rows import shared_rows
from negtrain.config import eval_set_name, is_test_split, load_yaml, on_test_split, selection_split
from negtrain.io.records import EvalRecord, RunRecord
from negtrain.models import provenance


@dataclass
class RunDataLines:
    #: Bold paragraphs above the table.
    warnings: list[str] = field(default_factory=list)
    #: Lines of the card's Notes.
    notes: list[str] = field(default_factory=list)


def _run_recipe(checkpoint: Path) -> dict | None:
    recipe = checkpoint.parent.parent / "recipe.yaml"
    raw = load_yaml(recipe) if recipe.is_file() else None
    return raw if isinstance(raw, dict) else None


def run_data_lines(checkpoint: Path | None, records: Sequence[RunRecord]) -> RunDataLines:
    """The card's lines about the run behind ``checkpoint`` for the scored ``records``."""
    out = RunDataLines()
    raw = _run_recipe(checkpoint) if checkpoint is not None else None
    if checkpoint is None or raw is None:
        return out
    selection = raw.get("selection")
    selection = selection if isinstance(selection, dict) else {}
    recorded = ((provenance.read(checkpoint.parent.parent) or {}).get("selection") or {})
    metric = selection.get("metric") or recorded.get("metric")
    best = checkpoint.name.startswith("best-epoch") and isinstance(metric, str)
    on_test = recorded["on_test_split"] if "on_test_split" in recorded else on_test_split(metric)
    if best and on_test:
        split = selection_split(metric) or ""
        where = f"the test split {split}" if is_test_split(split) else f"{split}, which shares rows with a split the run reports as test"
        out.warnings.append(f"**Selected on test.** These weights are the epoch that `{metric}` picked on {where} "
                            f"(selection.allow_test_split): their {split} numbers are optimistic.")
    data = raw.get("data")
    data = data if isinstance(data, dict) else {}
    sources = [(s.get("benchmark"), s.get("split")) for s in data.get("train") or [] if isinstance(s, dict)]
    for r in records:
        if not isinstance(r, EvalRecord):
            continue
        scored = eval_set_name(r["benchmark"], r["split"])
        for benchmark, trained in sources:
            if benchmark != r["benchmark"] or not isinstance(trained, str):
                continue
            shared = shared_rows(benchmark, trained, r["split"])
            if shared:
                out.warnings.append(
                    f"**Scored on pairs it trained on.** {shared[0]:,} of the {shared[1]:,} examples of {scored} are rows of "
                    f"{eval_set_name(benchmark, trained)}, which the run behind these weights trained on: its {scored} numbers are "
                    "not held-out scores.")
        if best and selection_split(metric) == scored:
            out.notes.append(f"- {scored}: the split the run picked these weights on (selection.metric `{metric}`): the "
                             "best of its epochs there, so its numbers here are optimistic.")
    return out
