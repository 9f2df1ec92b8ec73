"""A run over a damaged token store and label cache gives the numbers of a clean run: the damage is
found and rebuilt, never read (negtrain/data/encoded.py, negtrain/data/sources.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from conftest import FAST
from negtrain import cli

ARGS = ["fit", "--recipe", "scone_minilm", *FAST, "--trainer.max_epochs=1", "--trainer.deterministic=true", "--trainer.torch_threads=1"]


def _numbers(run: Path) -> list:
    out = []
    for line in (run / "metrics.jsonl").read_text().splitlines():
        r = json.loads(line)
        out.append((r["benchmark"], r["split"], r["metrics"], r.get("sources")))
    return out


def _entries(cache: Path) -> dict[int, Path]:
    """The token store's entries by their number of rows."""
    found = {}
    for meta in (cache / "tokenized").glob("*/meta.json"):
        found.setdefault(json.loads(meta.read_text())["examples"], []).append(meta.parent)
    return found


@pytest.mark.slow  # two MiniLM fits, ~25 s on 2 cores
def test_a_damaged_store_gives_a_clean_runs_numbers(tmp_path, monkeypatch, data_dir):
    cache = tmp_path / "cache"
    monkeypatch.setenv("NEGTRAIN_CACHE_DIR", str(cache))
    assert cli.main([*ARGS, "--output-dir", str(tmp_path / "clean")]) == 0
    clean = _numbers(tmp_path / "clean")
    entries = _entries(cache)
    scone_test, monli_test = entries[1200], entries[200]
    assert len(scone_test) == 1 and len(monli_test) == 1
    # MoNLI test's entry replaced by another split's (ScoNe test's folder, before its damage), then
    # ScoNe test's ids shifted to other valid ids.
    shutil.rmtree(monli_test[0])
    shutil.copytree(scone_test[0], monli_test[0])
    ids = np.fromfile(scone_test[0] / "input_ids.bin", dtype=np.int32)
    np.where(ids > 1000, ids + 1, ids).astype(np.int32).tofile(scone_test[0] / "input_ids.bin")
    # Every training label code flipped (entailment <-> neutral/contradiction codes).
    flipped = 0
    for npz in (cache / "sources").glob("*.npz"):
        with np.load(npz) as z:
            parts = {k: z[k] for k in z.files}
        parts["codes"] = np.where(parts["codes"] == 0, 1, 0).astype(np.int16)
        with open(npz, "wb") as f:
            np.savez(f, **parts)
        flipped += 1
    assert flipped == 2
    assert cli.main([*ARGS, "--output-dir", str(tmp_path / "damaged")]) == 0
    assert _numbers(tmp_path / "damaged") == clean
