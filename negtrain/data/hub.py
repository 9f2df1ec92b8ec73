"""Benchmarks hosted as Hugging Face Hub datasets, read as JSON lines.

A split of dataset ``<namespace>/<name>`` is the file ``<namespace>/<name>/<split>.jsonl``,
looked up like every other benchmark file (:mod:`negtrain.data.files`): in ``$NEGTRAIN_DATA_DIR``,
then in the cache; otherwise (unless ``NEGTRAIN_OFFLINE=1``) it is fetched with ``datasets`` and
written to the cache in that layout, so the next run reads it offline.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from negtrain.data.files import cache_dir, data_dir, offline
from negtrain.errors import DataError


def hub_split_file(dataset_id: str, split: str) -> Path:
    rel = Path(dataset_id) / f"{split}.jsonl"
    looked = []
    mirror = data_dir()
    if mirror is not None:
        if (mirror / rel).is_file():
            return mirror / rel
        looked.append(mirror / rel)
    cached = cache_dir() / rel
    if cached.is_file():
        return cached
    looked.append(cached)
    hint = f"put the split there as JSON lines (one row per line), or set NEGTRAIN_DATA_DIR to a folder holding {rel}"
    if offline():
        raise DataError(f"data file not found; looked in {', '.join(map(str, looked))}; {hint}")
    try:
        from datasets import load_dataset

        rows = load_dataset(dataset_id, split=split)
        cached.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=cached.parent, prefix=f".{cached.name}.", suffix=".part")
        os.close(fd)
        rows.to_json(tmp, lines=True, force_ascii=False)
        os.replace(tmp, cached)
    except Exception as exc:  # the Hub is unreachable, the dataset is gated, ...
        raise DataError(
            f"data file not found; looked in {', '.join(map(str, looked))}; loading '{dataset_id}' "
            f"split '{split}' from the Hub failed ({exc}); {hint}"
        ) from None
    return cached
