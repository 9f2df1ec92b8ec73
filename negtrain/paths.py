"""Paths inside a folder a user named, and the folder they must stay in.

A path negtrain finds inside a run directory (its checkpoints, its model folder) is only ever
read from that directory: ``..`` segments and symbolic links that lead out of it are refused with
one clear error, so a run directory from someone else cannot make negtrain read (or overwrite)
an unrelated file. A path the user names directly is taken as it is.
"""

from __future__ import annotations

from pathlib import Path

from negtrain.errors import ConfigError


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
