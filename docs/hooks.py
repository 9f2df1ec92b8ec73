"""mkdocs hooks: the reference pages are generated from the code, never written twice.

A page holds a marker line and the hook puts the generated text in its place when the site is built:

- ``<!-- generated: recipe-fields -->``: every recipe field, from the typed config classes
  (``negtrain.config``): dotted name, type, default and the field's own description;
- ``<!-- generated: evaluate-list -->``: the output of ``negtrain evaluate --list`` (the scoring
  matrix of benchmark x family, the protocols, and every benchmark's splits, labels and metrics);
- ``<!-- generated: how-to-add -->``: the section "How to add" of ``ARCHITECTURE.md`` (where each
  kind of extension goes), so the docs show the one text the repository keeps, never a copy.

tests/test_docs.py calls the same functions and checks that every field and benchmark appears.
"""

from __future__ import annotations

import contextlib
import io
import typing
from pathlib import Path

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

MARKERS = ("recipe-fields", "evaluate-list", "how-to-add")

ARCHITECTURE = Path(__file__).resolve().parent.parent / "ARCHITECTURE.md"


def _type_name(annotation: typing.Any) -> str:
    text = getattr(annotation, "__name__", None) if isinstance(annotation, type) else None
    text = text or str(annotation).replace("typing.", "")
    return text.replace("negtrain.config.", "").replace("|", "\\|")


def _default(field) -> str:
    if field.default_factory is not None:
        return "(section)"
    if field.default is PydanticUndefined:
        return "required"
    return f"`{field.default!r}`"


def _text(field) -> str:
    return (field.description or "").replace("\n", " ").replace("|", "\\|")


def recipe_field_rows() -> list[tuple[str, str, str, str]]:
    """(dotted name, type, default, description) of every recipe field, sections expanded; a
    family's own model settings are named ``model.<field>`` with the family in the description."""
    from negtrain.config import Recipe
    from negtrain.config.suggestions import field_sections

    rows: list[tuple[str, str, str, str]] = []

    def walk(section: type[BaseModel], prefix: str) -> None:
        for name, field in section.model_fields.items():
            dotted = f"{prefix}{name}"
            subs = [s for s in field_sections(field) if issubclass(s, BaseModel)]
            if not subs:
                rows.append((dotted, _type_name(field.annotation), _default(field), _text(field)))
                continue
            rows.append((dotted, "section", _default(field), _text(field)))
            if len(subs) == 1:
                walk(subs[0], f"{dotted}.")
                continue
            # A section picked from a table (the model section, by family): each setting once,
            # with the families that have it.
            owners: dict[str, list[str]] = {}
            first: dict[str, typing.Any] = {}
            for sub in subs:
                family = sub.model_fields["family"].default if "family" in sub.model_fields else sub.__name__
                for sub_name, sub_field in sub.model_fields.items():
                    owners.setdefault(sub_name, []).append(str(family))
                    first.setdefault(sub_name, sub_field)
            for sub_name, families in owners.items():
                which = "every family" if len(families) == len(subs) else "family " + ", ".join(f"`{f}`" for f in families)
                sub_field = first[sub_name]
                rows.append((f"{dotted}.{sub_name}", _type_name(sub_field.annotation), _default(sub_field), f"({which}) {_text(sub_field)}"))

    walk(Recipe, "")
    return rows


def recipe_fields_markdown() -> str:
    lines = ["| field | type | default | what it is |", "|---|---|---|---|"]
    lines += [f"| `{name}` | {kind} | {default} | {text} |" for name, kind, default, text in recipe_field_rows()]
    return "\n".join(lines)


def evaluate_list_text() -> str:
    from negtrain.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["evaluate", "--list"])
    if code not in (0, None):
        raise RuntimeError(f"negtrain evaluate --list exited {code}")
    return out.getvalue()


def how_to_add_markdown() -> str:
    """The body of ARCHITECTURE.md's "## How to add" section (up to the next "## " heading)."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    start = text.index("\n## How to add\n") + len("\n## How to add\n")
    end = text.find("\n## ", start)
    return text[start:end if end != -1 else len(text)].strip("\n")


def render(markdown: str) -> str:
    """The page with each marker replaced by what it names."""
    if "<!-- generated: recipe-fields -->" in markdown:
        markdown = markdown.replace("<!-- generated: recipe-fields -->", recipe_fields_markdown())
    if "<!-- generated: evaluate-list -->" in markdown:
        markdown = markdown.replace("<!-- generated: evaluate-list -->", "```text\n" + evaluate_list_text() + "```")
    if "<!-- generated: how-to-add -->" in markdown:
        markdown = markdown.replace("<!-- generated: how-to-add -->", how_to_add_markdown())
    return markdown


def on_page_markdown(markdown: str, **_: typing.Any) -> str:  # mkdocs hook
    return render(markdown)
