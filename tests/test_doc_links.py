"""Every relative link of the README and of docs/ resolves: the file it names exists, and the
``#anchor`` it names is a heading of that file (issue 48: the quickstart sent readers to README
sections that had moved to docs/training.md). ``mkdocs build --strict`` checks the site's links
too, but not the README's, and it is not part of the default test run."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

from conftest import REPO

LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^(```|~~~)")


def pages() -> list[Path]:
    return [REPO / "README.md", REPO / "ARCHITECTURE.md", *sorted((REPO / "docs").rglob("*.md"))]


def _prose(text: str) -> str:
    """The text outside fenced code blocks and inline code (a link inside code is an example)."""
    out, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            out.append(re.sub(r"`[^`]*`", "", line))
    return "\n".join(out)


def slug(heading: str) -> str:
    """A heading's anchor as mkdocs (Python-Markdown's toc) makes it, and GitHub nearly so."""
    text = re.sub(r"`|\*\*|\*|_(?=\w)|(?<=\w)_", "", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(path: Path) -> set[str]:
    text = _prose_headings(path.read_text(encoding="utf-8"))
    found = set()
    for line in text:
        explicit = re.search(r"\{\s*#([\w-]+)\s*\}\s*$", line)
        heading = re.sub(r"^#+\s*", "", line)
        found.add(explicit.group(1) if explicit else slug(heading))
    found |= set(re.findall(r"<a (?:id|name)=\"([^\"]+)\"", path.read_text(encoding="utf-8")))
    return found


def _prose_headings(text: str) -> list[str]:
    headings, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
        elif not fenced and re.match(r"^#{1,6}\s", line):
            headings.append(line.strip())
    return headings


def links(path: Path) -> list[str]:
    return [t for t in LINK.findall(_prose(path.read_text(encoding="utf-8")))
            if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]  # http:, https:, mailto:, file:


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page):
    broken = []
    for target in links(page):
        file, _, anchor = target.partition("#")
        resolved = (page.parent / file).resolve() if file else page
        if not resolved.exists():
            broken.append(f"{target}: no {resolved.relative_to(REPO) if resolved.is_relative_to(REPO) else resolved}")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target}: {resolved.name} has no heading #{anchor}")
    assert not broken, broken


def test_the_checker_finds_a_broken_file_and_a_broken_anchor(tmp_path):
    (tmp_path / "b.md").write_text("# Title\n\n## Data `files`\n")
    page = tmp_path / "a.md"
    page.write_text("[ok](b.md#data-files) [gone](c.md) [bad](b.md#labels) `[code](x.md)`\n```\n[fenced](y.md)\n```\n")
    assert links(page) == ["b.md#data-files", "c.md", "b.md#labels"]
    assert anchors(tmp_path / "b.md") == {"title", "data-files"}
