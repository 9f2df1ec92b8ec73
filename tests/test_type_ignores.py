"""mypy checks the whole package; where it is told to look away, the line says which error
(``# type: ignore[code]``) and why (a comment after it). A bare ``# type: ignore``, or one without
its reason, fails here, naming the line."""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "negtrain"
IGNORE = re.compile(r"#\s*type:\s*ignore(?P<rest>.*)$")
#: ``[code, ...]``, then a comment with the reason.
EXPLAINED = re.compile(r"^\[[a-z-]+(?:,\s*[a-z-]+)*\]\s+#\s*\S")


def ignores_without_code_or_reason(text: str) -> list[int]:
    return [n for n, line in enumerate(text.splitlines(), 1)
            if (m := IGNORE.search(line)) is not None and not EXPLAINED.match(m["rest"].strip())]


def test_the_check_sees_a_bare_ignore_and_one_without_its_reason():
    text = "a = 1  # type: ignore\nb = 2  # type: ignore[assignment]\nc = 3  # type: ignore[assignment]  # why\n"
    assert ignores_without_code_or_reason(text) == [1, 2]


def test_no_type_ignore_in_the_package_lacks_its_code_or_reason():
    found = [f"{path.relative_to(PACKAGE.parent)}:{n}" for path in sorted(PACKAGE.rglob("*.py"))
             for n in ignores_without_code_or_reason(path.read_text(encoding="utf-8"))]
    assert not found, f"# type: ignore without [code] and a reason: {', '.join(found)}"
