"""Writing run files so that a kill at any moment leaves the last complete version readable.

Every file is written to a temporary file in the same folder (``.<name>.<random>.part``), flushed
and fsync'd, then renamed over the target with :func:`os.replace`, which is atomic on POSIX and
Windows; the folder is fsync'd afterwards so the rename survives a power cut. A reader (or a
resumed run) therefore sees either the previous complete file or the new complete file, never a
truncated one. Leftover ``*.part`` files from a killed writer are ignored by every reader.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

PART_SUFFIX = ".part"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


#: mkstemp/mkdtemp create 0600/0700 entries; finished files get the usual permissions.
FILE_MODE = 0o666 & ~_umask()
DIR_MODE = 0o777 & ~_umask()


def fsync_dir(folder: Path) -> None:
    """Persist a rename in ``folder`` (a no-op where folders cannot be opened, e.g. Windows)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_with(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """Atomically replace ``path`` with what ``write`` writes to a binary file object."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=PART_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as out:
            write(out)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def write_bytes(path: Path, data: bytes) -> None:
    write_with(path, lambda out: out.write(data))


def write_text(path: Path, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def append_lines(path: Path, lines: list[str]) -> None:
    """Append by rewriting: the file is small, and a reader never sees half a line."""
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    write_text(path, old + "".join(line + "\n" for line in lines))


def _fsync_tree(folder: Path) -> None:
    """Every file of ``folder`` on disk, each with the user's usual mode: a writer that saves
    through a temporary file of its own (safetensors does) leaves it 0600, which a folder that
    is then shared or uploaded should not keep."""
    for root, dirs, files in os.walk(folder):
        for name in files:
            file = os.path.join(root, name)
            if not os.path.islink(file):
                os.chmod(file, FILE_MODE)
            with open(file, "rb") as f:
                os.fsync(f.fileno())
        for name in dirs:
            if not os.path.islink(os.path.join(root, name)):
                os.chmod(os.path.join(root, name), DIR_MODE)
        fsync_dir(Path(root))


@contextlib.contextmanager
def atomic_dir(path: Path, replace: bool = False) -> Iterator[Path]:
    """Build a folder in a temporary sibling, then rename it to ``path``.

    Yields the temporary folder to fill. ``path`` appears only complete; with ``replace`` an
    existing ``path`` is swapped out (briefly moved aside, then deleted).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=PART_SUFFIX))
    try:
        yield tmp
        _fsync_tree(tmp)
        os.chmod(tmp, DIR_MODE)
        old = None
        if path.exists():
            if not replace:
                raise FileExistsError(f"{path} exists")
            old = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.old-"))
            os.replace(path, old / "x")
        os.replace(tmp, path)
        fsync_dir(path.parent)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
