"""A training source whose rows stay on disk until something needs their text.

Training needs three things from a ``data.train`` entry: its size (to mix the sources, decided
before the model loads), its gold labels (the training targets) and its texts (tokenized, only
when the token store lacks them). The first two are kept as one compact array, the label codes
(int16, an index into the benchmark's label set), cached under ``<cache>/sources/<key>.npz``
keyed by :meth:`negtrain.benchmarks.base.Benchmark.data_fingerprint` (the files' sizes and
modification times and the reader's code). The file is verified, not trusted: beside the codes it
holds the key it was written for, their count and an xxh3 hash of them, and a file that does not
match (codes flipped, another source's file copied over it, a damaged archive) is recomputed
from the data, never read. The tokenized text is keyed by the same fingerprint
(see :func:`negtrain.models.nli.encode_pairs`). So a warm start of a 400k-pair MNLI mix reads
no data file and makes no Python object per example, and a cold one reads and validates each
file once, before the model loads, as before.

A :class:`TrainSource` is also a sequence of the benchmark's :class:`Example`\\ s, so a builder
that needs the rows themselves (prompts, answers) uses it as it would the list. Iterating reads
the files row by row and keeps nothing (a benchmark that streams its files, as MNLI does, then
never holds the split); indexing reads them whole, once, and keeps them until
:meth:`TrainSource.release`.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import xxhash

from negtrain.benchmarks.base import Benchmark, Example
from negtrain.benchmarks.files import cache_dir
from negtrain.benchmarks.row_filters import clauses, keeps, select_key, select_text

#: Bump when the cached array changes meaning.
SOURCES_VERSION = "2"
#: The code of a label outside the benchmark's label set (a free-text answer, say).
NO_CODE = -1


class TrainSource(Sequence):
    def __init__(self, benchmark: Benchmark, split: str, select: Sequence[Mapping[str, Any]] | None = None) -> None:
        self.benchmark = benchmark
        self.split = split
        #: The rows kept (``data.train[].select``, :mod:`negtrain.benchmarks.row_filters`); None: all.
        self.select = list(select) if select is not None else None
        self._clauses = clauses(self.select) if self.select is not None else None
        #: What the rows depend on (and the selection); keys the label codes and the tokenized text.
        self.fingerprint = benchmark.data_fingerprint(split)
        if self.select is not None:
            self.fingerprint = xxhash.xxh3_128(f"{self.fingerprint}\0{select_key(self.select)}".encode()).hexdigest()[:32]
        self._examples: list[Example] | None = None
        self._codes: np.ndarray | None = None

    @property
    def name(self) -> str:
        """``<benchmark>/<split>``, with ``[<selection>]`` when part of the split is kept."""
        return f"{self.benchmark.name}/{self.split}" + (f"[{select_text(self.select)}]" if self.select is not None else "")

    def _rows(self) -> Iterator[Example]:
        rows = self.benchmark.iter_examples(self.split)
        if self._clauses is None:
            return rows
        chosen = self._clauses
        return (e for e in rows if keeps(self.benchmark, chosen, e))

    def examples(self) -> list[Example]:
        """The rows, read and validated from the files (once; kept until :meth:`release`)."""
        if self._examples is None:
            # Not the process-wide Benchmark.load: a training split can be large, and release() must free it.
            self._examples = list(self._rows())
        return self._examples

    def release(self) -> None:
        """Drop the rows read into memory (they are read again if needed)."""
        self._examples = None

    def codes(self) -> np.ndarray:
        """Each row's gold label as its index in the benchmark's labels (:data:`NO_CODE` if it is
        not one of them), from the cache when the data is unchanged."""
        if self._codes is None:
            path = cache_dir() / "sources" / f"{self.fingerprint}-v{SOURCES_VERSION}.npz"
            self._codes = _load(path, self.fingerprint, len(self.benchmark.labels))
            if self._codes is None:
                index = {label: i for i, label in enumerate(self.benchmark.labels)}
                self._codes = np.fromiter((index.get(e.label, NO_CODE) for e in self), dtype=np.int16)
                if not os.environ.get("NEGTRAIN_NO_TOKEN_CACHE"):
                    _save(path, self._codes, self.fingerprint)
        return self._codes

    def gold_labels(self) -> list[str]:
        """Each row's gold label; read from the rows only if some label has no code."""
        codes = self.codes()
        if (codes == NO_CODE).any():
            return [e.label for e in self.examples()]
        labels = self.benchmark.labels
        return [labels[c] for c in codes.tolist()]

    def __len__(self) -> int:
        return len(self.codes())

    def __getitem__(self, i):
        return self.examples()[i]

    def __iter__(self) -> Iterator[Example]:
        # Read one row at a time, keeping none (unless the rows are in memory already): sizing a
        # source and tokenizing it are each a pass over the file, never the file in memory.
        if self._examples is not None:
            return iter(self._examples)
        return self._rows()

    def __repr__(self) -> str:
        return f"TrainSource({self.name})"


def _meta(codes: np.ndarray, key: str) -> str:
    return json.dumps({"key": key, "rows": len(codes), "hash": xxhash.xxh3_128(codes.tobytes()).hexdigest()}, sort_keys=True)


def _load(path, key: str, n_labels: int) -> np.ndarray | None:
    """The cached codes at ``path`` if they are the ones written for ``key``, whole and unchanged;
    None otherwise (then they are recomputed)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            codes, meta = z["codes"], str(z["meta"])
        if codes.dtype != np.int16 or codes.ndim != 1 or meta != _meta(codes, key):
            return None
        if len(codes) and (codes.min() < NO_CODE or codes.max() >= n_labels):
            return None
        return codes
    except Exception:  # noqa: BLE001 - missing, not an archive, damaged in any way: recomputed, never trusted
        return None


def _save(path, codes: np.ndarray, key: str) -> None:
    """Write atomically (a temporary file renamed): DDP ranks may write the same file at once, and a
    killed write must not leave a truncated array that a later run trusts. A read-only cache only
    costs the reading."""
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
        try:
            with os.fdopen(fd, "wb") as out:
                np.savez(out, codes=codes, meta=np.array(_meta(codes, key)))
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise


def label_codes(rows: Sequence[Example]) -> tuple[np.ndarray, tuple[str, ...]]:
    """Each row's gold label as a code, an index into the labels returned with them: a training
    source's cached int16 codes into its benchmark's labels (no Python object per row), else
    the rows' own labels, numbered in order of appearance."""
    if isinstance(rows, TrainSource):
        codes = rows.codes()
        if not (codes == NO_CODE).any():
            return codes, tuple(rows.benchmark.labels)
        rows = rows.examples()  # a label outside the benchmark's set: read from the rows
    labels: dict[str, int] = {}
    codes = np.fromiter((labels.setdefault(e.label, len(labels)) for e in rows), dtype=np.int32, count=len(rows))
    return codes, tuple(labels)


def gold_labels(rows: Sequence[Example]) -> list[str]:
    """The gold labels of a training source or a plain list of examples."""
    return rows.gold_labels() if isinstance(rows, TrainSource) else [e.label for e in rows]


def data_key(rows: Iterable[Example]) -> str | None:
    """What keys the rows' tokenized text without reading it: a source's data fingerprint (None for
    a plain list, whose texts are the key)."""
    return rows.fingerprint if isinstance(rows, TrainSource) else None


def source_name(benchmark: Benchmark, split: str, rows: Sequence[Example]) -> str:
    """A training source's name in the run's records: a :class:`TrainSource`'s own (with its
    selection), else ``<benchmark>/<split>``."""
    return rows.name if isinstance(rows, TrainSource) else f"{benchmark.name}/{split}"
