"""``evaluate --predictions`` reads its file line by line and keeps, per line, only what scoring
reads (negtrain/evaluation/predictions.py): memory follows the number of predictions, not the file's size."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

from negtrain.benchmarks.registry import get_benchmark
from negtrain.evaluation.predictions import KEPT_FIELDS, read_lines, read_predictions

REPO = Path(__file__).resolve().parent.parent


def _write(path: Path, examples, extra_bytes: int) -> None:
    with open(path, "w") as f:
        for i, e in enumerate(examples):
            f.write(json.dumps({"id": e.id, "prediction": e.label, "raw_response": "x" * extra_bytes, "n": i}) + "\n")


def test_lines_are_read_one_at_a_time_and_extra_fields_dropped(tmp_path, data_dir):
    bench = get_benchmark("monli")
    examples = bench.load("test")
    path = tmp_path / "p.jsonl"
    _write(path, examples, 1000)
    lines = read_lines(path)
    first = next(lines)  # a generator: the first line comes before the rest is read
    assert json.loads(first)["id"] == examples[0].id
    lines.close()
    rows = read_predictions(path, bench)
    assert len(rows) == len(examples)
    assert all(set(r.fields) <= set(KEPT_FIELDS) and "raw_response" not in r.fields for r in rows)


def _peak_mb(path: Path) -> float:
    """Peak RSS of an ``evaluate --predictions`` subprocess on ``path`` (this call's child only:
    run from a fresh helper process so the children of earlier calls do not count)."""
    probe = (
        "import resource, subprocess, sys;"
        f"r = subprocess.run([sys.executable, '-m', 'negtrain', 'evaluate', '--benchmark', 'monli', '--split', 'test',"
        f" '--predictions', {str(path)!r}, '--bootstrap', '0'], capture_output=True);"
        "assert r.returncode == 0, r.stderr[-2000:];"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return float(out.stdout.strip().splitlines()[-1])


def test_a_large_file_costs_no_more_memory_than_a_small_one(tmp_path, data_dir):
    examples = get_benchmark("monli").load("test")
    small, large = tmp_path / "small.jsonl", tmp_path / "large.jsonl"
    _write(small, examples, 10)
    _write(large, examples, 300_000)  # 60 MB: read whole, it would add several times that
    assert large.stat().st_size > 55e6
    assert _peak_mb(large) - _peak_mb(small) < 40  # loose: the same process, give or take allocator noise
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss > 0
