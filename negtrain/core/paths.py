"""Paths inside a folder a user named, and the folder they must stay in.

A path negtrain finds inside a run directory (its checkpoints, its model folder) is only ever
read from that directory: ``..`` segments and symbolic links that lead out of it are refused with
one clear error, so a run directory from someone else cannot make negtrain read (or overwrite)
an unrelated file. A path the user names directly is taken as it is.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

from negtrain.core.errors import ConfigError


def is_inside(path: Path, folder: Path) -> bool:
    """Whether ``path``, with symbolic links and ``..`` resolved, lies in ``folder`` (resolved)."""
    try:
        Path(path).resolve().relative_to(Path(folder).resolve())
    except ValueError:
        return False
    return True


def contained(path: Path, folder: Path, what: str) -> Path:
    """``path`` if it stays inside ``folder``; else a ConfigError naming ``what``."""
    if not is_inside(path, folder):
        raise ConfigError(f"{what} {path}: leads outside {folder} (via '..' or a symbolic link); refused")
    return Path(path)


def check_not_special(path: Path, what: str) -> None:
    """Refuse a named pipe, a device or a socket where a file (or folder) is read: reading one
    waits for a writer that may never come (a FIFO blocks forever) or never ends (``/dev/zero``)."""
    try:
        mode = Path(path).stat().st_mode
    except OSError:
        return  # not there, or not readable: the caller's own check names it
    kind = ("a named pipe (FIFO)" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a socket" if stat.S_ISSOCK(mode) else None)
    if kind:
        raise ConfigError(f"{what} {path}: is {kind}, not a file; give a file (reading it could wait forever)")


def check_input_path(path: Path, what: str) -> None:
    """Refuse, before anything heavy is imported, a path the user named to read that is not
    there: ``{what} {path}: does not exist`` (with the nearest folder that does, when that is not
    its own folder, so a typo in a long path shows where it went wrong)."""
    path = Path(path)
    try:
        if path.exists():
            check_not_special(path, what)
            return
        ancestor = parent = path.absolute().parent
        while not ancestor.exists():
            ancestor = ancestor.parent
    except OSError as exc:  # a name too long, a loop of links, ...
        raise ConfigError(f"{what} {path}: not a usable path ({exc.strerror or exc})") from exc
    where = "" if ancestor == parent else f" (the nearest folder that does: {ancestor})"
    raise ConfigError(f"{what} {path}: does not exist{where}")


def check_output_dir(path: Path, what: str = "--output-dir") -> None:
    """Refuse, before any work, an output directory that cannot be created or written: an
    existing file, a path through a file, or a place without write access. Nothing is created:
    writability is probed with a temporary folder in the nearest existing ancestor, removed at once."""
    path = Path(path)
    try:
        exists = path.exists()
        ancestor = path.absolute()
        while not ancestor.exists():
            ancestor = ancestor.parent
    except OSError as exc:  # a name too long, a loop of links, ...
        raise ConfigError(f"{what} {path}: not a usable path ({exc.strerror or exc})") from exc
    if exists and not path.is_dir():
        raise ConfigError(f"{what} {path}: exists and is not a directory")
    if not ancestor.is_dir():
        raise ConfigError(f"{what} {path}: cannot be created, {ancestor} is a file, not a directory")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".negtrain-write-test-", dir=ancestor))
    except OSError as exc:
        reason = exc.strerror or errno.errorcode.get(exc.errno or 0, str(exc))
        raise ConfigError(f"{what} {path}: cannot write in {ancestor} ({reason})") from exc


def check_output_file(path: Path, what: str) -> None:
    """Refuse, before any work, a file that cannot be written: a folder or a device at its name, or
    a parent folder that cannot be created or written (see :func:`check_output_dir`)."""
    path = Path(path)
    try:
        is_dir, is_other = path.is_dir(), path.exists() and not path.is_file()
    except OSError as exc:
        raise ConfigError(f"{what} {path}: not a usable path ({exc.strerror or exc})") from exc
    if is_dir:
        raise ConfigError(f"{what} {path}: is a directory, not a file")
    if is_other:
        raise ConfigError(f"{what} {path}: exists and is not a regular file")
    check_output_dir(path.parent, what=f"{what} {path}: its folder")


def resume_command(run_dir: Path | str) -> str:
    """The command that continues the run in ``run_dir``, ready to paste: with the
    ``NEGTRAIN_DATA_DIR`` this run read its benchmarks from, which a new shell may not have."""
    import shlex

    data = os.environ.get("NEGTRAIN_DATA_DIR")
    prefix = f"NEGTRAIN_DATA_DIR={shlex.quote(data)} " if data else ""
    return f"{prefix}python -m negtrain fit --resume {shlex.quote(str(run_dir))}"
