"""A pip constraints file from a run's provenance record (``env --constraints``): the package
versions it recorded, one pin a line, every value checked before a line is written, since pip takes
any line of the file as an option."""

from __future__ import annotations

import json
import re
from typing import Any

from packaging.version import InvalidVersion, Version

from negtrain.core.errors import NegtrainError
from negtrain.models.provenance import FILE_NAME

#: A distribution name as PEP 508 allows it (letters, digits, ``.``, ``_``, ``-``).
_PACKAGE_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")
_GIT_COMMIT = re.compile(r"[0-9a-f]{7,64}")
_CUDA_VERSION = re.compile(r"[0-9]+(?:\.[0-9]+)*")
#: No package version is longer (the longest on PyPI are well under 100 characters).
MAX_VERSION_CHARS = 200


def _version(value: Any, where: str) -> str:
    """``value`` if it is a PEP 440 version written on one line, else a NegtrainError. packaging
    alone would accept surrounding whitespace, a line break included, which would start a line
    of its own (a pip option) in the constraints file."""
    if not isinstance(value, str):
        raise NegtrainError(f"{where}: {json.dumps(value)[:80]} is not a version string")
    if len(value) > MAX_VERSION_CHARS:
        raise NegtrainError(f"{where}: {json.dumps(value)[:80]}... is {len(value):,} characters, too long to be a version")
    try:
        Version(value)
    except (InvalidVersion, ValueError):  # ValueError: a number of more digits than Python converts
        raise NegtrainError(f"{where}: {json.dumps(value)[:80]} is not a PEP 440 version") from None
    if any(c.isspace() for c in value):
        raise NegtrainError(f"{where}: {json.dumps(value)[:80]} holds whitespace or a line break; a version is one word")
    return value


def _checked_pins(record: dict[str, Any], source: str) -> tuple[dict[str, str], list[str]]:
    """The package versions and the comment lines of a constraints file, every value checked
    before a line is written (the file is read by pip, which takes any line as an option)."""
    where = f"{source}: {FILE_NAME}"
    packages = record.get("packages")
    if not isinstance(packages, dict) or not packages:
        raise NegtrainError(f"{where}: 'packages' should be an object of package name to version, got {json.dumps(packages)[:80]}")
    pins = {}
    for name, version in packages.items():
        if not _PACKAGE_NAME.fullmatch(name):
            raise NegtrainError(f"{where}: packages: {json.dumps(name)[:80]} is not a package name")
        pins[name] = _version(version, f"{where}: packages.{name}")
    comments = []
    origin = record.get("negtrain")
    if isinstance(origin, dict) and origin.get("git_commit"):
        commit = origin["git_commit"]
        if not (isinstance(commit, str) and _GIT_COMMIT.fullmatch(commit)):
            raise NegtrainError(f"{where}: negtrain.git_commit {json.dumps(commit)[:80]} is not a git commit")
        version = _version(origin.get("version"), f"{where}: negtrain.version")
        dirty = " (with uncommitted changes)" if origin.get("git_dirty") else ""
        comments.append(f"# negtrain {version} from git commit {commit}{dirty}")
    torch_info = record.get("torch")
    if isinstance(torch_info, dict) and torch_info.get("cuda"):
        cuda = torch_info["cuda"]
        if not (isinstance(cuda, str) and _CUDA_VERSION.fullmatch(cuda)):
            raise NegtrainError(f"{where}: torch.cuda {json.dumps(cuda)[:80]} is not a CUDA version")
        comments.append(f"# torch was built for CUDA {cuda}: install it from the matching index first")
    return pins, comments


def constraints(record: dict[str, Any], source: str) -> str:
    """A pip constraints file pinning the package versions a run recorded, one per line; a record
    with a value that is not what it should be is refused before anything is written."""
    pins, comments = _checked_pins(record, source)
    lines = [f"# pip constraints: the package versions of {source}", "# pip install -c THIS_FILE negtrain", *comments]
    lines += [f"{name}=={version}" for name, version in sorted(pins.items(), key=lambda kv: kv[0].lower())]
    return "\n".join(lines) + "\n"
