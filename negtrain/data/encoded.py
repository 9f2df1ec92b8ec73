"""Tokenized splits in a columnar store on disk, built chunk by chunk and read back memory-mapped.

A split is tokenized once: token ids of all examples sit in one int32 tensor with an offsets
tensor, not in millions of small Python lists, so memory is the token data itself and batches are
built by slicing. The result is cached under ``<cache>/tokenized/<key>/`` keyed by the tokenizer's
content, the encoding settings and the data (the caller's ``key``, see :func:`fingerprint`), so a
second run (or a sweep trial, or another DDP rank) skips tokenization.

The store
    One directory per split: ``meta.json`` (format version, number of examples and tokens, the
    columns and their dtypes) and one raw little-endian array per column: ``input_ids.bin``
    (int32), ``offsets.bin`` (int64, N + 1: example i is ``input_ids[offsets[i]:offsets[i+1]]``),
    and, when the encoder makes them, ``token_type_ids.bin`` (int8) and ``cue_flags.bin`` (bool),
    aligned with ``input_ids``. Every process maps the files (``torch.from_file``, a private
    mapping): the tensors are views of the page cache, which the DDP ranks of a node and their
    dataloader workers share, so no process holds its own copy and opening a split costs no
    reading. Chosen over ``datasets``/Arrow because a column is exactly the flat tensor the
    collator slices: opening is a few ``mmap`` calls with no per-row Python and no conversion to
    torch (Arrow hands back its own arrays, and ragged rows as list columns that must be
    flattened or converted per batch). Measured on a 2-core machine for 100k examples of 20-80
    tokens: opening the split takes 0.6 ms (``datasets.load_from_disk``: 7.5 ms) and fetching a
    random batch of 32 examples' ids as tensors 0.17 ms (Arrow with torch format: 2.0 ms).

Building is streamed
    :func:`build_split` takes an *iterable* of chunks (lists of texts or examples, see
    :func:`in_chunks`) and a function encoding one chunk into :func:`columns` (numpy arrays), and
    appends each chunk's arrays to the files as it goes, so the peak memory of a build is a few
    chunks, never the whole split (and never twice its storage). Chunks are encoded on
    ``num_proc`` processes (:mod:`negtrain.data.tokenizing`), results kept in order, so the store
    is the same byte for byte whatever the number of processes::

        def encode(chunk):
            enc = tokenizer([e.inputs[0] for e in chunk], truncation=True, max_length=128)
            return columns(enc["input_ids"])

        split = build_split(fingerprint("texts", tokenizer_signature(tokenizer), "128", data_id),
                            in_chunks(stream_of_examples), encode, num_proc=None)

    The files are written into ``<key>.<random>.part/`` and renamed to ``<key>/`` only when
    complete (a rename is atomic), so a build that is killed leaves nothing that is read as the
    split; the next builder removes its leftovers.

Verified, not trusted
    ``meta.json`` records the entry's key, its row and token counts, its columns, an xxh3-128 hash
    of each column file (computed while writing) and a seal: the hash of all of that. Opening an
    entry checks the seal, the key (an entry copied over another's folder names another key), the
    file sizes, the row count the caller expects (the benchmark's rows: an entry rewritten with
    half its rows is caught), and each file's hash. Any mismatch rebuilds the entry; a damaged
    entry is never read. Hashing reads the files once per process: measured on a 2-core machine,
    an entry of 400k pairs of 20-80 tokens (102 MB, in the page cache) opens in 31-40 ms verified
    (0.6 ms unverified before). A process remembers what it verified (by inode, size and
    modification time), so its later opens (a concatenation, forked workers) cost 0.4-3 ms.

One builds, the others wait
    The first process to need a split takes a file lock (``<key>.lock``) and builds; the others
    (other ranks, concurrent runs of a sweep) wait on the lock and then map its result, so a
    split is never tokenized twice. :data:`builds` counts the splits this process built.

A split read from the store pickles as its key (a spawned dataloader worker maps the same files
instead of receiving a copy). ``NEGTRAIN_NO_TOKEN_CACHE=1`` builds every split in memory.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch

from negtrain.benchmarks.files import cache_dir
from negtrain.data.encoded_columns import DTYPES, TORCH_DTYPES, Columns, column_names, checked_column, columns
from negtrain.data.store_files import EntryWriter, descriptor, exclusive, file_hash, remove_entry, seal, stamp
from negtrain.data.store_keys import CACHE_VERSION, fingerprint
from negtrain.data.tokenizing import encode_in_parallel
from negtrain.core.errors import DataError

#: Texts per tokenizer call. The tokenizer returns Python lists, ~30x the size of the flat arrays
#: they become, so tokenizing MNLI (or a large corpus) in one call would peak at gigabytes.
TOKENIZE_CHUNK = 4096


def in_chunks(items: Iterable, size: int | None = None) -> Iterator[list]:
    """``items`` (a list or a stream) in lists of ``size`` (default :data:`TOKENIZE_CHUNK`, read
    when called, so a test that lowers it is obeyed), for tokenizing a split piece by piece."""
    items = iter(items)
    while chunk := list(itertools.islice(items, size or TOKENIZE_CHUNK)):
        yield chunk


@dataclass
class EncodedSplit:
    input_ids: torch.Tensor  # int32, all examples' ids concatenated
    offsets: torch.Tensor  # int64, N + 1: example i is input_ids[offsets[i]:offsets[i+1]]
    token_type_ids: torch.Tensor | None = None  # int8, aligned with input_ids (BERT-style pairs)
    cue_flags: torch.Tensor | None = None  # bool, aligned with input_ids: tokens of a negation cue (cue masking)

    #: The store entry this split was read from (None: built in memory), so a concatenation of
    #: stored splits can be stored too, and every process maps it instead of copying.
    cache_key: str | None = None
    #: Each column's file and the (inode, size, mtime) it had when mapped, for a split read from
    #: the store (None: built in memory): what :meth:`span` reads from.
    files: dict[str, tuple[str, tuple[int, int, int]]] | None = field(default=None, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def lengths(self) -> torch.Tensor:
        return self.offsets[1:] - self.offsets[:-1]

    @classmethod
    def from_lists(
        cls, ids: Sequence[Sequence[int]], type_ids: Sequence[Sequence[int]] | None, cue_flags: Sequence[Sequence[bool]] | None = None
    ) -> EncodedSplit:
        """A split built in memory from per-example lists (small splits; large ones: build_split)."""
        return cls.from_columns([columns(ids, type_ids, cue_flags)])

    @classmethod
    def from_columns(cls, chunks: Sequence[Columns]) -> EncodedSplit:
        """A split built in memory from encoded chunks."""
        names = column_names(chunks[0] if chunks else {"input_ids": np.zeros(0, np.int32)})
        lengths = np.concatenate([c["lengths"] for c in chunks]) if chunks else np.zeros(0, np.int64)
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        tensors: dict[str, Any] = {}
        for name in names:
            parts = [checked_column(c, name, names) for c in chunks]
            tensors[name] = torch.from_numpy(np.concatenate(parts) if parts else np.zeros(0, DTYPES[name]))
        return cls(offsets=torch.from_numpy(offsets), **tensors)

    @staticmethod
    def concat(parts: Sequence[EncodedSplit]) -> EncodedSplit:
        """The splits one after another, copied chunk by chunk. Splits read from the store give a
        stored (mapped) result. A column that not every part has is left out."""
        if len(parts) == 1:
            return parts[0]
        keys = [p.cache_key for p in parts if p.cache_key]
        key = fingerprint("concat", keys) if parts and len(keys) == len(parts) else None
        names = [n for n in DTYPES if all(getattr(p, n) is not None for p in parts)]
        return build_split(key, [None], lambda _: {}, num_proc=1, rows=sum(len(p) for p in parts),
                           _columns=_slices(parts, names))

    def span(self, name: str, start: int, n: int) -> torch.Tensor:
        """Column ``name``'s values ``start`` to ``start + n``. A stored split reads them from its
        file (``pread``), not through the mapping: a page of a mapping, once touched, stays in the
        process's resident memory, and the kernel maps up to 2 MB around each touch, so random
        batches from a split of millions of pairs would bring most of its files into the run's RSS
        (measured: 20 batches of 32 from 400k pairs made 66 of its 73 MB resident)."""
        file = (self.files or {}).get(name)
        if file is None or n == 0 or not hasattr(os, "pread"):  # no pread (Windows): the mapping
            return getattr(self, name)[start : start + n]
        path, stamp = file
        column = getattr(self, name)
        size = n * column.element_size()
        buffer = bytearray(os.pread(descriptor(path, stamp), size, start * column.element_size()))
        if len(buffer) != size:
            raise DataError(f"tokenized split {self.cache_key}: {path} ends before row data at {start + n}; run again to rebuild it")
        return torch.frombuffer(buffer, dtype=column.dtype)

    def __reduce__(self):
        # A split read from the store travels to a spawned dataloader worker (or any pickle) as its
        # key, and the receiver maps the same files: no copy of the token data per worker.
        if self.cache_key is not None:
            return (_mapped, (self.cache_key,))
        return (EncodedSplit, tuple(getattr(self, f.name) for f in fields(self)))

    def as_dict(self) -> dict[str, torch.Tensor | None]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("cache_key", "files")}




#: Examples per piece when copying stored splits into a concatenation (bounded memory).
_COPY_EXAMPLES = 65536


def _slices(parts: Sequence[EncodedSplit], names: list[str]) -> Iterator[Columns]:
    for part in parts:
        offsets = part.offsets.numpy()
        for a in range(0, len(part), _COPY_EXAMPLES):
            b = min(a + _COPY_EXAMPLES, len(part))
            lo, hi = int(offsets[a]), int(offsets[b])
            chunk = {"lengths": np.diff(offsets[a : b + 1])}
            for name in names:
                chunk[name] = part.span(name, lo, hi - lo).numpy()
            yield chunk



#: Splits this process tokenized (store misses it built). Tests and perf/scaling.py read it to
#: show that nothing is tokenized twice.
builds = 0


def _store() -> Path:
    return cache_dir() / "tokenized"


#: Entries this process verified, with the (inode, size, mtime) of each file when it did: a second
#: open of an unchanged entry (a concatenation, a forked worker) does not hash it again.
_verified: dict[str, tuple] = {}

def _open(entry: Path, key: str, rows: int | None = None) -> EncodedSplit | None:
    """The split stored in ``entry``, mapped; None if there is none, it is not whole, or it is not
    what it claims (see "Verified, not trusted" above). ``rows``: the number of rows the caller
    knows the split has (None: not known)."""
    try:
        meta = json.loads((entry / "meta.json").read_text())
        if not isinstance(meta, dict) or meta.get("version") != CACHE_VERSION or meta.get("key") != key:
            return None
        if meta.get("seal") != seal(meta):
            return None
        examples, tokens, cols, hashes = meta["examples"], meta["tokens"], meta["columns"], meta["hashes"]
        if rows is not None and examples != rows:
            return None
        if "input_ids" not in cols or set(hashes) != {"offsets", *cols}:
            return None
        sizes = {"offsets": (examples + 1, np.dtype(np.int64))}
        for name, dtype in cols.items():
            if name not in DTYPES or np.dtype(dtype) != np.dtype(DTYPES[name]):
                return None
            sizes[name] = (tokens, np.dtype(dtype))
        paths = {name: entry / f"{name}.bin" for name in sizes}
        stamps = tuple((name, stamp(p)) for name, p in paths.items())
        for (name, (_, size, _)) in stamps:
            count, dtype = sizes[name]
            if size != count * dtype.itemsize:
                return None
        if _verified.get(str(entry)) != (key, stamps):
            if any(file_hash(p) != hashes[name] for name, p in paths.items()):
                return None
            _verified[str(entry)] = (key, stamps)
        tensors = {}
        for name, (count, dtype) in sizes.items():
            # A private mapping: the tensor is a view of the page cache, shared by every process
            # mapping the file; a write (none is made) would copy the page, not change the file.
            tensors[name] = torch.from_file(str(paths[name]), shared=False, size=count, dtype=TORCH_DTYPES[dtype]) if count else torch.zeros(0, dtype=TORCH_DTYPES[dtype])
        files = {name: (str(paths[name]), stamp) for name, stamp in stamps}
        return EncodedSplit(**tensors, cache_key=key, files=files)
    except (OSError, ValueError, KeyError, TypeError, RuntimeError, AttributeError, OverflowError):
        return None  # missing or damaged: rebuilt, never trusted




def _mapped(key: str) -> EncodedSplit:
    """The stored split ``key``, mapped (how a pickled stored split is rebuilt)."""
    split = _open(_store() / key, key)
    if split is None:
        raise DataError(f"tokenized split {key} is no longer whole in the token store {_store()} (removed or changed "
                        "while the run used it); run again to rebuild it")
    return split




def build_split(key: str | None, chunks: Iterable, encode_chunk: Callable[[Any], Columns], num_proc: int | None = None,
                rows: int | None = None, _columns: Iterable[Columns] | None = None) -> EncodedSplit:
    """The split stored under ``key``, mapped; built first, from ``encode_chunk(c)`` for each chunk
    ``c`` of ``chunks`` (on ``num_proc`` processes, default all cores), if the store lacks it.

    ``chunks`` is read once, as a stream, and only if the split is built. ``rows``: the number of
    rows the split must have, when the caller knows it (a stored entry of another size is rebuilt).
    ``key`` None builds in memory without storing (as does ``NEGTRAIN_NO_TOKEN_CACHE=1``).
    ``_columns``: already encoded chunks, used instead of encoding ``chunks`` (concatenating
    stored splits).
    """
    global builds

    def encoded() -> Iterable[Columns]:
        return _columns if _columns is not None else encode_in_parallel(chunks, encode_chunk, num_proc)

    def in_memory() -> EncodedSplit:
        global builds
        builds += _columns is None  # a concatenation in memory copies, it does not tokenize
        return _counted(EncodedSplit.from_columns(list(encoded())), rows, key)

    if key is None or os.environ.get("NEGTRAIN_NO_TOKEN_CACHE"):
        return in_memory()
    root = _store()
    entry = root / key
    if (split := _open(entry, key, rows)) is not None:
        return split
    with contextlib.suppress(OSError):
        root.mkdir(parents=True, exist_ok=True)
    with exclusive(root / f"{key}.lock"):
        # Another process (a DDP rank, a parallel sweep trial) may have built it while we waited.
        if (split := _open(entry, key, rows)) is not None:
            return split
        try:
            # Holding the lock, we are the only builder: leftovers are from builds that died.
            for stale in root.glob(f"{key}.*.part"):
                shutil.rmtree(stale, ignore_errors=True)
        except OSError:
            pass
        try:
            remove_entry(entry)  # a damaged or older-format entry, or whatever else sits at its path
        except OSError as exc:
            # Kept out of use, never read: this run tokenizes in memory.
            print(f"warning: the token store {root} holds a damaged entry {entry.name} that cannot be replaced "
                  f"({exc.strerror or exc}); this run tokenizes in memory. Remove {entry} (or set NEGTRAIN_CACHE_DIR "
                  "to another folder) to store it again", file=sys.stderr, flush=True)
            return in_memory()
        try:
            part = Path(tempfile.mkdtemp(dir=root, prefix=f"{key}.", suffix=".part"))
        except OSError:
            return in_memory()  # a read-only cache only costs speed
        builds += 1
        writer = EntryWriter(part)
        try:
            for chunk in encoded():
                with _writing(root, key):
                    writer.append(chunk)
            with _writing(root, key):
                writer.finish(key)
            _counted(writer, rows, key)
            with _writing(root, key):
                os.replace(part, entry)
        except BaseException:
            writer.abandon()
            shutil.rmtree(part, ignore_errors=True)
            raise
        split = _open(entry, key, rows)
    if split is None:
        raise DataError(f"the token store {root}: entry {key} was written but does not read back whole; "
                        "another process may be changing the store, or its file system loses writes")
    return split


@contextlib.contextmanager
def _writing(root: Path, key: str):
    """A failed write into the store (a full disk, a store changed under us) as one line naming the
    store, not the model or the data being encoded."""
    try:
        yield
    except OSError as exc:
        raise DataError(f"the token store {root}: cannot write entry {key} ({exc.strerror or exc}); "
                        "free space there or set NEGTRAIN_CACHE_DIR to another folder") from exc


def _counted(split, rows: int | None, key: str | None):
    """``split`` (or a writer) after checking it has the ``rows`` its caller expects: the data
    changed while it was being read, or its reader disagrees with itself."""
    got = split.examples if isinstance(split, EntryWriter) else len(split)
    if rows is not None and got != rows:
        raise DataError(f"tokenized split {key or ''}: encoding gave {got} rows, the data has {rows}; "
                        "did a data file change during the run?")
    return split


def cached(key: str, build: Callable[[], EncodedSplit], rows: int | None = None) -> EncodedSplit:
    """The split stored under ``key``, mapped; ``build()`` (a split in memory) stored first if
    missing. For small splits; a large one streams through :func:`build_split`. ``rows``: as there."""
    return build_split(key, [None], lambda _: split_columns(build()), num_proc=1, rows=rows)


def split_columns(split: EncodedSplit) -> Columns:
    """A split in memory as one encoded chunk."""
    out = {"lengths": split.lengths.numpy()}
    for name in DTYPES:
        if (value := getattr(split, name)) is not None:
            out[name] = value.numpy()
    return out
