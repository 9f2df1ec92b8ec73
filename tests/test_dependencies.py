"""The dependency set: pyproject's requirements, resolved with ``packaging`` as pip resolves them,
admit no release a published advisory names (each floor is checked against its advisory: the last
affected release is refused, every admitted one is at or above the fix), accept what is installed
here, and are the ranges the documentation's dependency table states, with the advisories."""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[1]

#: (package, advisory, releases it names as affected, the first release with the fix or None when
#: the affected releases are a list, not a range below a fix).
ADVISORIES = [
    ("torch", "CVE-2025-32434", ["2.5.1"], "2.6.0"),
    ("torch", "CVE-2026-24747", ["2.9.1"], "2.10.0"),
    # Published with a credential stealer that runs on import.
    ("lightning", "GHSA-w37p-236h-pfx3", ["2.6.2", "2.6.3"], None),
    ("pytorch-lightning", "GHSA-w37p-236h-pfx3", ["2.6.2", "2.6.3"], None),
    # Code run from a checkpoint's _instantiator hyperparameters (CVE-2026-58659).
    ("lightning", "GHSA-qqmf-gpg7-g8gw", ["2.6.5"], "2.6.6"),
    ("pytorch-lightning", "GHSA-qqmf-gpg7-g8gw", ["2.6.5"], "2.6.6"),
    ("transformers", "CVE-2026-1839", ["4.57.6"], "5.0.0rc3"),
    ("transformers", "CVE-2026-4372", ["5.2.0"], "5.3.0"),
    ("transformers", "CVE-2026-5241", ["5.4.0"], "5.5.0"),
    ("transformers", "CVE-2026-9856", ["5.9.0", "5.8.0.dev0"], "5.10.0"),
    # The Go modules inside the wandb-core binary the wheel carries.
    ("wandb", "CVE-2026-33186", ["0.25.1"], "0.26.0"),
    ("wandb", "GHSA-hrxh-6v49-42gf", ["0.28.1"], "0.28.2"),
]


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _requirements() -> dict[str, Requirement]:
    reqs = [Requirement(r) for r in _project()["dependencies"]]
    return {r.name.lower(): r for r in reqs}


def _floor(spec: SpecifierSet) -> Version:
    floors = [Version(s.version) for s in spec if s.operator in (">=", "==", "~=")]
    assert floors, f"{spec} has no floor: every release below the fixes would be admitted"
    return max(floors)


@pytest.mark.parametrize(("name", "advisory", "affected", "fixed"), ADVISORIES, ids=[f"{a[0]}-{a[1]}" for a in ADVISORIES])
def test_every_floor_is_above_its_advisory(name, advisory, affected, fixed):
    reqs = _requirements()
    assert name in reqs, f"{name} is not constrained in pyproject.toml"
    spec = reqs[name].specifier
    for bad in affected:
        assert not spec.contains(Version(bad), prereleases=True), f"{name}=={bad} ({advisory}) is admitted by {spec}"
    if fixed is not None:
        assert _floor(spec) >= Version(fixed), f"{name} {spec} admits releases below {fixed}, the fix of {advisory}"


def test_the_dev_extra_serves_with_transformers_above_the_floor():
    serving = [Requirement(r) for r in _project()["optional-dependencies"]["dev"] if r.startswith("transformers")]
    assert len(serving) == 1
    assert _floor(serving[0].specifier) >= _floor(_requirements()["transformers"].specifier)


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


ROW = re.compile(r"\| ((?:`[^`]+`(?:, )?)+) \| `([^`]+)` \|")


def _documented_rows() -> dict[str, list[str]]:
    """The dependency tables' rows by package, from README.md and docs/ (wherever they live)."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]
    rows: dict[str, list[str]] = {}
    for page in pages:
        for line in page.read_text(encoding="utf-8").splitlines():
            match = ROW.match(line)
            if match:
                for name in re.findall(r"`([^`]+)`", match.group(1)):
                    rows.setdefault(name, []).append(line)
    return rows


@pytest.mark.parametrize("name", sorted({a[0] for a in ADVISORIES}))
def test_the_documented_table_states_each_range_and_its_advisories(name):
    rows = _documented_rows().get(name, [])
    readme = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert any(row in readme for row in rows), f"no row for {name} in the README's dependency table"
    for row in rows:
        documented = ROW.match(row).group(2)
        assert SpecifierSet(documented) == _requirements()[name].specifier, f"{name}: a table says {documented}"
    for _, advisory, _, _ in (a for a in ADVISORIES if a[0] == name):
        assert any(advisory in row for row in rows), f"{name}: no dependency table names {advisory}"
