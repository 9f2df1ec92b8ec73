"""One encoded chunk as flat column arrays: the columns a tokenized split may have, their dtypes,
and the checks that every chunk of a split has the same columns, each as long as its lengths say.
The token store (:mod:`negtrain.data.encoded`) writes and reads exactly these columns."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import torch

#: The columns a split may have, with their dtypes. ``lengths`` (int64, one per example) is how an
#: encoder hands over the example boundaries; the store keeps them as ``offsets``.
DTYPES = {"input_ids": np.int32, "token_type_ids": np.int8, "cue_flags": np.bool_}
TORCH_DTYPES = {np.dtype(np.int32): torch.int32, np.dtype(np.int64): torch.int64, np.dtype(np.int8): torch.int8, np.dtype(np.bool_): torch.bool}

#: One encoded chunk: ``lengths`` and ``input_ids``, and optionally the other columns of DTYPES.
Columns = dict[str, np.ndarray]


def columns(ids: Sequence[Sequence[int]], token_type_ids: Sequence[Sequence[int]] | None = None,
            cue_flags: Sequence[Sequence[bool]] | None = None) -> Columns:
    """The flat arrays of one chunk's tokenizer output (lists of per-example lists)."""
    lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
    total = int(lengths.sum())

    def flat(rows, dtype) -> np.ndarray:
        # np.fromiter over a chained iterator: no intermediate list of Python ints.
        return np.fromiter(itertools.chain.from_iterable(rows), dtype=dtype, count=total)

    out = {"lengths": lengths, "input_ids": flat(ids, np.int32)}
    if token_type_ids is not None:
        out["token_type_ids"] = flat(token_type_ids, np.int8)
    if cue_flags is not None:
        out["cue_flags"] = flat(cue_flags, np.bool_)
    return out


def column_names(chunk: Columns) -> list[str]:
    unknown = set(chunk) - set(DTYPES) - {"lengths"}
    if unknown:
        raise ValueError(f"encoded chunk has unknown columns {sorted(unknown)}; a split stores {sorted(DTYPES)}")
    return [n for n in DTYPES if n in chunk]


def checked_column(chunk: Columns, name: str, names: list[str]) -> np.ndarray:
    """Column ``name`` of ``chunk``, in its dtype, after checking the chunk is one of its split."""
    if column_names(chunk) != names:
        raise ValueError(f"encoded chunk has columns {column_names(chunk)}, the split's first chunk had {names}")
    values: np.ndarray = np.ascontiguousarray(chunk[name], dtype=DTYPES[name])
    if len(values) != int(chunk["lengths"].sum()):
        raise ValueError(f"encoded chunk: column {name} has {len(values)} tokens, its lengths add up to {int(chunk['lengths'].sum())}")
    return values
