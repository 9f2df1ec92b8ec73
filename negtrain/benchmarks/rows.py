"""Reading a benchmark's upstream files into rows that keep their line numbers, so a bad row is
reported as file:line:field: delimited files (:func:`read_csv`) and JSON lines (:func:`read_jsonl`,
strict: no key given twice), and :func:`local`, where a benchmark file lies on this machine."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from negtrain.benchmarks.files import DataFile, resolve
from negtrain.core.errors import DataError


@dataclass(frozen=True)
class Row:
    path: Path
    line: int  # 1-based line in the file where the row starts
    index: int  # 0-based data row
    fields: Mapping[str, Any]

    def get(self, name: str) -> Any:
        value = self.fields.get(name)
        if value is None or (isinstance(value, str) and value.strip() == ""):
            raise DataError(f"{self.path}:{self.line}: field '{name}' is missing or empty")
        return value

    def text(self, name: str) -> str:
        """A text field: present, non-empty and a string (JSON files may hold any type)."""
        value = self.get(name)
        if not isinstance(value, str):
            raise self.error(name, f"expected text, got {type(value).__name__} {value!r}")
        return value

    def error(self, name: str, problem: str) -> DataError:
        return DataError(f"{self.path}:{self.line}: field '{name}': {problem}")


def _read_text(path: Path, encodings: Sequence[str]) -> str:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    for enc in encodings:
        try:
            return raw.decode(enc)
        except UnicodeDecodeError as exc:
            last = exc
    raise DataError(f"{path}: not readable as {' or '.join(encodings)} ({last.reason} at byte {last.start})")


#: The longest field a delimited file may hold. Python's csv module stops at 131,072 characters
#: by default, with an error that names neither the file nor the line. Benchmark fields are
#: sentences and passages of at most a few thousand characters, so a field of up to 10 MiB is
#: read whole, and a longer one is reported as what it almost surely is: a broken quote that
#: swallowed the rest of the file.
MAX_CSV_FIELD = 10 * 1024 * 1024


def read_csv(
    path: Path,
    required: Sequence[str],
    delimiter: str = ",",
    encodings: Sequence[str] = ("utf-8-sig",),
    quoting: Literal[0, 1, 2, 3] = csv.QUOTE_MINIMAL,
) -> Iterator[Row]:
    """Rows of a delimited file. ``encodings`` are tried in order on the whole file; pass
    ``quoting=csv.QUOTE_NONE`` for files whose fields contain bare ``"`` (tab-separated text)."""
    text = _read_text(path, encodings)
    reader = csv.DictReader(io.StringIO(text, newline=""), delimiter=delimiter, quoting=quoting)
    # The limit is process-wide in the csv module: raise it for this file only.
    previous = csv.field_size_limit(MAX_CSV_FIELD)
    try:
        yield from _csv_rows(path, reader, required, cut=bool(text) and not text.endswith(("\n", "\r")))
    finally:
        csv.field_size_limit(previous)


def _csv_rows(path: Path, reader: csv.DictReader, required: Sequence[str], cut: bool) -> Iterator[Row]:
    """``read_csv``'s rows; ``cut``: the file does not end with a line break (it may be cut short)."""

    def rows() -> Iterator[tuple[int, dict]]:
        while True:
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                at = reader.line_num + 1  # the line being read when the error struck
                if "field larger than field limit" in str(exc):
                    raise DataError(
                        f"{path}:{at}: a field longer than {MAX_CSV_FIELD:,} characters (an unclosed quote?)"
                    ) from exc
                raise DataError(f"{path}:{at}: malformed CSV ({exc})") from exc
            yield reader.line_num, row

    read = rows()
    try:
        header = reader.fieldnames or []
    except csv.Error as exc:
        raise DataError(f"{path}:1: malformed CSV header ({exc})") from exc
    missing = [c for c in required if c not in header]
    if missing:
        raise DataError(f"{path}:1: missing column(s) {missing}; header has {reader.fieldnames}")
    index = 0
    previous = next(read, None)
    while previous is not None:
        line, row = previous
        previous = next(read, None)
        # line_num is the line where the row ended; a quoted field may span several lines.
        if None in row:  # DictReader files surplus fields under the key None
            raise DataError(f"{path}:{line}: more fields than the header's {len(header)}")
        if previous is None and cut and None in row.values():
            present = sum(v is not None for v in row.values())
            raise DataError(
                f"{path}:{line}: the file ends mid-row ({present} of {len(header)} fields and no final line "
                "break): it looks cut short"
            )
        yield Row(path, line, index, row)
        index += 1
    if index == 0:
        raise DataError(f"{path}: no data rows")


def read_jsonl(path: Path) -> Iterator[Row]:
    """The JSON objects of a JSON-lines file, read line by line (a 400k-row file is never in memory
    whole), each with its line number."""
    rows = 0
    try:
        f = open(path, "rb")
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    with f:
        for row in jsonl_rows(path, _decoded_lines(path, f)):
            yield row
            rows += 1
    if rows == 0:
        raise DataError(f"{path}: no data rows")


def _decoded_lines(path: Path, f) -> Iterator[str]:
    offset = 0
    for lineno, raw in enumerate(f, start=1):
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DataError(f"{path}:{lineno}: not readable as utf-8 ({exc.reason} at byte {offset + exc.start})") from exc
        offset += len(raw)


class _DuplicateKey(ValueError):
    pass


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """json's object hook: a key given twice is an error (json keeps the last one silently, so
    ``{"id": "a", ..., "id": "b"}`` would be scored as b), as in recipes."""
    obj = dict(pairs)  # in C; the loop below runs only for a broken line
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return obj


def parse_json_line(line: str, where: str, error: type[DataError] = DataError) -> Any:
    """One JSON value, strictly: no duplicate keys, no nesting so deep it overflows the parser."""
    try:
        return json.loads(line, object_pairs_hook=_no_duplicate_keys)
    except json.JSONDecodeError as exc:
        raise error(f"{where}: invalid JSON ({exc.msg})") from exc
    except _DuplicateKey as exc:
        raise error(f"{where}: key {str(exc)!r} appears twice in one object") from exc
    except RecursionError:
        raise error(f"{where}: JSON nested too deeply to read") from None


def jsonl_rows(path: Path, text: str | Iterable[str], error: type[DataError] = DataError) -> Iterator[Row]:
    """One JSON object per non-blank line of ``text`` (read from ``path``; the whole text, or its
    lines one at a time), with its line number."""
    index = 0
    for lineno, line in enumerate(text.splitlines() if isinstance(text, str) else text, start=1):
        if not line.strip():
            continue
        obj = parse_json_line(line, f"{path}:{lineno}", error)
        if not isinstance(obj, dict):
            raise error(f"{path}:{lineno}: expected a JSON object, got {type(obj).__name__}")
        yield Row(path, lineno, index, obj)
        index += 1


def local(file: DataFile) -> Path:
    return resolve(file)
