"""Tokenized splits, stored flat and cached on disk, read back memory-mapped.

A split is tokenized once: token ids of all examples sit in one int32 tensor with an offsets
tensor, not in millions of small Python lists, so memory is the token data itself and batches are
built by slicing. The result is cached under ``<cache>/tokenized/`` keyed by the tokenizer's
content, the encoding settings and the examples' text, so a second run (or a sweep trial) skips
tokenization.

Every process reads the stored file memory-mapped (``torch.load(mmap=True)``): the DDP ranks of a
node and their dataloader workers share one copy of the token data in the page cache instead of
each holding its own. The first process to need a split takes a file lock and tokenizes; the
others (other ranks, concurrent runs of a sweep) wait on the lock and then map its result, so a
split is never tokenized twice.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import torch

try:
    import fcntl
except ImportError:  # not POSIX: concurrent processes may each tokenize; results are identical
    fcntl = None

from negtrain.benchmarks.files import cache_dir

CACHE_VERSION = "2"
#: Texts per tokenizer call. The tokenizer returns Python lists, ~30x the size of the flat tensors
#: they become, so tokenizing MNLI (or a large corpus) in one call would peak at gigabytes.
TOKENIZE_CHUNK = 4096


def in_chunks(items: Sequence) -> Iterator[Sequence]:
    """``items`` in slices of TOKENIZE_CHUNK, for tokenizing a split piece by piece."""
    for start in range(0, len(items), TOKENIZE_CHUNK):
        yield items[start : start + TOKENIZE_CHUNK]


@dataclass
class EncodedSplit:
    input_ids: torch.Tensor  # int32, all examples' ids concatenated
    offsets: torch.Tensor  # int64, N + 1: example i is input_ids[offsets[i]:offsets[i+1]]
    token_type_ids: torch.Tensor | None = None  # int8, aligned with input_ids (BERT-style pairs)
    cue_flags: torch.Tensor | None = None  # bool, aligned with input_ids: tokens of a negation cue (cue masking)

    #: The cache entry this split was read from (None: built in memory), so a concatenation of
    #: cached splits can be cached too, and every process maps it instead of copying.
    cache_key: str | None = None

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def lengths(self) -> torch.Tensor:
        return self.offsets[1:] - self.offsets[:-1]

    @classmethod
    def from_lists(
        cls, ids: Sequence[Sequence[int]], type_ids: Sequence[Sequence[int]] | None, cue_flags: Sequence[Sequence[bool]] | None = None
    ) -> EncodedSplit:
        lengths = torch.tensor([len(x) for x in ids], dtype=torch.int64)
        offsets = torch.zeros(len(ids) + 1, dtype=torch.int64)
        torch.cumsum(lengths, 0, out=offsets[1:])
        total = int(offsets[-1])

        def flat(rows, dtype) -> torch.Tensor:
            # np.fromiter over a chained iterator: no intermediate list of Python ints.
            return torch.from_numpy(np.fromiter(itertools.chain.from_iterable(rows), dtype=dtype, count=total))

        types = None if type_ids is None else flat(type_ids, np.int8)
        flags = None if cue_flags is None else flat(cue_flags, np.bool_)
        return cls(flat(ids, np.int32), offsets, types, flags)

    @staticmethod
    def concat(parts: Sequence[EncodedSplit]) -> EncodedSplit:
        """The splits one after another. Splits read from the cache give a cached (mapped) result."""
        if len(parts) == 1:
            return parts[0]
        keys = [p.cache_key for p in parts]
        if parts and all(keys):
            return cached(fingerprint("concat", keys), lambda: EncodedSplit._concat(parts))
        return EncodedSplit._concat(parts)

    @staticmethod
    def _concat(parts: Sequence[EncodedSplit]) -> EncodedSplit:
        shifts = []
        total = 0
        for p in parts:
            shifts.append(p.offsets[:-1] + total)
            total += int(p.offsets[-1])
        offsets = torch.cat(shifts + [torch.tensor([total])])
        def aligned(name: str) -> torch.Tensor | None:
            values = [getattr(p, name) for p in parts]
            return torch.cat(values) if all(v is not None for v in values) else None

        return EncodedSplit(torch.cat([p.input_ids for p in parts]), offsets, aligned("token_type_ids"), aligned("cue_flags"))

    @staticmethod
    def of_chunks(parts: Sequence[EncodedSplit]) -> EncodedSplit:
        """The chunks of one split put together (none: an empty split)."""
        if len(parts) == 1:
            return parts[0]
        return EncodedSplit.concat(parts) if parts else EncodedSplit.from_lists([], None)

    def __reduce__(self):
        # A split read from the cache travels to a spawned dataloader worker (or any pickle) as its
        # cache key, and the receiver maps the same file: no copy of the token data per worker.
        if self.cache_key is not None:
            return (_mapped, (self.cache_key,))
        return (EncodedSplit, tuple(getattr(self, f.name) for f in fields(self)))

    def as_dict(self) -> dict[str, torch.Tensor | None]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "cache_key"}


def fingerprint(*parts: str | Sequence[str]) -> str:
    h = hashlib.sha256(CACHE_VERSION.encode())
    for part in parts:
        if isinstance(part, str):
            part = (part,)
        for text in part:
            h.update(text.encode("utf-8", "surrogatepass"))
            h.update(b"\x00")
        h.update(b"\x01")
    return h.hexdigest()[:32]


def tokenizer_signature(tokenizer) -> str:
    """What decides a tokenizer's ids: its class, vocabulary, merges, normalizer and added tokens,
    hashed from its content, not its path, so a moved copy still hits the cache and a retrained
    tokenizer saved over the same folder does not."""
    h = hashlib.sha256(type(tokenizer).__name__.encode())
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        spec = json.loads(backend.to_str())
        # Truncation and padding are call settings that transformers leaves on the backend.
        spec.pop("truncation", None)
        spec.pop("padding", None)
        h.update(json.dumps(spec, sort_keys=True).encode())
    else:
        h.update(json.dumps(sorted(tokenizer.get_vocab().items())).encode())
    h.update(json.dumps(tokenizer.special_tokens_map, sort_keys=True, default=str).encode())
    h.update(str(len(tokenizer)).encode())
    return h.hexdigest()[:32]


#: Splits this process tokenized (cache misses it built). Tests and perf/scaling.py read it to
#: show that nothing is tokenized twice.
builds = 0


def _load(path: Path, key: str) -> EncodedSplit | None:
    if not path.is_file():
        return None
    try:
        # mmap: the tensors are views of the file; pages are shared by every process mapping it.
        stored = torch.load(path, mmap=True, weights_only=True)
        return EncodedSplit(**stored, cache_key=key)
    except Exception:  # a stale or damaged cache entry is rebuilt, never trusted
        path.unlink(missing_ok=True)
        return None


def _mapped(key: str) -> EncodedSplit:
    """The cached split ``key``, mapped (how a pickled cached split is rebuilt)."""
    split = _load(cache_dir() / "tokenized" / f"{key}.pt", key)
    if split is None:
        raise FileNotFoundError(f"tokenized split {key} is no longer in the cache {cache_dir() / 'tokenized'}")
    return split


@contextlib.contextmanager
def _exclusive(path: Path):
    """Hold the lock of cache entry ``path``: one process builds it while the others wait."""
    if fcntl is None:
        yield
        return
    try:
        handle = open(path.with_suffix(".lock"), "a+b")
    except OSError:  # a read-only cache: nothing to coordinate, nothing will be written
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _build(build: Callable[[], EncodedSplit]) -> EncodedSplit:
    global builds
    builds += 1
    return build()


def cached(key: str, build: Callable[[], EncodedSplit]) -> EncodedSplit:
    """The encoded split stored under ``key``, memory-mapped; built and stored first if missing."""
    if os.environ.get("NEGTRAIN_NO_TOKEN_CACHE"):
        return _build(build)
    path = cache_dir() / "tokenized" / f"{key}.pt"
    if (split := _load(path, key)) is not None:
        return split
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
    with _exclusive(path):
        # Another process (a DDP rank, a parallel sweep trial) may have built it while we waited.
        if (split := _load(path, key)) is not None:
            return split
        split = _build(build)
        try:
            fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".part")
            os.close(fd)
            torch.save(split.as_dict(), tmp)
            os.replace(tmp, path)
        except OSError:
            return split  # a read-only cache only costs speed
        # Map what was stored, so this process, too, holds no private copy of the token data; the
        # built copy goes first, so the peak is not the built and the mapped data side by side.
        del split
        mapped = _load(path, key)
    return mapped if mapped is not None else _build(build)  # rebuilt only if the file vanished
