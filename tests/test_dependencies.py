"""The dependency set: pyproject's requirements, resolved with ``packaging`` as pip resolves them,
reject the compromised Lightning releases and accept what is installed here."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[1]
# Published with a credential stealer that runs on import (Lightning advisory GHSA-w37p-236h-pfx3).
COMPROMISED = ("2.6.2", "2.6.3")


def _requirements() -> dict[str, Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    return {r.name.lower(): r for r in reqs}


@pytest.mark.parametrize("name", ["lightning", "pytorch-lightning"])
def test_compromised_lightning_releases_rejected(name):
    reqs = _requirements()
    # lightning requires pytorch-lightning with no version, so negtrain must state it itself.
    assert name in reqs, f"{name} is not constrained in pyproject.toml"
    spec = reqs[name].specifier
    for bad in COMPROMISED:
        assert not spec.contains(Version(bad), prereleases=True), f"{name}=={bad} is admitted by {spec}"
    # The neighbours stay admitted: the exclusion is of those two releases, not of the series.
    for good in ("2.6.1", "2.6.4"):
        assert spec.contains(Version(good)), f"{name}=={good} is rejected by {spec}"


def test_installed_versions_satisfy_the_requirements():
    unmet = []
    for name, req in _requirements().items():
        try:
            installed = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            unmet.append(f"{name} not installed")
            continue
        if not req.specifier.contains(Version(installed), prereleases=True):
            unmet.append(f"{name}=={installed} not in {req.specifier}")
    assert not unmet, unmet
    for name in ("lightning", "pytorch-lightning"):
        assert importlib.metadata.version(name) not in COMPROMISED
