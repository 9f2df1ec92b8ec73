"""The streamed cue-masking corpus (negtrain/data/corpus_stream.py): held out by hash, seeded
windowed shuffle, dealing to ranks and workers, resume at the same line, clear errors."""

from __future__ import annotations

import hashlib
import re
import signal
import sys
from pathlib import Path

import pytest
import torch

from negtrain.data.corpus_stream import HELD_OUT_KEY, CorpusStream, StreamLoader, check_not_empty, held_out_fraction, index_corpus
from negtrain.core.errors import ConfigError, DataError
from negtrain.negation.cues import CueDetector

TESTS = Path(__file__).resolve().parent
CUE = ["The cat did not sit on mat {i}.", "Nobody knew answer {i}.", "She never went to market {i}.", "There is nothing in box {i}."]
PLAIN = ["The sun shone on field {i}.", "Birds sang in tree {i}."]


def write_corpus(path: Path, n: int = 300) -> tuple[list[str], list[str]]:
    """n lines, 2 of every 3 with a negation cue, plus blank lines and one duplicated cue line;
    (every line, the cue lines) in file order."""
    lines = []
    for i in range(n):
        template = CUE[i % len(CUE)] if i % 3 else PLAIN[i % len(PLAIN)]
        lines.append(template.format(i=i))
    lines.insert(10, "")
    lines.append(lines[1])  # a duplicate: both copies must land on the same side
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return lines, [t for t in lines if t and CueDetector().has_cue(t)]


