"""Training sources keep their text on disk: a warm start reads no data file and builds no
Example; a changed file (or a reader) is read afresh; bad rows still fail before the model loads."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from negtrain.benchmarks.base import Example
from negtrain.benchmarks.mnli import Mnli
from negtrain.benchmarks.registry import get_benchmark
from negtrain.data import encoded as store
from negtrain.data.sources import NO_CODE, TrainSource, gold_labels
from negtrain.core.errors import DataError

ROWS = [
    {"pairID": "1e", "premise": "A man is not sleeping.", "hypothesis": "A man is awake.", "label": 0, "genre": "fiction"},
    {"pairID": "2n", "premise": "A dog runs.", "hypothesis": "The dog is happy.", "label": 1, "genre": "fiction"},
    {"pairID": "3c", "premise": "Nobody came.", "hypothesis": "Everyone came.", "label": 2, "genre": "slate"},
    {"pairID": "4c", "premise": "It never rains here.", "hypothesis": "It rains here daily.", "label": 2, "genre": "travel"},
]


@pytest.fixture
def mnli_dir(tmp_path, monkeypatch):
    folder = tmp_path / "data" / "nyu-mll" / "multi_nli"
    folder.mkdir(parents=True)
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("NEGTRAIN_CACHE_DIR", str(tmp_path / "cache"))
    return folder


def write(folder, rows) -> None:
    (folder / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture
def reads(monkeypatch):
    """How many times the MNLI reader started reading a split (the real reader, counted)."""
    counter = {"n": 0}
    real = Mnli.stream

    def counted(self, split):
        counter["n"] += 1
        return real(self, split)

    monkeypatch.setattr(Mnli, "stream", counted)
    return counter


def test_size_and_labels_come_from_the_cache_once_the_files_were_read(mnli_dir, reads):
    write(mnli_dir, ROWS)
    first = TrainSource(get_benchmark("mnli"), "train")
    assert len(first) == 4 and reads["n"] == 1
    assert first.gold_labels() == ["entailment", "neutral", "contradiction", "contradiction"]
    assert first.codes().dtype == np.int16 and first.codes().tolist() == [0, 1, 2, 2]
    # A new process (a new source object) with the files unchanged: nothing is read.
    second = TrainSource(get_benchmark("mnli"), "train")
    assert second.fingerprint == first.fingerprint
    assert len(second) == 4 and second.gold_labels() == first.gold_labels()
    assert reads["n"] == 1
    # The rows themselves are still there when a builder asks for them: walked (one read) or
    # indexed (read whole, and kept).
    assert [e.id for e in second] == ["mnli/train/1e", "mnli/train/2n", "mnli/train/3c", "mnli/train/4c"]
    assert reads["n"] == 2
    assert second[2].inputs == ("Nobody came.", "Everyone came.") and second[3].label == "contradiction"
    assert reads["n"] == 3


def test_a_cold_source_is_read_row_by_row_and_kept_nowhere(mnli_dir):
    """Sizing a source and walking it (as tokenizing does) never holds the split: at row 2,000 of
    3,000 only a handful of Examples are alive (a list read would hold all of them)."""
    write(mnli_dir, [dict(ROWS[i % 4], pairID=f"{i}") for i in range(3000)])
    source = TrainSource(get_benchmark("mnli"), "train")
    assert len(source) == 3000
    # Counted against those alive before: benchmarks loaded earlier in the process stay (Benchmark.load keeps them).
    before = sum(type(o) is Example for o in gc.get_objects())
    alive = None
    for i, _ in enumerate(source):
        if i == 2000:
            alive = sum(type(o) is Example for o in gc.get_objects()) - before
    assert alive is not None and alive < 50
    assert source.examples()[2999].id == "mnli/train/2999"  # indexing reads whole, and keeps it


def test_a_changed_file_is_read_again(mnli_dir, reads):
    write(mnli_dir, ROWS)
    before = TrainSource(get_benchmark("mnli"), "train")
    assert len(before) == 4
    flipped = [dict(r, label=2 - r["label"]) for r in ROWS[:3]]
    write(mnli_dir, flipped)
    after = TrainSource(get_benchmark("mnli"), "train")
    assert after.fingerprint != before.fingerprint
    assert len(after) == 3 and after.gold_labels() == ["contradiction", "neutral", "entailment"]
    assert reads["n"] == 2


def test_a_malformed_row_fails_with_file_and_line_when_sized(mnli_dir):
    write(mnli_dir, ROWS[:2] + [dict(ROWS[2], label=7)])
    source = TrainSource(get_benchmark("mnli"), "train")  # naming the source reads nothing
    with pytest.raises(DataError, match=r"train.jsonl:3: field 'label': expected a class id"):
        len(source)


def test_the_fingerprint_is_the_same_in_every_process(mnli_dir):
    write(mnli_dir, ROWS)
    code = "from negtrain.benchmarks.registry import get_benchmark; print(get_benchmark('mnli').data_fingerprint('train'))"
    keys = {
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                       env=dict(os.environ, PYTHONHASHSEED=seed)).stdout.strip()
        for seed in ("1", "2")
    }
    assert len(keys) == 1 and keys == {get_benchmark("mnli").data_fingerprint("train")}


def test_labels_outside_the_label_set_are_read_from_the_rows(mnli_dir, monkeypatch):
    """A benchmark whose gold answers are free text has no codes: its labels come from the rows."""
    write(mnli_dir, ROWS)
    monkeypatch.setattr(Mnli, "labels", ("entailment", "neutral"))
    source = TrainSource(get_benchmark("mnli"), "train")
    assert source.codes().tolist() == [0, 1, NO_CODE, NO_CODE]
    assert gold_labels(source) == ["entailment", "neutral", "contradiction", "contradiction"]


def test_a_warm_nli_build_reads_no_text(mnli_dir, reads, minilm_path):
    """The whole NLI build path: the second build maps the stored tokens, takes targets from the
    codes, and reads no data file; its tensors equal the first build's."""
    from negtrain.recipes import load_recipe
    from negtrain.training.build import build

    write(mnli_dir, ROWS * 1 + [dict(r, pairID=f"x{r['pairID']}") for r in ROWS])
    overrides = {
        "data.train": [{"benchmark": "mnli", "split": "train"}], "data.eval": [], "selection.metric": None,
        "logger": "none", "model.name": minilm_path,
    }
    first = build(load_recipe("scone_minilm", overrides).recipe)
    built_before, reads_before = store.builds, reads["n"]
    assert reads_before == 2  # cold: one pass for the sizes and labels, one for the tokens
    second = build(load_recipe("scone_minilm", overrides).recipe)
    assert reads["n"] == reads_before and store.builds == built_before
    a, b = first.data.train, second.data.train
    assert b.source_sizes == [8] and a.source_sizes == b.source_sizes
    assert a.encoded.input_ids.tolist() == b.encoded.input_ids.tolist()
    assert a.extras["targets"].tolist() == b.extras["targets"].tolist()
    # entailment / neutral / contradiction rows, in file order, against the 3-way head.
    assert b.extras["targets"][:4].int().argmax(-1).tolist() == [0, 1, 2, 2]
