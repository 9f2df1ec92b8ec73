"""Writing run files so that a kill at any moment leaves the last complete version readable."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def append_lines(path: Path, lines: list[str]) -> None:
    """Append by rewriting: the file is small, and a reader never sees half a line."""
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    write_text(path, old + "".join(line + "\n" for line in lines))
