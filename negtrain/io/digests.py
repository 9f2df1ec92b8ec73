"""SHA-256 of files and folders, each file hashed once and its digest cached by size and mtime.

A run's provenance names the exact bytes it read: every benchmark data file, a local model's
folder, the checkpoint a card scored. Hashing them on every start would cost a few seconds per GB
(an MNLI mix, a 7B model), so a digest is cached under ``<cache>/digests/`` keyed by the file's
absolute path, size and modification time (as the token store keys its splits): an unchanged file
is read once, ever, and a warm start only stats it. A file changed in place without a new mtime
(rare: a copy that preserves times onto the same path) keeps its old digest; ``NEGTRAIN_REHASH=1``
hashes every file afresh.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from pathlib import Path

#: Folders never part of a model folder's content (version control, caches).
SKIPPED_DIRS = frozenset({".git", ".cache", "__pycache__", ".ipynb_checkpoints"})
_CHUNK = 1 << 20


def _sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(_CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def file_sha256(path: Path, cache: Path | None) -> str:
    """The SHA-256 of ``path``'s bytes (hex), from ``cache`` when the file is unchanged."""
    path = Path(path).absolute()
    stat = path.stat()
    if cache is None or os.environ.get("NEGTRAIN_REHASH"):
        return _sha256_of(path)
    key = hashlib.sha256(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}".encode()).hexdigest()[:40]
    entry = Path(cache) / "digests" / f"{key}.sha256"
    with contextlib.suppress(OSError, UnicodeDecodeError):
        cached = entry.read_text(encoding="ascii").strip()
        if len(cached) == 64:
            return cached
    digest = _sha256_of(path)
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


def folder_files(folder: Path) -> list[Path]:
    """Every regular file under ``folder`` (following no symlinked folders), in a fixed order,
    leaving out version-control and cache folders."""
    found = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
        found += [Path(root) / name for name in sorted(files)]
    return found


def folder_sha256(folder: Path, cache: Path | None) -> str:
    """One digest for a folder's content: SHA-256 over each file's relative path and digest, in
    path order. The same files give the same digest wherever the folder lies."""
    folder = Path(folder)
    h = hashlib.sha256()
    for path in folder_files(folder):
        h.update(f"{path.relative_to(folder).as_posix()}\0{file_sha256(path, cache)}\n".encode())
    return h.hexdigest()
