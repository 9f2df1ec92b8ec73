"""The folders a GGUF file is converted into, checked before they are trusted, and the partial
conversions a killed run left behind.

A converted folder records, in ``gguf_source.json``, the SHA-256 of the file it came from and of
every file it was written with (``converted``). It is used only while those digests hold (each
file hashed through :func:`negtrain.io.digests.file_sha256`, so an unchanged folder is only
stat-ed): a folder changed since (weights rewritten, a file added or removed), one with no record
(not a conversion negtrain finished), a file where the folder should be, or a folder converted by
an older negtrain (no digests) is left as it is, said in one line, and the file is converted again
into the next free name (``<name>-2``, ``<name>-3``, ...). Nothing negtrain cannot prove it wrote is
ever deleted.

A conversion is written into a hidden folder beside its target that holds a marker naming the
process writing it (its pid and start time); renamed into place when complete. A run killed before
that (SIGKILL, a lost machine) leaves the hidden folder behind; the next conversion into the same
place removes every such folder whose process is gone, and only those (their marker proves
negtrain made them).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from negtrain.core.errors import NegtrainError
from negtrain.io.digests import file_sha256, folder_files

#: What the converted folder records about the file it came from.
SOURCE_FILE = "gguf_source.json"
#: Inside a conversion still being written: which process writes it.
PARTIAL_MARKER = ".negtrain-converting.json"
#: How many folders one file may be converted into (the first, then ``-2`` ...) before negtrain
#: asks for the unusable ones to be cleared.
MAX_FOLDERS = 8
#: :func:`problem` of a folder that does not exist (a free place to convert into).
ABSENT = "absent"


def candidates(base: Path) -> list[Path]:
    """Where a file whose first folder is ``base`` may be converted, in order."""
    return [base] + [base.with_name(f"{base.name}-{i}") for i in range(2, MAX_FOLDERS + 1)]


def converted_digests(folder: Path) -> dict[str, str]:
    """The SHA-256 of every file a conversion wrote into ``folder`` (its record and marker aside),
    by relative path; hashed afresh (the folder is about to be renamed, so nothing is cached)."""
    skip = {SOURCE_FILE, PARTIAL_MARKER}
    return {p.relative_to(folder).as_posix(): file_sha256(p, None)
            for p in folder_files(folder) if p.relative_to(folder).as_posix() not in skip}


def problem(folder: Path, sha: str, cache: Path | None) -> str | None:
    """Why ``folder`` is not the checked conversion of the file whose SHA-256 is ``sha``, in words
    after its path; :data:`ABSENT` when nothing is there; None when it is."""
    if not folder.exists() and not folder.is_symlink():
        return ABSENT
    if folder.is_symlink() or not folder.is_dir():
        return "is not a folder"
    try:
        record = json.loads((folder / SOURCE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        record = None
    if not isinstance(record, dict):
        return f"has no readable {SOURCE_FILE} (not a conversion negtrain finished)"
    if record.get("sha256") != sha:
        return "was converted from another file"
    recorded = record.get("converted")
    if not isinstance(recorded, dict) or not recorded:
        return "records no digests of its converted files (converted by an older negtrain)"
    present = {p.relative_to(folder).as_posix() for p in folder_files(folder)} - {SOURCE_FILE}
    if present != set(recorded):
        added, gone = sorted(present - set(recorded)), sorted(set(recorded) - present)
        return "changed since it was converted (" + "; ".join(
            part for part in (f"added: {', '.join(added)}" if added else "", f"missing: {', '.join(gone)}" if gone else "") if part) + ")"
    for relative, digest in sorted(recorded.items()):
        try:
            now = file_sha256(folder / relative, cache)
        except NegtrainError as exc:
            return f"cannot be checked ({exc})"
        if now != digest:
            return f"changed since it was converted ({relative} differs from the digest recorded then)"
    return None


def _started(pid: int) -> str | None:
    """When process ``pid`` started, in clock ticks since boot (Linux's /proc), or None where
    that cannot be read (another system, or no such process)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None  # field 22 of the line; the first two precede ")"


def mark_partial(folder: Path) -> None:
    """Mark ``folder`` as a conversion this process is writing."""
    marker = {"pid": os.getpid(), "started": _started(os.getpid()), "host": os.uname().nodename}
    (folder / PARTIAL_MARKER).write_text(json.dumps(marker) + "\n", encoding="utf-8")


def _writer_gone(marker: dict) -> bool:
    if marker.get("host") != os.uname().nodename or not isinstance(marker.get("pid"), int):
        return False  # another machine's (a shared cache): its process cannot be asked
    pid = marker["pid"]
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive, another user's
        return False
    started = _started(pid)
    return started is not None and marker.get("started") is not None and started != marker["started"]  # the pid reused


def remove_stale_partials(parent: Path) -> list[str]:
    """Remove the hidden partial conversions under ``parent`` whose writer is gone; their names."""
    removed: list[str] = []
    try:
        entries = sorted(p for p in parent.iterdir() if p.name.startswith("."))
    except OSError:
        return removed
    for entry in entries:
        if entry.is_symlink() or not entry.is_dir():
            continue
        try:
            marker = json.loads((entry / PARTIAL_MARKER).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # not one negtrain marked: never touched
        if isinstance(marker, dict) and _writer_gone(marker):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry.name)
    return removed
