"""The files of one entry of the token store (:mod:`negtrain.data.encoded`): writing its column
files with their hashes and its sealed ``meta.json``, hashing and stamping files, the lock one
builder holds, and the bounded set of read descriptors that :meth:`EncodedSplit.span` reads from."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import types
from typing import BinaryIO
from pathlib import Path

import numpy as np
import xxhash

fcntl: types.ModuleType | None
try:
    import fcntl
except ImportError:  # not POSIX: concurrent processes may each tokenize; results are identical
    fcntl = None

from negtrain.data.encoded_columns import DTYPES, Columns, checked_column, column_names
from negtrain.data.store_keys import CACHE_VERSION
from negtrain.core.errors import DataError

#: Bytes read per step when hashing a column file (read, not mapped: hashing adds nothing to RSS).
_HASH_BLOCK = 1 << 22


def file_hash(path: Path) -> str:
    """xxh3-128 of a file's bytes, read in blocks."""
    h = xxhash.xxh3_128()
    buffer = bytearray(_HASH_BLOCK)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buffer):
            h.update(view[:n])
    return h.hexdigest()


def seal(meta: dict) -> str:
    """The hash of everything in ``meta.json`` but the seal itself: an edited meta.json (a column
    dropped, a count changed) no longer matches it."""
    body = {k: v for k, v in meta.items() if k != "seal"}
    return xxhash.xxh3_128(json.dumps(body, sort_keys=True).encode()).hexdigest()


def stamp(path: Path) -> tuple[int, int, int]:
    st = path.stat()
    return st.st_ino, st.st_size, st.st_mtime_ns



#: Open read-only descriptors of column files, by path and the file's (inode, size, mtime) when
#: it was mapped, for :meth:`EncodedSplit.span` (``pread`` needs no shared position, so forked
#: workers use them as they are). Bounded: the oldest is closed.
_descriptors: dict[tuple, int] = {}
_MAX_DESCRIPTORS = 64


def descriptor(path: str, stamp: tuple[int, int, int]) -> int:
    fd = _descriptors.get((path, stamp))
    if fd is None:
        opened = os.open(path, os.O_RDONLY)
        if (os.fstat(opened).st_ino, os.fstat(opened).st_size, os.fstat(opened).st_mtime_ns) != stamp:
            os.close(opened)
            raise DataError(f"tokenized split file {path} changed while the run used it; run again to rebuild it")
        if len(_descriptors) >= _MAX_DESCRIPTORS:
            os.close(_descriptors.pop(next(iter(_descriptors))))
        fd = _descriptors[(path, stamp)] = opened
    return fd


def remove_entry(entry: Path) -> None:
    """Remove whatever sits at an entry's path: a folder, a file, or a (dangling) symlink."""
    if entry.is_symlink() or entry.is_file():
        entry.unlink()
    elif entry.exists():
        shutil.rmtree(entry)


@contextlib.contextmanager
def exclusive(lock: Path):
    """Hold the lock file ``lock``: one process builds the entry while the others wait."""
    if fcntl is None:
        yield
        return
    try:
        handle = open(lock, "a+b")
    except OSError:  # a read-only cache: nothing to coordinate, nothing will be written
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class EntryWriter:
    """Appends encoded chunks to the column files of a ``.part`` directory."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.names: list[str] | None = None
        self.files: dict[str, BinaryIO] = {}
        self.examples = 0
        self.tokens = 0
        self.offsets = open(folder / "offsets.bin", "wb")
        #: Each column file's hash, updated with every byte written (no second read).
        self.hashes = {"offsets": xxhash.xxh3_128()}
        self._write("offsets", self.offsets, np.zeros(1, np.int64).tobytes())

    def _write(self, name: str, f, data: bytes) -> None:
        f.write(data)
        self.hashes[name].update(data)

    def append(self, chunk: Columns) -> None:
        if self.names is None:
            self.names = column_names(chunk)
            self.files = {n: open(self.folder / f"{n}.bin", "wb") for n in self.names}
            self.hashes.update({n: xxhash.xxh3_128() for n in self.names})
        lengths = np.asarray(chunk["lengths"], dtype=np.int64)
        for name in self.names:
            self._write(name, self.files[name], checked_column(chunk, name, self.names).tobytes())
        self._write("offsets", self.offsets, (np.cumsum(lengths) + self.tokens).tobytes())
        self.examples += len(lengths)
        self.tokens += int(lengths.sum())

    def finish(self, key: str) -> None:
        if self.names is None:  # no chunks: an empty split
            self.append({"lengths": np.zeros(0, np.int64), "input_ids": np.zeros(0, np.int32)})
        for f in [self.offsets, *self.files.values()]:
            f.close()
        names = self.names or []  # set by the append above
        meta = {"version": CACHE_VERSION, "key": key, "examples": self.examples, "tokens": self.tokens,
                "columns": {n: np.dtype(DTYPES[n]).name for n in names},
                "hashes": {n: h.hexdigest() for n, h in self.hashes.items()}}
        meta["seal"] = seal(meta)
        # meta.json last: a folder without it is never read, whatever else it holds.
        (self.folder / "meta.json").write_text(json.dumps(meta) + "\n")

    def abandon(self) -> None:
        for f in [self.offsets, *self.files.values()]:
            f.close()
