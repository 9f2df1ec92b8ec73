"""One writer per run directory: a lock held for the life of the process that writes it.

``fit``, ``fit --resume``, ``fit --seeds``, ``sweep --local`` and report cards each write a
directory over minutes or hours; two of them writing the same one interleave ``metrics.jsonl``
lines and checkpoints. :func:`run_lock` takes an exclusive ``flock`` on ``<dir>/.negtrain.lock``
before the first file is written and keeps it until the work is done. A second writer gets one
error line naming the holder's pid (recorded in the lock file) and nothing of the first one's
work is touched.

The kernel drops a ``flock`` when its process dies, however it dies (``kill -9`` included), so a
lock left by a killed run is simply free: the next writer takes it over, no stale-lock guessing.

Details that matter:

- Re-entrant within a process: a report card that runs an evaluation into the directory it
  already locked, or a sweep whose trial locks its own folder, does not lock itself out (a
  ``flock`` on a second open file of the same process would conflict).
- Only global rank 0 takes it: under DDP the ranks Lightning (or torchrun, SLURM) starts as
  processes of their own run the same command, and would otherwise refuse their own run.
- A directory created only to hold the lock is removed again when the work fails before writing
  anything else, so a refused setting leaves no empty run directory behind.
- The lock file is a hidden file of a few bytes; every reader of a run directory ignores it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from negtrain.core.errors import NegtrainError
from negtrain.core.secrets import redact_text

LOCK_NAME = ".negtrain.lock"

#: The environment variables a launcher sets to a process's rank (the ones Lightning reads too).
_RANK_VARIABLES = ("RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK", "LOCAL_RANK", "NODE_RANK")

# resolved directory -> [open lock file descriptor, depth]
_held: dict[str, list[int]] = {}


class RunDirLocked(NegtrainError):
    """Another process is writing the run directory."""


def _is_launched_rank() -> bool:
    for name in _RANK_VARIABLES:
        value = os.environ.get(name, "0")
        if value.strip() not in ("", "0"):
            return True
    return False


def holder(run_dir: Path) -> str:
    """What the lock file says about its holder (``pid 123: fit``), or '' when it says nothing."""
    try:
        return (Path(run_dir) / LOCK_NAME).read_text(encoding="utf-8", errors="replace").strip().splitlines()[0][:200]
    except (OSError, IndexError):
        return ""


def _acquire(run_dir: Path, what: str) -> int:
    import fcntl

    path = run_dir / LOCK_NAME
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise NegtrainError(f"{run_dir}: cannot write its lock file {LOCK_NAME} ({exc.strerror or exc})") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise NegtrainError(f"{run_dir}: cannot lock {LOCK_NAME} ({exc.strerror or exc})") from exc
            who = holder(run_dir) or "another process"
            raise RunDirLocked(
                f"{run_dir} is being written by another negtrain process ({who}); wait for it to finish, "
                "or choose another directory"
            ) from exc
        # The file may have been removed (by a writer cleaning up an empty directory) between our
        # open and our lock: then we locked a file nobody else will see; lock the new one instead.
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"pid {os.getpid()}: {what}\n".encode(), 0)
    return fd


@contextlib.contextmanager
def run_lock(run_dir: Path, what: str | None = None) -> Iterator[Path]:
    """Hold the writer's lock of ``run_dir`` (created if missing) while the block runs.

    ``what`` is recorded for a refused second writer's message (default: this process's command)."""
    run_dir = Path(run_dir)
    if _is_launched_rank() or sys.platform == "win32":
        yield run_dir
        return
    created = _first_missing(run_dir)
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise NegtrainError(f"{run_dir}: cannot create the directory ({exc.strerror or exc})") from exc
    key = str(run_dir.resolve())
    entry = _held.get(key)
    if entry is not None:
        entry[1] += 1
        try:
            yield run_dir
        finally:
            entry[1] -= 1
        return
    # The command line, masked: a token in a --model path or URL never reaches the lock file.
    what = redact_text(what or " ".join(["negtrain", *sys.argv[1:]]))[:160]
    fd = _acquire(run_dir, what)
    _held[key] = [fd, 1]
    failed = True
    try:
        yield run_dir
        failed = False
    finally:
        del _held[key]
        if failed and created is not None and _only_lock_inside(run_dir):
            # Nothing was written: leave no directory behind (the lock file goes first), nor the
            # parents made for it.
            with contextlib.suppress(OSError):
                (run_dir / LOCK_NAME).unlink()
                folder = run_dir
                while True:
                    folder.rmdir()
                    if folder == created:
                        break
                    folder = folder.parent
        os.close(fd)  # releases the flock


def _first_missing(run_dir: Path) -> Path | None:
    """The outermost folder of ``run_dir`` (itself included) that does not exist yet."""
    missing = None
    folder = run_dir
    while not folder.exists() and folder != folder.parent:
        missing = folder
        folder = folder.parent
    return missing


def _only_lock_inside(run_dir: Path) -> bool:
    try:
        return [p.name for p in run_dir.iterdir()] == [LOCK_NAME]
    except OSError:
        return False
