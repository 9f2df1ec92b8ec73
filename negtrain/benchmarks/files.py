"""Where benchmark files come from.

A file is named by its upstream home, and that name is also its place on disk:

- a file in an author's GitHub repository (:class:`RemoteFile`): ``<owner>/<repo>/<path in repo>``;
- a split of a Hugging Face Hub dataset (:class:`HubSplit`): ``<namespace>/<name>/<split>.jsonl``,
  one JSON object per line in the dataset's own schema (what ``datasets``' ``to_json`` writes).

- a file shipped inside an installed Python package (:class:`PackagedFile`): a plugin's own data,
  read where the package is installed, never looked up or downloaded.

Any other file is looked up, in order:

1. the data directories in ``$NEGTRAIN_DATA_DIR`` (offline mirrors with that layout; several may be
   given, separated by ``os.pathsep`` (``:`` on Linux), and are searched in that order);
2. the cache ``$NEGTRAIN_CACHE_DIR``, default ``~/.cache/negtrain``, with the same layout;
3. a download into that cache (skipped when ``NEGTRAIN_OFFLINE=1``): from the authors' repository,
   or, for a Hub dataset, with the ``datasets`` library, saved as JSONL.

Repository files are fetched from ``$NEGTRAIN_DOWNLOAD_URL/<owner>/<repo>/<revision>/<path>``, by
default ``https://raw.githubusercontent.com``; point it at a proxy or an internal mirror that keeps
that layout.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from negtrain.core.errors import DataError
from negtrain.core.hub_access import check_hub_dataset

DEFAULT_DOWNLOAD_URL = "https://raw.githubusercontent.com"


class DataFile(Protocol):
    """What a benchmark reads a split from (:class:`RemoteFile`, :class:`HubSplit`, or a file only
    a data directory holds): its path in a data directory, where it comes from, how it is fetched."""

    @property
    def relpath(self) -> Path: ...

    @property
    def origin(self) -> str: ...

    def download(self, target: Path) -> None: ...


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
        base = os.environ.get("NEGTRAIN_DOWNLOAD_URL", DEFAULT_DOWNLOAD_URL).rstrip("/")
        return f"{base}/{self.repo}/{self.revision}/{self.path}"

    @property
    def origin(self) -> str:
        return self.url

    def download(self, target: Path) -> None:
        _download(self.url, target)


@dataclass(frozen=True)
class HubSplit:
    """One split of a Hugging Face Hub dataset, stored as ``<namespace>/<name>/<split>.jsonl``."""

    dataset: str  # "namespace/name", e.g. "nyu-mll/multi_nli"
    split: str
    config: str | None = None  # the dataset's configuration name, if it has several
    #: The dataset is gated on the Hub (its conditions accepted there): fetching it needs the
    #: user's token, ``HF_TOKEN`` in the environment (or one saved by ``hf auth login``).
    gated: bool = False

    @property
    def relpath(self) -> Path:
        return Path(self.dataset) / f"{self.split}.jsonl"

    @property
    def repo(self) -> str:
        """The Hub repository the split comes from (as ``RemoteFile.repo`` names a GitHub one)."""
        return self.dataset

    @property
    def origin(self) -> str:
        config = f", configuration {self.config}" if self.config else ""
        gated = "; gated: accept its conditions on the Hub and set HF_TOKEN" if self.gated else ""
        return f"Hub dataset {self.dataset} (split {self.split}{config}{gated})"

    def download(self, target: Path) -> None:
        problem = check_hub_dataset()
        if problem:  # one clear reason now, not a minute of retries first
            raise OSError(problem)
        if self.gated and not hub_token():
            raise OSError(f"{self.dataset} is gated and no Hugging Face token was found: accept its conditions on the Hub, "
                          "then set HF_TOKEN to your token (or run `hf auth login`)")
        from datasets import load_dataset  # heavy; only needed on this path

        try:
            rows = load_dataset(self.dataset, self.config, split=self.split)
        except OSError:
            raise
        except Exception as exc:  # a gated dataset, an unknown split, ...: the same clear error as a failed fetch
            raise OSError(f"{type(exc).__name__}: {exc}") from exc
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
        os.close(fd)
        try:
            rows.to_json(tmp, lines=True, force_ascii=False)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


@dataclass(frozen=True)
class PackagedFile:
    """A file shipped inside an installed Python package (a plugin benchmark's own rows), named
    like a packaged model, ``pkg:<package>/<path>``: read where the package is installed."""

    package: str  # the importable package, e.g. "my_plugin"
    path: str  # inside it, e.g. "data/test.jsonl"

    @property
    def relpath(self) -> Path:
        return Path(self.package) / self.path

    @property
    def origin(self) -> str:
        return f"pkg:{self.package}/{self.path}"

    def installed(self) -> Path:
        """The file where the package is installed; an error saying where it looked when it is not there."""
        spec = importlib.util.find_spec(self.package)
        if spec is None or not spec.submodule_search_locations:
            raise DataError(f"data file {self.origin}: Python package '{self.package}' is not installed")
        path = Path(list(spec.submodule_search_locations)[0]) / self.path
        if not path.is_file():
            raise DataError(f"data file {self.origin}: the installed package has no such file (looked at {path})")
        return path

    def download(self, target: Path) -> None:
        raise OSError(f"{self.origin} ships inside its package; it is not downloaded")


def hub_token() -> str | None:
    """The user's Hugging Face token: ``HF_TOKEN`` (or the older ``HUGGING_FACE_HUB_TOKEN``), else
    the one ``hf auth login`` saved."""
    token = os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN")
    if token:
        return token
    try:
        from huggingface_hub import get_token  # only asked on the way to a download
    except ImportError:
        return None
    return get_token()


def data_dirs() -> list[Path]:
    """The offline data directories of ``$NEGTRAIN_DATA_DIR``, in search order, as absolute paths.

    A relative entry (``../shared/data``) is taken from the current directory, and made absolute
    here so that a path built from it stays valid for a symlink, a child process or a later chdir.
    """
    env = os.environ.get("NEGTRAIN_DATA_DIR", "")
    return [Path(p).expanduser().absolute() for p in env.split(os.pathsep) if p]


def pin_data_dirs() -> None:
    """Rewrite ``$NEGTRAIN_DATA_DIR`` with absolute paths, so child processes (DDP ranks, sweep
    trials) started from another directory read the same mirror."""
    if os.environ.get("NEGTRAIN_DATA_DIR"):
        os.environ["NEGTRAIN_DATA_DIR"] = os.pathsep.join(str(p) for p in data_dirs())


def data_dir() -> Path | None:
    """The first data directory, if any (see :func:`data_dirs`)."""
    dirs = data_dirs()
    return dirs[0] if dirs else None


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


def resolve(file: DataFile) -> Path:
    """Return a local path for ``file``, downloading it into the cache if needed."""
    if isinstance(file, PackagedFile):
        return file.installed()
    looked: list[Path] = []
    for mirror in data_dirs():
        candidate = mirror / file.relpath
        if candidate.is_file():
            return candidate
        looked.append(candidate)
    cached = cache_dir() / file.relpath
    if cached.is_file():
        return cached
    looked.append(cached)
    hint = (
        f"fetch {file.origin} to {cached}, or set NEGTRAIN_DATA_DIR to a folder "
        f"holding {file.relpath}"
    )
    missing = [str(d) for d in data_dirs() if not d.is_dir()]
    # A mistyped NEGTRAIN_DATA_DIR: said first, not only that one of its files is absent.
    lead = f"NEGTRAIN_DATA_DIR: no such directory: {', '.join(missing)} (mistyped?); " if missing else ""
    if offline():
        raise DataError(
            f"{lead}data file not found for {file.origin}; looked in {', '.join(map(str, looked))} "
            f"(NEGTRAIN_OFFLINE is set, so nothing is downloaded); {hint}"
        )
    try:
        file.download(cached)
    except (urllib.error.URLError, OSError, TimeoutError, ConnectionError) as exc:
        raise DataError(
            f"{lead}data file not found for {file.origin}; looked in {', '.join(map(str, looked))}; "
            f"download failed ({exc}); {hint}"
        ) from exc
    return cached
