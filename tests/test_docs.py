"""The docs' reference pages are generated from the code, and cover all of it.

docs/hooks.py puts the recipe-field table and `evaluate --list` into their pages when the site is
built (`mkdocs build --strict`, run by .ci/run); these tests call the same functions, so a field
or benchmark the generator missed, or a page that lost its marker, fails here."""

from __future__ import annotations

import importlib.util

import pytest
from pydantic import BaseModel

from conftest import REPO
from negtrain.benchmarks.registry import BENCHMARKS
from negtrain.config import FAMILY_SECTIONS, Recipe
from negtrain.config.suggestions import field_sections


def _hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", REPO / "docs" / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _every_field(section: type[BaseModel], prefix: str = "") -> set[str]:
    names = set()
    for name, field in section.model_fields.items():
        names.add(prefix + name)
        for sub in field_sections(field):
            if isinstance(sub, type) and issubclass(sub, BaseModel):
                names |= _every_field(sub, f"{prefix}{name}.")
    return names


def test_every_recipe_field_is_on_the_generated_page():
    page = _hooks().render((REPO / "docs" / "reference" / "recipe-fields.md").read_text())
    fields = _every_field(Recipe)
    for section in FAMILY_SECTIONS.values():
        fields |= {f"model.{name}" for name in section.model_fields}
    assert len(fields) > 100
    missing = sorted(f for f in fields if f"| `{f}` |" not in page)
    assert not missing, missing


def test_every_benchmark_and_family_is_on_the_generated_matrix_page():
    page = _hooks().render((REPO / "docs" / "reference" / "benchmarks.md").read_text())
    assert "<!-- generated" not in page
    for name in BENCHMARKS:
        assert f"\n  {name} " in page, name
    header = next(line for line in page.splitlines() if line.strip().startswith("benchmark "))
    for family in FAMILY_SECTIONS:
        assert family in header.split(), family  # a column of the matrix


@pytest.mark.parametrize("page", ["recipe-fields.md", "benchmarks.md"])
def test_a_reference_page_holds_its_marker(page):
    assert "<!-- generated: " in (REPO / "docs" / "reference" / page).read_text()


def test_extending_shows_architectures_how_to_add_and_keeps_no_copy():
    """One source: the docs' "How to add" is ARCHITECTURE.md's section, put in when the site is
    built; docs/extending.md itself holds only the marker."""
    architecture = (REPO / "ARCHITECTURE.md").read_text()
    section = architecture.split("\n## How to add\n", 1)[1].split("\n## ", 1)[0].strip()
    raw = (REPO / "docs" / "extending.md").read_text()
    assert "<!-- generated: how-to-add -->" in raw
    for line in section.splitlines():
        if len(line.strip()) > 40:
            assert line.strip() not in raw, line  # no copied line
    page = _hooks().render(raw)
    assert section in page and "<!-- generated" not in page
    assert "one row in `negtrain/benchmarks/registry.py`" in page


def _nav() -> list:
    import yaml

    class Loader(yaml.SafeLoader):  # mkdocs.yml may hold tags the safe loader does not know
        pass

    Loader.add_multi_constructor("", lambda loader, suffix, node: None)
    return yaml.load((REPO / "mkdocs.yml").read_text(), Loader=Loader)["nav"]


def test_the_nav_reads_getting_started_concepts_how_to_reference():
    nav = _nav()
    assert [next(iter(entry)) for entry in nav] == ["Getting started", "Concepts", "How-to", "Reference"]

    def pages(entries) -> list[str]:
        out = []
        for entry in entries:
            value = next(iter(entry.values())) if isinstance(entry, dict) else entry
            out += pages(value) if isinstance(value, list) else [value]
        return out

    listed = pages(nav)
    on_disk = sorted(str(p.relative_to(REPO / "docs")) for p in (REPO / "docs").rglob("*.md"))
    assert sorted(listed) == on_disk  # every page in the nav once, and no page left out
    assert "reference/api.md" in listed and "concepts.md" in listed


def test_one_page_for_served_models():
    assert not (REPO / "docs" / "served-models.md").exists()
    served = (REPO / "docs" / "served.md").read_text()
    for heading in ("### The transport", "### Greedy on every server", "### Stopping a served card"):
        assert heading in served
    for path in [*(REPO / "docs").rglob("*.md"), *(REPO / "negtrain").rglob("*.py"), REPO / "mkdocs.yml", REPO / "README.md"]:
        assert "served-models.md" not in path.read_text(), path


def test_pyproject_points_to_pages_that_exist():
    import re

    text = (REPO / "pyproject.toml").read_text()
    named = re.findall(r"docs/[\w./-]+\.md", text)
    assert named, "pyproject.toml names no docs page"
    for page in named:
        assert (REPO / page).is_file(), page
