"""SHA-256 of files and folders, each file hashed once and its digest cached by size and mtime.

A run's provenance names the exact bytes it read: every benchmark data file, a local model's
folder, the checkpoint a card scored. Hashing them on every start would cost a few seconds per GB
(an MNLI mix, a 7B model), so a digest is cached under ``<cache>/digests/`` keyed by the file's
absolute path, size, modification time, inode and change time: an unchanged file
is read once, ever, and a warm start only stats it. A file changed in place keeps neither its
change time (which no copy can set) nor, swapped for another, its inode, so it is hashed again even
when its size and mtime are kept; ``NEGTRAIN_REHASH=1`` hashes every file afresh.

Only regular files are read. A folder can hold other things: a symlink whose target is gone (a
pruned Hugging Face cache snapshot, which still loads when the model does not need that file) is
recorded as dangling; a named pipe, socket or device is skipped and named (opening a named pipe
would wait forever for a writer); a symlink is followed only to a regular file, never to a folder.
A file is opened without blocking and checked to be regular before a byte is read, so one swapped
for a pipe after it was listed is refused, not waited on.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat as stat_module
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from negtrain.core.errors import NegtrainError

#: Folders never part of a model folder's content (version control, caches).
SKIPPED_DIRS = frozenset({".git", ".cache", "__pycache__", ".ipynb_checkpoints"})
_CHUNK = 1 << 20
#: Folders nested deeper than this in a model folder are named and not read (no model has them).
MAX_DEPTH = 64


def file_kind(mode: int) -> str | None:
    """None for a regular file, else what it is, in words."""
    if stat_module.S_ISREG(mode):
        return None
    if stat_module.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat_module.S_ISSOCK(mode):
        return "a socket"
    if stat_module.S_ISCHR(mode) or stat_module.S_ISBLK(mode):
        return "a device"
    if stat_module.S_ISDIR(mode):
        return "a folder"
    return "not a regular file"


def _not_regular(path: Path, kind: str) -> NegtrainError:
    return NegtrainError(f"{path}: {kind}, not a regular file; only regular files are hashed for provenance")


def _sha256_of(path: Path) -> str:
    # O_NONBLOCK: opening a named pipe for reading would otherwise wait for a writer; the type is
    # checked on the open descriptor, so nothing can be swapped in between.
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as f:
        kind = file_kind(os.fstat(fd).st_mode)
        if kind is not None:
            raise _not_regular(path, kind)
        h = hashlib.sha256()
        for block in iter(lambda: f.read(_CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def _read_sha256(path: Path) -> str:
    try:
        return _sha256_of(path)
    except OSError as exc:  # unreadable (permissions), a loop of links, a name too long
        raise NegtrainError(f"{path}: cannot be read for its content hash ({exc.strerror or exc}); make it readable, "
                            "or move it out of the folder") from None


def file_sha256(path: Path, cache: Path | None) -> str:
    """The SHA-256 of ``path``'s bytes (hex), from ``cache`` when the file is unchanged. Anything
    but a regular file (or a symlink to one) is an error, not read."""
    path = Path(path).absolute()
    try:
        stat = path.stat()
    except OSError as exc:  # gone, a loop of links (a file linked to itself), a name too long
        raise NegtrainError(f"{path}: cannot be read for its content hash ({exc.strerror or exc})") from None
    kind = file_kind(stat.st_mode)
    if kind is not None:
        raise _not_regular(path, kind)
    if cache is None or os.environ.get("NEGTRAIN_REHASH"):
        return _read_sha256(path)
    # The inode and ctime as well: bytes rewritten in place or a file swapped in under the same
    # size and mtime (which a copy can keep, ctime it cannot) are hashed again.
    key = hashlib.sha256(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\0{stat.st_dev}\0{stat.st_ino}\0{stat.st_ctime_ns}".encode()).hexdigest()[:40]
    entry = Path(cache) / "digests" / f"{key}.sha256"
    with contextlib.suppress(OSError, UnicodeDecodeError):
        cached = entry.read_text(encoding="ascii").strip()
        if len(cached) == 64:
            return cached
    digest = _read_sha256(path)
    _store(entry, digest)
    return digest


def _store(entry: Path, digest: str) -> None:
    """Written atomically (renamed into place): parallel ranks or trials may store the same entry,
    and a half-written digest must never be trusted. A read-only cache only costs the hashing."""
    with contextlib.suppress(OSError):
        entry.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=entry.parent, prefix=f".{entry.name}.", suffix=".part")
        try:
            with os.fdopen(fd, "w", encoding="ascii") as out:
                out.write(digest + "\n")
            os.replace(tmp, entry)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise


@dataclass
class FolderContent:
    """What a folder holds, as hashing sees it (paths in a fixed order)."""

    files: list[Path] = field(default_factory=list)  # regular files, or symlinks to one: hashed
    dangling: list[str] = field(default_factory=list)  # relative paths of symlinks to nothing
    skipped: list[str] = field(default_factory=list)  # "relative/path (what it is)": not read


def _entry(path: Path, folder: Path, found: FolderContent) -> None:
    relative = path.relative_to(folder).as_posix()
    try:
        mode = os.stat(path).st_mode  # follows a symlink to its target
    except OSError:
        if os.path.islink(path):  # its target is missing, or a loop of links
            found.dangling.append(relative)
        else:
            found.skipped.append(f"{relative} (unreadable)")
        return
    kind = file_kind(mode)
    if kind is None:
        found.files.append(path)
    else:
        found.skipped.append(f"{relative} ({'a symlink to ' + kind if os.path.islink(path) else kind})")


def folder_content(folder: Path) -> FolderContent:
    """Every regular file under ``folder`` and what was left out, leaving out version-control and
    cache folders; symlinked folders are named, not followed."""
    folder = Path(folder)
    found = FolderContent()
    # Walked with a stack, not recursion: a folder nested thousands deep is named, not a crash.
    stack: list[tuple[Path, int]] = [(folder, 0)]
    while stack:
        here, depth = stack.pop()
        relative = here.relative_to(folder).as_posix()
        if depth > MAX_DEPTH:
            found.skipped.append(f"{relative} (a folder nested deeper than {MAX_DEPTH} levels; not read)")
            continue
        try:
            with os.scandir(here) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError as exc:
            found.skipped.append(f"{relative} (unreadable: {exc.strerror or exc})")
            continue
        # In os.walk's order (a folder's files, then each subfolder in turn), so digests stay as before.
        dirs: list[os.DirEntry[str]] = []
        files: list[os.DirEntry[str]] = []
        for entry in entries:
            try:
                (dirs if entry.is_dir() else files).append(entry)
            except OSError:
                files.append(entry)
        subfolders = []
        for entry in dirs:
            if entry.name in SKIPPED_DIRS:
                continue
            if entry.is_symlink():
                found.skipped.append(f"{Path(entry.path).relative_to(folder).as_posix()} (a symlink to a folder)")
            else:
                subfolders.append((Path(entry.path), depth + 1))
        for entry in files:
            _entry(Path(entry.path), folder, found)
        stack.extend(reversed(subfolders))
    return found


def folder_files(folder: Path) -> list[Path]:
    """Every regular file under ``folder`` (see :func:`folder_content`), in a fixed order."""
    return folder_content(folder).files


def folder_sha256(folder: Path, cache: Path | None, content: FolderContent | None = None) -> str:
    """One digest for a folder's content: SHA-256 over each regular file's relative path and
    digest, in path order (``content``: the folder as :func:`folder_content` listed it). The same
    files give the same digest wherever the folder lies."""
    folder = Path(folder)
    h = hashlib.sha256()
    for path in (content or folder_content(folder)).files:
        h.update(f"{path.relative_to(folder).as_posix()}\0{file_sha256(path, cache)}\n".encode())
    return h.hexdigest()
