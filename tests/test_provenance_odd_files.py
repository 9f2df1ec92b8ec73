"""Provenance hashing reads only regular files (issue 36, cases 5 and 15): a crafted model folder
holding a named pipe, a socket, a dangling symlink (as in a pruned Hugging Face cache snapshot), a
symlink to a regular file and a symlink to a folder. The pipe is never opened for reading (it would
wait forever for a writer), the dangling link is recorded as dangling, and the model still loads
and is scored by a report card.

A regression would hang rather than fail, so each test runs under an alarm that turns a hang into
an error (the bound is generous: the point is "ends", not "fast")."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import socket

import pytest

from negtrain.cli import main
from negtrain.core.errors import NegtrainError
from negtrain.io.digests import file_sha256, folder_content, folder_sha256
from tiny_models import save_tiny_bert_nli

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes need a POSIX system")

HANG_LIMIT_S = 120


class Hung(Exception):
    pass


@contextlib.contextmanager
def ends_within(seconds: int, fifo=None):
    """Raise Hung after ``seconds``; a reader stuck on ``fifo`` is released by opening it for writing."""

    def hung(signum, frame):
        if fifo is not None:
            with contextlib.suppress(OSError):
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        raise Hung(f"still running after {seconds} s: a named pipe was read")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _odd_folder(root):
    """Two regular files, one reached through a symlink, and everything that is not one."""
    folder = root / "model"
    (folder / "sub").mkdir(parents=True)
    (folder / "config.json").write_bytes(b'{"a": 1}')
    (folder / "sub" / "weights.bin").write_bytes(b"\x00\x01\x02")
    (root / "blob").write_bytes(b"tokenizer bytes")
    (folder / "tokenizer.json").symlink_to(root / "blob")  # a snapshot's link to its blob
    (folder / "pruned.safetensors").symlink_to(root / "blobs" / "gone")  # the blob was pruned
    (root / "elsewhere").mkdir()
    (root / "elsewhere" / "big.bin").write_bytes(b"not ours")
    (folder / "linked_folder").symlink_to(root / "elsewhere")
    os.mkfifo(folder / "pipe")
    listener = socket.socket(socket.AF_UNIX)
    with contextlib.suppress(OSError):  # a path too long for AF_UNIX: no socket then
        listener.bind(str(folder / "sock"))
    return folder, listener


def test_a_folder_hashes_its_regular_files_and_names_the_rest(tmp_path):
    folder, listener = _odd_folder(tmp_path)
    with listener, ends_within(HANG_LIMIT_S, folder / "pipe"):
        content = folder_content(folder)
        digest = folder_sha256(folder, tmp_path / "cache", content)
    assert [p.relative_to(folder).as_posix() for p in content.files] == ["config.json", "tokenizer.json", "sub/weights.bin"]
    assert content.dangling == ["pruned.safetensors"]
    skipped = set(content.skipped)
    assert {"linked_folder (a symlink to a folder)", "pipe (a named pipe (FIFO))"} <= skipped
    if (folder / "sock").exists():
        assert "sock (a socket)" in skipped
    # By hand: the regular files' relative paths and digests, a folder's files before its subfolders';
    # the link's target's bytes.
    h = hashlib.sha256()
    for name, data in (("config.json", b'{"a": 1}'), ("tokenizer.json", b"tokenizer bytes"), ("sub/weights.bin", b"\x00\x01\x02")):
        h.update(f"{name}\0{_sha256(data)}\n".encode())
    assert digest == h.hexdigest()
    # What was left out does not change the digest: the same regular files elsewhere give the same.
    clean = tmp_path / "clean"
    (clean / "sub").mkdir(parents=True)
    shutil.copyfile(folder / "config.json", clean / "config.json")
    shutil.copyfile(folder / "sub" / "weights.bin", clean / "sub" / "weights.bin")
    shutil.copyfile(tmp_path / "blob", clean / "tokenizer.json")
    assert folder_sha256(clean, None) == digest


def test_a_pipe_named_directly_is_refused_not_read(tmp_path):
    fifo = tmp_path / "data.jsonl"
    os.mkfifo(fifo)
    with ends_within(HANG_LIMIT_S, fifo):
        for cache in (None, tmp_path / "cache"):
            with pytest.raises(NegtrainError, match=r"data.jsonl: a named pipe \(FIFO\), not a regular file"):
                file_sha256(fifo, cache)


@pytest.fixture(scope="module")
def odd_model(tmp_path_factory):
    root = tmp_path_factory.mktemp("odd")
    model = save_tiny_bert_nli(root / "bert")
    os.mkfifo(model / "notes.fifo")
    (model / "pytorch_model.bin").symlink_to(root / "blobs" / "pruned")  # a pruned snapshot's extra weights
    return model


def test_a_card_of_a_model_folder_holding_a_pipe_and_a_dangling_link_ends_and_records_them(odd_model, data_dir, tmp_path, one_thread, capsys):
    out = tmp_path / "card"
    args = ["evaluate", "--model", str(odd_model), "--family", "nli", "--benchmarks", "monli", "--out", str(out),
            "--trainer.limit_val_batches=1", "--data.eval_batch_size=32", "--trainer.torch_threads=1", "--trainer.precision=32-true"]
    with ends_within(HANG_LIMIT_S, odd_model / "notes.fifo"):
        code = main(args)
    captured = capsys.readouterr()
    assert code == 0, captured.err[-2000:]
    model = json.loads((out / "provenance.json").read_text())["model"]
    assert model["dangling_symlinks"] == ["pytorch_model.bin"]
    assert model["skipped"] == ["notes.fifo (a named pipe (FIFO))"]
    regular = sorted(p for p in odd_model.iterdir() if p.is_file() and not p.is_symlink())  # no subfolders
    assert len(regular) >= 3
    h = hashlib.sha256()
    for path in regular:
        h.update(f"{path.relative_to(odd_model).as_posix()}\0{_sha256(path.read_bytes())}\n".encode())
    assert model["content_sha256"] == h.hexdigest()
    warning = [line for line in captured.out.splitlines() if line.startswith("warning:") and "content hash" in line]
    assert len(warning) == 1 and "pytorch_model.bin (a dangling symlink)" in warning[0] and "notes.fifo" in warning[0]
    assert "Traceback" not in captured.err
