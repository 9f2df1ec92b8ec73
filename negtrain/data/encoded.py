"""Tokenized splits, stored flat and cached on disk.

A split is tokenized once: token ids of all examples sit in one int32 tensor with an offsets
tensor, not in millions of small Python lists, so memory is the token data itself and batches are
built by slicing. The result is cached under ``<cache>/tokenized/`` keyed by the tokenizer, the
encoding settings and the examples' text, so a second run (or a sweep trial) skips tokenization.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, fields

import torch

from negtrain.benchmarks.files import cache_dir

CACHE_VERSION = "1"
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
        flat = torch.tensor([t for x in ids for t in x], dtype=torch.int32)
        types = None
        if type_ids is not None:
            types = torch.tensor([t for x in type_ids for t in x], dtype=torch.int8)
        flags = None if cue_flags is None else torch.tensor([f for x in cue_flags for f in x], dtype=torch.bool)
        return cls(flat, offsets, types, flags)

    @staticmethod
    def concat(parts: Sequence[EncodedSplit]) -> EncodedSplit:
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

    def as_dict(self) -> dict[str, torch.Tensor | None]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


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


def cached(key: str, build: Callable[[], EncodedSplit]) -> EncodedSplit:
    """Load the encoded split stored under ``key``, or build and store it."""
    if os.environ.get("NEGTRAIN_NO_TOKEN_CACHE"):
        return build()
    path = cache_dir() / "tokenized" / f"{key}.pt"
    if path.is_file():
        try:
            return EncodedSplit(**torch.load(path, weights_only=True))
        except Exception:  # a stale or damaged cache entry is rebuilt, never trusted
            path.unlink(missing_ok=True)
    split = build()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".part")
        os.close(fd)
        torch.save(split.as_dict(), tmp)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache only costs speed
    return split
