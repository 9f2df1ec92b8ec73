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
