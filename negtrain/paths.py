"""Paths a user names, and the folders they must stay in.

A path inside a run directory (its checkpoints) or written relative to a recipe (e.g. a starting
checkpoint, ``init_from``) is only ever read from where the user pointed: ``..`` segments and
symbolic links that lead out of that folder are refused with one clear error, so a recipe or a
run directory from someone else cannot make negtrain read (or overwrite) an unrelated file.
An absolute path is what the user named, and is taken as it is.
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


def recipe_relative(value: str | Path, recipe_path: Path, what: str) -> Path:
    """A path written in a recipe: absolute as given, relative to the recipe's folder otherwise,
    and then it must not leave that folder."""
    path = Path(value).expanduser()
    if path.is_absolute():
        return path
    folder = Path(recipe_path).parent
    return contained(folder / path, folder, f"{recipe_path}: {what}")
