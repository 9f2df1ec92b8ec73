"""Where benchmark files come from.

A file is named by its upstream home: ``<owner>/<repo>/<path in repo>``. It is looked up, in order:

1. the data directory ``$NEGTRAIN_DATA_DIR`` (an offline mirror with that layout);
2. the cache ``$NEGTRAIN_CACHE_DIR``, default ``~/.cache/negtrain``, with the same layout;
3. a download from the authors' repository into that cache (skipped when ``NEGTRAIN_OFFLINE=1``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from negtrain.errors import DataError


@dataclass(frozen=True)
class RemoteFile:
    """A file in an author's GitHub repository, pinned to a revision."""

    repo: str  # "owner/name"
    path: str  # path inside the repository
    revision: str = "main"

    @property
    def relpath(self) -> Path:
        return Path(self.repo) / self.path

    @property
    def url(self) -> str:
        return f"https://raw.githubusercontent.com/{self.repo}/{self.revision}/{self.path}"


def data_dir() -> Path | None:
    env = os.environ.get("NEGTRAIN_DATA_DIR")
    return Path(env).expanduser() if env else None


def cache_dir() -> Path:
    env = os.environ.get("NEGTRAIN_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "negtrain"


def offline() -> bool:
    return os.environ.get("NEGTRAIN_OFFLINE", "").lower() in {"1", "true", "yes"}


def _download(url: str, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    # Download to a temporary file in the same folder, then rename: a killed download never
    # leaves a truncated file that a later run would trust.
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=60) as response:
            shutil.copyfileobj(response, out)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def resolve(file: RemoteFile) -> Path:
    """Return a local path for ``file``, downloading it into the cache if needed."""
    looked: list[Path] = []
    mirror = data_dir()
    if mirror is not None:
        candidate = mirror / file.relpath
        if candidate.is_file():
            return candidate
        looked.append(candidate)
    cached = cache_dir() / file.relpath
    if cached.is_file():
        return cached
    looked.append(cached)
    hint = (
        f"download it from {file.url} to {cached}, or set NEGTRAIN_DATA_DIR to a folder "
        f"holding {file.relpath}"
    )
    if offline():
        raise DataError(f"data file not found; looked in {', '.join(map(str, looked))}; {hint}")
    try:
        _download(file.url, cached)
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        raise DataError(
            f"data file not found; looked in {', '.join(map(str, looked))}; "
            f"download failed ({exc}); {hint}"
        ) from None
    return cached
