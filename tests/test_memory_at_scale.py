"""A run's memory does not grow with the number of training pairs (issue 39): the training
targets and the sampler's epoch are arrays, not a Python object per pair, and batches read the
token store's files instead of touching its mapping (a touched page of a mapping stays resident)."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from negtrain.benchmarks.registry import get_benchmark
from negtrain.data import encoded as store
from negtrain.data.collate import PadCollator
from negtrain.data.sampler import BatchSampler
from negtrain.data.sources import TrainSource, label_codes
from negtrain.models.heads import coded_target_mask, target_mask

HEAD = ["entailment", "neutral", "contradiction"]


@pytest.fixture
def mnli(tmp_path, monkeypatch):
    """Write ``n`` MNLI train rows (Hub schema) and return the training source over them."""
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("NEGTRAIN_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "data" / "nyu-mll" / "multi_nli"
    folder.mkdir(parents=True)

    def make(n: int) -> TrainSource:
        rows = (json.dumps({"premise": f"p {i}", "hypothesis": f"h {i}", "label": i % 3, "pairID": f"{i}e"}) for i in range(n))
        (folder / "train.jsonl").write_text("\n".join(rows) + "\n")
        source = TrainSource(get_benchmark("mnli"), "train")
        source.codes()  # the one pass over the file; what follows is what a warm start does
        return source

    return make


def _traced_peak(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _targets_and_first_batch(source: TrainSource) -> int:
    """The traced peak of what a run builds per pair before its first step: the training targets
    and the sampler's first batch."""
    lengths = np.full(len(source), 20, dtype=np.int64)  # the store's, made before: not counted

    def build() -> None:
        codes, labels = label_codes(source)
        targets = coded_target_mask(codes, labels, HEAD)
        sampler = BatchSampler(lengths, 32, shuffle=True, bucket=True, seed=1, limit=20)
        assert len(next(iter(sampler))) == 32 and targets.shape == (len(source), 3)

    return _traced_peak(build)


def test_targets_and_the_sampler_cost_a_few_bytes_a_pair(mnli):
    small = mnli(5_000)
    _targets_and_first_batch(small)  # first calls import and cache things: not per pair
    small_peak = _targets_and_first_batch(small)
    large = mnli(20_000)
    large_peak = _targets_and_first_batch(large)
    per_pair = (large_peak - small_peak) / 15_000
    # An int64 order of the epoch (or the codes widened to index the targets): 8 bytes a pair at
    # the peak. Before, a Python list of the gold labels, a list of their target rows and the
    # codes as Python ints made 28 bytes a pair; one Python object per pair costs 30 or more.
    assert per_pair < 12, f"{per_pair:.1f} bytes per added pair"


def test_label_codes_of_a_source_are_its_cached_int16_array(mnli):
    source = mnli(300)
    codes, labels = label_codes(source)
    assert codes is source.codes() and codes.dtype == np.int16 and labels == tuple(source.benchmark.labels)
    # The same targets as from the labels themselves.
    gold = [labels[c] for c in codes.tolist()]
    assert coded_target_mask(codes, labels, HEAD).tolist() == target_mask(gold, HEAD).tolist()
    # A two-way label on a three-way head: the set of head classes it stands for.
    assert target_mask(["not_entailment", "entailment"], HEAD).tolist() == [[False, True, True], [True, False, False]]


def _resident_kb(path: Path) -> int:
    """Resident kB of this process's mappings of ``path`` (from /proc/self/smaps)."""
    total, current = 0, None
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if fields and "-" in fields[0] and len(fields) >= 5:
            current = fields[-1] if len(fields) >= 6 else None
        elif fields and fields[0] == "Rss:" and current == str(path):
            total += int(fields[1])
    return total


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="reads /proc/self/smaps")
def test_batches_read_the_store_without_making_its_files_resident(tmp_path, monkeypatch):
    monkeypatch.setenv("NEGTRAIN_CACHE_DIR", str(tmp_path / "cache"))
    n, width = 200_000, 24  # 19 MB of token ids
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 30_000, size=n * width).astype(np.int32)

    def chunks():
        for a in range(0, n, 50_000):
            yield {"lengths": np.full(50_000, width, dtype=np.int64), "input_ids": ids[a * width : (a + 50_000) * width]}

    split = store.build_split("memory-at-scale-test", [None], None, rows=n, _columns=chunks())
    assert split.files is not None
    collate = PadCollator(split, pad_id=0)
    for _ in range(20):  # the 20 random batches of 32 of the run
        rows = rng.choice(n, size=32, replace=False).tolist()
        batch = collate(rows)
        expected = np.stack([ids[i * width : (i + 1) * width] for i in rows])
        assert np.array_equal(batch["input_ids"].numpy(), expected)
    path = store.cache_dir() / "tokenized" / "memory-at-scale-test" / "input_ids.bin"
    # Read through the mapping, 640 random rows would make most of the 19 MB file resident (the
    # kernel maps up to 2 MB around each touched page); read from the file, none of it.
    assert _resident_kb(path) < 1024, f"{_resident_kb(path)} kB of the store's ids are resident"
