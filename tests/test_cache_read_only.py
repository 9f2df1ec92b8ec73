"""A healthy response cache this process cannot write (a read-only file, a read-only folder, a new
cache in a read-only folder) is no damaged one (issue 55): its answers are read, nothing is renamed
``.damaged-*``, new answers are kept in memory for the run, and one line says it is read-only.

The cache is opened in a child process that honours file permissions: as this user, or, when the
tests run as root (which writes read-only files all the same), as root without the capabilities
that override permissions (util-linux ``setpriv``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from negtrain.engine.requests import Answer
from negtrain.serving.cache import ResponseCache

CHILD = """
import sys
from pathlib import Path
from negtrain.engine.requests import Answer
from negtrain.serving.cache import ResponseCache
cache = ResponseCache(Path(sys.argv[1]))
old = cache.get("asked-before")
cache.put("asked-now", Answer(text="new"))
cache.flush()
print("read:", old.text if old else None, "| new:", cache.get("asked-now").text, "| read_only:", cache.read_only)
cache.close()
"""


def _honouring_permissions() -> list[str]:
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root, and no setpriv to drop the capabilities that override file permissions")
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--"]


def _open_in_child(path: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([*_honouring_permissions(), sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True,
                          env=env, timeout=120)


def _healthy_cache(folder: Path) -> Path:
    folder.mkdir()
    path = folder / "responses.sqlite"
    cache = ResponseCache(path)
    cache.put("asked-before", Answer(text="cached"))
    cache.close()
    return path


@pytest.mark.parametrize("what", ["file", "folder", "file and folder"])
def test_a_healthy_read_only_cache_is_read_and_kept(tmp_path, what):
    path = _healthy_cache(tmp_path / "shared")
    before = sorted(p.name for p in path.parent.iterdir())
    data = path.read_bytes()
    try:
        if "file" in what:
            path.chmod(0o444)
        if "folder" in what:
            path.parent.chmod(0o555)
        done = _open_in_child(path)
    finally:
        path.parent.chmod(0o755)
        path.chmod(0o644)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "read: cached | new: new | read_only: True" in done.stdout
    said = [line for line in done.stdout.splitlines() if line.startswith("response cache")]
    assert len(said) == 1 and "read-only" in said[0] and "its answers are read, new answers are not saved" in said[0], done.stdout
    assert "damaged" not in done.stdout
    # Nothing renamed or changed (SQLite may add its empty journal files beside a file it reads).
    assert sorted(p.name for p in path.parent.iterdir() if not p.name.endswith(("-wal", "-shm"))) == before
    assert path.read_bytes() == data


def test_a_new_cache_in_a_read_only_folder_answers_from_memory(tmp_path):
    folder = tmp_path / "readonly"
    folder.mkdir()
    try:
        folder.chmod(0o555)
        done = _open_in_child(folder / "responses.sqlite")
    finally:
        folder.chmod(0o755)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "read: None | new: new | read_only: True" in done.stdout
    said = [line for line in done.stdout.splitlines() if line.startswith("response cache")]
    assert len(said) == 1 and "cannot be created" in said[0] and "read-only" in said[0], done.stdout
    assert list(folder.iterdir()) == []


def test_a_writable_cache_is_still_written(tmp_path):
    path = _healthy_cache(tmp_path / "mine")
    done = _open_in_child(path)
    assert done.returncode == 0, done.stderr
    assert "read: cached | new: new | read_only: False" in done.stdout and "response cache" not in done.stdout
    assert ResponseCache(path).get("asked-now").text == "new"