@pytest.fixture(scope="module")
def tokenizer(minilm_path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(minilm_path)


@pytest.fixture()
def corpus(tmp_path, monkeypatch):
    monkeypatch.setenv("NEGTRAIN_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "corpus.txt"
    lines, cue = write_corpus(path)
    return path, lines, cue


def make_stream(path, tokenizer, *, rate=0.1, window=16, seed=3, batch_size=8, world=1, rank=0, limit=None, held_out=1000):
    index = index_corpus([str(path)], CueDetector(), keep="cue_sentences", held_out_rate=rate, held_out=held_out, window=window)
    stream = CorpusStream(index, tokenizer, CueDetector(), 32, seed, tokenizer.pad_token_id)
    return stream.for_rank(batch_size, world, rank, limit)


def texts(tokenizer, batch) -> list[str]:
    return [tokenizer.decode(row[mask.bool()], skip_special_tokens=True) for row, mask in zip(batch["input_ids"], batch["attention_mask"], strict=False)]


def test_held_out_is_the_hash_rule_deterministic_and_disjoint_from_training(corpus, tokenizer):
    path, _, cue = corpus
    # The rule by hand: blake2b-64 of the text with the fixed key, as a fraction of 2**64.
    by_hand = [t for t in cue if int.from_bytes(hashlib.blake2b(t.encode(), digest_size=8, key=HELD_OUT_KEY).digest(), "little") < 0.1 * 2**64]
    assert held_out_fraction(cue[0]) == int.from_bytes(hashlib.blake2b(cue[0].encode(), digest_size=8, key=HELD_OUT_KEY).digest(), "little") / 2**64
    stream = make_stream(path, tokenizer)
    assert stream.index.held_out == by_hand and 5 <= len(by_hand) <= 40
    assert stream.index.n_train + stream.index.n_held_out == len(cue) == stream.index.n_kept
    trained = [raw.decode().strip() for _, raw in stream.shuffled(0)]
    assert sorted(trained) == sorted(t for t in cue if t not in set(by_hand))
    assert not set(trained) & set(by_hand)
    # Another window, seed and epoch: the same held-out set (it depends on the text only).
    other = make_stream(path, tokenizer, window=7, seed=99)
    assert other.index.held_out == by_hand
    # The cap keeps the first ones in file order; the rest is still never trained on.
    capped = make_stream(path, tokenizer, held_out=3)
    assert capped.index.held_out == by_hand[:3] and capped.index.n_train == stream.index.n_train


def test_same_seed_same_batches_and_the_shuffle_stays_in_its_window(corpus, tokenizer):
    path, _, _ = corpus
    a, b = make_stream(path, tokenizer), make_stream(path, tokenizer)
    first, second = list(a), list(b)
    assert len(first) == len(a) == -(-a.index.n_train // 8)
    for x, y in zip(first, second, strict=True):
        assert x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x)
    assert texts(tokenizer, first[0]) != texts(tokenizer, list(make_stream(path, tokenizer, seed=4))[0])
    a.epoch = 1
    assert [t for bt in a for t in texts(tokenizer, bt)] != [t for bt in first for t in texts(tokenizer, bt)]
    # Window k (16 lines) is a permutation of the k-th 16 training lines in file order.
    in_order = [raw for raw in a._lines_from(0)]
    shuffled = list(a.shuffled(0))
    assert [p for p, _ in shuffled] == list(range(a.index.n_train))
    for k in range(0, len(in_order), 16):
        assert sorted(r for _, r in shuffled[k : k + 16]) == sorted(in_order[k : k + 16])
    assert [r for _, r in shuffled] != in_order


def test_several_files_read_as_one_corpus(corpus, tokenizer, tmp_path):
    """The corpus split over two files (the cut inside a shuffle window) streams the same lines
    in the same order as the one file, from the start and from a resumed position."""
    path, lines, _ = corpus
    first, second = tmp_path / "a.txt", tmp_path / "b.txt"
    first.write_text("\n".join(lines[:101]) + "\n")
    second.write_text("\n".join(lines[101:]) + "\n")
    one = make_stream(path, tokenizer)
    index = index_corpus([str(first), str(second)], CueDetector(), keep="cue_sentences", held_out_rate=0.1, held_out=1000, window=16)
    two = CorpusStream(index, tokenizer, CueDetector(), 32, 3, tokenizer.pad_token_id).for_rank(8, 1, 0, None)
    assert index.n_train == one.index.n_train and index.held_out == one.index.held_out
    assert list(two.shuffled(0)) == list(one.shuffled(0))
    assert list(two.shuffled(1, start=70)) == list(one.shuffled(1))[70:]
    assert 1 in index.windows[:, 0].tolist()  # some window starts in the second file


@pytest.mark.parametrize("world", [1, 2, 3])
def test_ranks_and_workers_cover_every_training_line_once_per_epoch(corpus, tokenizer, world):
    path, _, _ = corpus
    seen = []
    per_rank = []
    for rank in range(world):
        stream = make_stream(path, tokenizer, world=world, rank=rank)
        batches = list(StreamLoader(stream, num_workers=2 if rank == 0 else 0))
        # Two workers hand back exactly the batches one process makes, in the same order.
        if rank == 0:
            alone = list(make_stream(path, tokenizer, world=world, rank=rank))
            assert [b["index"].tolist() for b in batches] == [b["index"].tolist() for b in alone]
        per_rank.append(len(batches))
        seen += [i for b in batches for i in b["index"][b["real"]].tolist()]
        padding = [b for b in batches if not b["real"].any()]
        assert len(padding) <= 1
    n = stream.index.n_train
    assert sorted(seen) == list(range(n))  # every line once, none twice
    batches = -(-n // 8)  # ceil(n / 8)
    assert len(set(per_rank)) == 1 and per_rank[0] == -(-batches // world)  # every rank steps alike


def test_a_restored_loader_continues_with_the_next_batch(corpus, tokenizer):
    """The loader's state mid-epoch (in the middle of a shuffle window), restored into a new one."""
    path, _, _ = corpus
    whole = [b["index"].tolist() for b in StreamLoader(make_stream(path, tokenizer, world=2, rank=1))]
    first = StreamLoader(make_stream(path, tokenizer, world=2, rank=1))
    it = iter(first)
    for _ in range(3):
        next(it)
    state = first.state_dict()
    # 3 steps of 2 ranks x 8 lines: 48 lines consumed, inside window 3 (lines 48..63).
    assert state["batches_done"] == 3 and state["lines_consumed"] == 48 and state["epoch"] == 0
    window = first.stream.index.windows[3]
    assert (state["file"], state["byte_offset"]) == (int(window[0]), int(window[1])) and state["byte_offset"] > 0
    resumed = StreamLoader(make_stream(path, tokenizer, world=2, rank=1))
    resumed.load_state_dict(state)
    assert [b["index"].tolist() for b in resumed] == whole[3:]
    # The same state with another seed or another corpus is refused.
    with pytest.raises(ValueError, match="seed 3, not 4"):
        StreamLoader(make_stream(path, tokenizer, seed=4)).load_state_dict(state)
    with pytest.raises(DataError, match="corpus files changed"):
        StreamLoader(make_stream(path, tokenizer, window=7)).load_state_dict(state)


def test_a_corpus_rewritten_at_the_same_size_and_mtime_is_refused_on_resume(corpus, tokenizer):
    import os

    path, lines, _ = corpus
    first = StreamLoader(make_stream(path, tokenizer))
    it = iter(first)
    next(it)
    state = first.state_dict()
    st = path.stat()
    # Same length, same mtime: two cue lines swap their numbers ("mat 1" <-> "mat 2" style edits).
    text = path.read_text(encoding="utf-8")
    changed = text.replace("answer 1.", "answer 7.", 1)
    assert changed != text and len(changed) == len(text)
    path.write_text(changed, encoding="utf-8")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    with pytest.raises(DataError, match="corpus files changed"):
        StreamLoader(make_stream(path, tokenizer)).load_state_dict(state)
    # Put back as it was, the same checkpoint resumes.
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    StreamLoader(make_stream(path, tokenizer)).load_state_dict(state)


def test_a_large_file_is_digested_from_sampled_blocks(tmp_path, monkeypatch):
    from negtrain.data import corpus_stream

    monkeypatch.setattr(corpus_stream, "WHOLE_DIGEST", 1 << 20)
    monkeypatch.setattr(corpus_stream, "SAMPLE_SIZE", 1 << 10)
    big = tmp_path / "big.txt"
    data = bytearray(b"x" * (4 << 20))
    big.write_bytes(data)
    before = corpus_stream.content_digest(big, len(data))
    assert corpus_stream.content_digest(big, len(data)) == before
    # One byte inside the 33rd of the evenly spread blocks, then one in the last block.
    step = (len(data) - (1 << 10)) / 65
    data[int(32 * step) + 5] = ord("y")
    big.write_bytes(data)
    after = corpus_stream.content_digest(big, len(data))
    assert after != before
    data[-1] = ord("\n")
    big.write_bytes(data)
    last = corpus_stream.content_digest(big, len(data))
    assert last not in (before, after)
    # A byte between two sampled blocks is not read (the blind spot the module docstring names):
    # without this, a digest of the whole file, which a corpus of gigabytes cannot afford, passed too.
    data[int(32 * step) + (1 << 10) + 100] = ord("z")
    big.write_bytes(data)
    assert corpus_stream.content_digest(big, len(data)) == last


def test_a_damaged_or_foreign_index_is_rebuilt(corpus, tokenizer):
    import zipfile

    import numpy as np

    path, _, _ = corpus
    good = make_stream(path, tokenizer).index
    cached = list((Path(__import__("os").environ["NEGTRAIN_CACHE_DIR"]) / "corpus_stream").glob("*.npz"))
    assert len(cached) == 1
    npz = cached[0]

    def rebuilt_equal():
        index = make_stream(path, tokenizer).index
        assert index.fingerprint == good.fingerprint and index.n_train == good.n_train
        assert np.array_equal(index.train_bits, good.train_bits) and np.array_equal(index.windows, good.windows)

    original = npz.read_bytes()
    damages = {
        "truncated": original[: len(original) // 2],
        "garbage": b"\0" * len(original),
        "empty": b"",
    }
    for data in damages.values():
        npz.write_bytes(data)
        rebuilt_equal()
    # Loadable but wrong: the bits flipped (an edited archive), a field missing.
    with np.load(npz) as z:
        parts = {k: z[k] for k in z.files}
    for edit in ("bits", "missing"):
        changed = dict(parts)
        if edit == "bits":
            changed["train_bits"] = ~parts["train_bits"]
        else:
            del changed["windows"]
        with open(npz, "wb") as f:
            np.savez(f, **changed)
        rebuilt_equal()
    assert zipfile.is_zipfile(npz)


@pytest.mark.parametrize("kind", ["fifo", "dev_zero"])
def test_a_pipe_or_device_as_a_corpus_is_named_as_such(tmp_path, monkeypatch, kind):
    import os

    monkeypatch.setenv("NEGTRAIN_CACHE_DIR", str(tmp_path / "cache"))
    if kind == "fifo":
        target = tmp_path / "pipe"
        os.mkfifo(target)
        expected = "is a named pipe (FIFO), not a regular text file"
    else:
        target = Path("/dev/zero")
        if not target.exists():
            pytest.skip("no /dev/zero")
        expected = "is a character device, not a regular text file"
    with pytest.raises(DataError, match=r"text_files: .*" + re.escape(expected)):
        index_corpus([str(target)], CueDetector(), keep="cue_sentences", held_out_rate=0.01, held_out=10, window=4)


def test_bad_inputs_are_clear_errors(tmp_path, monkeypatch, tokenizer):
    from negtrain.config import validate_recipe

    monkeypatch.setenv("NEGTRAIN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DataError) as missing:
        index_corpus(["nope/corpus.txt"], CueDetector(), keep="cue_sentences", held_out_rate=0.01, held_out=10, window=4)
    assert f"nope/corpus.txt: not found (looked for {tmp_path.resolve() / 'nope' / 'corpus.txt'}" in str(missing.value)
    plain = tmp_path / "plain.txt"
    plain.write_text("The sun shone.\n\nBirds sang.\n")
    index = index_corpus([str(plain)], CueDetector(), keep="cue_sentences", held_out_rate=0.01, held_out=10, window=4)
    with pytest.raises(DataError, match=r"has no training sentences: 3 lines, 0 with a negation cue, 0 of those held out"):
        check_not_empty(index, "cue_sentences", 0.01)

    def recipe(corpus):
        return {"description": "d", "model": {"name": "m", "family": "mlm"}, "objective": {"cue_masking": {"corpus": corpus}}}

    with pytest.raises(ConfigError, match="set from_train_benchmarks: false"):
        validate_recipe(recipe({"streaming": True, "text_files": ["c.txt"]}), "t")
    with pytest.raises(ConfigError, match="shuffle_buffer"):
        validate_recipe(recipe({"streaming": True, "text_files": ["c.txt"], "from_train_benchmarks": False, "shuffle_bufer": 5}), "t")
    ok = validate_recipe(recipe({"streaming": True, "text_files": ["c.txt"], "from_train_benchmarks": False}), "t")
    corpus = ok.objective.cue_masking.corpus
    assert (corpus.held_out_rate, corpus.shuffle_buffer) == (0.01, 10000)


# ---- a real run, killed with SIGKILL and resumed ---------------------------------------------


def stream_recipe(model: str, corpus: Path, every: int | None = None) -> str:
    every_n = f"checkpoint_every_n_steps: {every}, " if every else ""
    return f"""\
description: streamed cue-masking crash test
seed: 5
model: {{name: {model}, family: mlm, max_length: 24, learning_rate: 1.0e-3}}
objective:
  cue_masking:
    corpus: {{text_files: [{corpus}], streaming: true, from_train_benchmarks: false, held_out_rate: 0.1, held_out: 8, shuffle_buffer: 12}}
data: {{batch_size: 8, eval_batch_size: 8}}
trainer: {{max_epochs: 2, {every_n}precision: 32-true, deterministic: true, torch_threads: 1, enable_progress_bar: false}}
"""


@pytest.mark.slow
def test_a_killed_streamed_run_resumes_at_the_same_line(tmp_path, minilm_path):
    """MiniLM on a streamed corpus, killed (SIGKILL) before batch 7 of epoch 1, resumed from its
    newest mid-epoch checkpoint (every 4 steps: a few batches into epoch 1, inside a shuffle
    window of 12 lines): the same records and weights as the uninterrupted run, so the batches
    after the resume were the uninterrupted run's."""
    sys.path.insert(0, str(TESTS))
    from test_resume import kill_at_marker, records, start_and_kill

    from negtrain.cli import main

    corpus = tmp_path / "corpus.txt"
    write_corpus(corpus, n=240)
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(stream_recipe(minilm_path, corpus, every=4))
    killed = tmp_path / "killed"
    proc = start_and_kill(recipe, killed, "train:1:6", tmp_path / "marker")
    reference = tmp_path / "reference"
    assert main(["fit", "--recipe", str(recipe), "--output-dir", str(reference)]) == 0
    kill_at_marker(proc, tmp_path / "marker", signum=signal.SIGKILL)
    ckpt = torch.load(killed / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    state = ckpt["negtrain_resume"]["loader"]
    # The newest checkpoint is the last multiple of 4 steps, a few batches into epoch 1.
    per_epoch = ckpt["negtrain_resume"]["position"]["epoch_batches"]
    done = ckpt["global_step"] - per_epoch
    assert ckpt["global_step"] % 4 == 0 and 0 < done < 7 and per_epoch > 12
    assert (state["epoch"], state["batches_done"], state["lines_consumed"]) == (1, done, 8 * done)
    assert main(["fit", "--resume", str(killed)]) == 0
    assert records(killed) == records(reference)
    a = torch.load(killed / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    b = torch.load(reference / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    assert a["global_step"] == b["global_step"]
    for key, value in b["state_dict"].items():
        assert torch.equal(a["state_dict"][key], value), key
