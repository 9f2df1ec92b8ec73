"""The lines of a run's ``metrics.jsonl``, typed, with the one reader and the one writer.

Every line is one JSON object; which kind of record it is follows from the line itself:

- :class:`TrainRecord`: one per training epoch (``"benchmark": "train"``): the epoch's loss,
  examples, seconds, global step and per-source counts;
- :class:`EvalRecord`: one per epoch (``fit``) or evaluation (``validate``, ``test``), benchmark
  and split: metrics, their directions, uncertainty, bootstrap, seconds, note, variant;
- :class:`CardRecord`: an evaluation line of a report card scored by a served model, which also
  carries the ``requests`` it took and the ``missing`` ones.

The recorder, the report card and the served backend write through :func:`append_records`,
:func:`write_records` and :func:`record_line`; runs, report, card, compare, seeds and the W&B
tracker read through :func:`read_records` (or are handed the records as they are written). A
record keeps its line as written, in its key order, so a line read and written again is the same
bytes, and the lines of older runs (fields added or missing) read as they always did. A record is
also a read-only mapping of its line, so code that renders a line's fields reads them by name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from negtrain.core.errors import NegtrainError
from negtrain.io.atomic import append_lines, write_text

#: The ``benchmark`` field of a training line.
TRAIN = "train"


#: A benchmark's or split's name in a record, before any path is built from it.
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


class RunRecord(Mapping):
    """One line of ``metrics.jsonl``: the fields every kind has, typed, over the line as written."""

    __slots__ = ("line",)

    def __init__(self, line: dict[str, Any]) -> None:
        self.line = line

    # ---- the line as a read-only mapping -------------------------------------------------------
    def __getitem__(self, key: str) -> Any:
        return self.line[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.line)

    def __len__(self) -> int:
        return len(self.line)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.line!r})"

    # ---- the fields every record has -----------------------------------------------------------
    @property
    def epoch(self) -> int:
        return int(self.line["epoch"])

    @property
    def stage(self) -> str:
        # Runs written before the stage was recorded were all fits.
        return self.line.get("stage", "fit")

    @property
    def benchmark(self) -> str:
        return self.line["benchmark"]

    @property
    def split(self) -> str:
        return self.line["split"]

    @property
    def metrics(self) -> dict[str, float | None]:
        return self.line.get("metrics") or {}


class TrainRecord(RunRecord):
    """A training epoch's line."""

    __slots__ = ()

    @property
    def loss(self) -> float | None:
        return self.metrics.get("loss")

    @property
    def train_examples(self) -> int | None:
        return self.line.get("train_examples")

    @property
    def train_examples_per_second(self) -> float | None:
        return self.line.get("train_examples_per_second")

    @property
    def global_step(self) -> int:
        return int(self.line.get("global_step") or 0)

    @property
    def sources(self) -> dict[str, dict[str, Any]]:
        """Per training source ``<benchmark>/<split>``: ``size``, ``share``, ``examples``."""
        return self.line.get("sources") or {}


class EvalRecord(RunRecord):
    """An eval set's line: one benchmark split (and protocol variant) evaluated once. The fields
    only ever rendered (``variant``, ``eval_seconds``, ``note``, ``tokens_generated``) are read by
    name, through the mapping."""

    __slots__ = ()

    @property
    def name(self) -> str:
        """``<benchmark>/<split>``, the eval set's name in reports and on W&B."""
        return f"{self.benchmark}/{self.split}"

    @property
    def lower_is_better(self) -> list[str] | None:
        """The metrics the run declared lower-is-better (None: a run written before they were)."""
        return self.line.get("lower_is_better")

    @property
    def uncertainty(self) -> dict[str, dict[str, Any]]:
        return self.line.get("uncertainty") or {}

    @property
    def bootstrap(self) -> dict[str, Any] | None:
        return self.line.get("bootstrap") or None


class CardRecord(EvalRecord):
    """A report card's line scored by a served model: also the requests it took."""

    __slots__ = ()

    @property
    def requests(self) -> dict[str, int]:
        return self.line["requests"]

    @property
    def missing(self) -> list[str]:
        return self.line.get("missing") or []


def record_of(line: dict[str, Any]) -> RunRecord:
    """The typed record of one ``metrics.jsonl`` line (a dict as JSON gives it)."""
    if line.get("benchmark") == TRAIN:
        return TrainRecord(line)
    if "requests" in line:
        return CardRecord(line)
    return EvalRecord(line)


def parse_record(text: str, where: str) -> RunRecord:
    """One line's text; ``where`` (``file:line``) names it in the error of a line that is no record."""
    try:
        line = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NegtrainError(f"{where}: invalid JSON ({exc.msg})") from exc
    if not isinstance(line, dict) or "benchmark" not in line or "epoch" not in line:
        raise NegtrainError(f"{where}: not a metrics record (a JSON object with 'epoch' and 'benchmark')")
    if isinstance(line["epoch"], bool) or not isinstance(line["epoch"], int):
        raise NegtrainError(f"{where}: epoch {line['epoch']!r} is not a whole number")
    for key in ("metrics", "uncertainty"):  # every reader takes them for objects keyed by metric
        if line.get(key) is not None and not isinstance(line[key], dict):
            raise NegtrainError(f"{where}: {key} is {type(line[key]).__name__} {json.dumps(line[key])[:80]}, "
                                "not an object of metric names and values")
    # Readers build file names from these (predictions/<benchmark>-<split>-...): names only.
    for key in ("benchmark", "split"):
        if key in line and not (isinstance(line[key], str) and NAME.fullmatch(line[key])):
            raise NegtrainError(f"{where}: {key} {line[key]!r} is not a name (letters, digits, _ . -, not starting with . or -)")
    return record_of(line)


def read_records(path: Path) -> list[RunRecord]:
    """Every record of a ``metrics.jsonl`` (or a report card's part file), in file order; blank
    lines are skipped. A missing file is the caller's to explain (it knows what wrote it)."""
    out = []
    for lineno, raw in enumerate(Path(path).read_bytes().splitlines(), 1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise NegtrainError(f"{path}:{lineno}: not UTF-8 ({exc.reason} at byte {exc.start} of the line)") from None
        if text.strip():
            out.append(parse_record(text, f"{path}:{lineno}"))
    return out


def record_line(record: RunRecord | dict[str, Any]) -> str:
    """A record as its line in the file (without the newline)."""
    return json.dumps(record.line if isinstance(record, RunRecord) else record)


def append_records(path: Path, records: list[RunRecord]) -> None:
    """Records appended to a run's ``metrics.jsonl`` (the recorder, epoch by epoch)."""
    append_lines(path, [record_line(r) for r in records])


def write_records(path: Path, records: list[RunRecord]) -> None:
    """A ``metrics.jsonl`` (or a card's part file) written whole, atomically."""
    write_text(path, "".join(record_line(r) + "\n" for r in records))
