"""Writing a ``negtrain view`` site and serving it on 127.0.0.1.

The site is a folder: ``index.html`` (with a Content-Security-Policy that allows scripts and
styles from the site's own files only: no inline script, nothing from elsewhere), ``viewer.js``,
``viewer.css``, and the data as small scripts under ``data/`` that each assign one JSON value to a
global: ``data/index.js`` (the overview) and one ``data/<key>.js`` per eval set, loaded when its
page is opened. Scripts rather than JSON files because a page opened from ``file://`` may not
``fetch`` files beside it, and a ``<script src>`` of the same folder is allowed by the policy.
Every text from a model or a data file reaches the page as text (``textContent``), never as HTML.
"""

from __future__ import annotations

import functools
import http.server
import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

from negtrain.core.errors import NegtrainError
from negtrain.io.atomic import atomic_dir
from negtrain.core.paths import check_output_dir
from negtrain.view.site_data import Scoring, mismatches, pair_data, pairs_of, record_summary, set_data
from negtrain.view.sources import Source, read_sources

#: The files of the site besides its data, shipped in the package.
ASSETS = ("index.html", "viewer.js", "viewer.css")
#: Written into every site: marks a folder ``view`` may replace.
MARKER = "negtrain-view.json"


def default_out(paths: list[Path]) -> Path:
    """``<first>/view``, or ``<first>/view-vs-<second>`` when comparing (as ``report`` names its folders)."""
    first = Path(paths[0])
    return first / ("view" if len(paths) == 1 else "view-vs-" + "-".join(Path(p).resolve().name for p in paths[1:]))


def _script(global_name: str, key: str | None, value: Any) -> str:
    """A data file: one JSON value assigned to a global (keyed, for the per-set files). JSON is a
    subset of JavaScript, and json.dumps escapes every quote and control character."""
    body = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    if key is None:
        return f"window.{global_name}={body};\n"
    return f"window.{global_name}=window.{global_name}||{{}};window.{global_name}[{json.dumps(key)}]={body};\n"


def _markdown_tables(text: str) -> list[dict[str, Any]]:
    """The pipe tables of a Markdown file (a protocol's paper table) as headers and rows, with the
    lines around them as plain paragraphs: [{"text": ...} | {"headers": [...], "rows": [[...]]}]."""
    blocks: list[dict[str, Any]] = []
    for line in text.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if blocks and "headers" in blocks[-1]:
                if not all(set(c) <= set("-:") for c in cells):
                    blocks[-1]["rows"].append(cells)
            else:
                blocks.append({"headers": cells, "rows": []})
        elif line.strip():
            blocks.append({"text": _plain(line.strip().lstrip("#").strip())})
    for block in blocks:
        if "rows" in block:
            block["headers"] = [_plain(c) for c in block["headers"]]
            block["rows"] = [[_plain(c) for c in row] for row in block["rows"]]
    return blocks


def _plain(markdown: str) -> str:
    """A Markdown line as the page shows it: without the backticks and bold marks around words."""
    return re.sub(r"`([^`]*)`", r"\1", markdown).replace("**", "")


#: The head lines of a card.md that qualify all its numbers (an untrained head, a cut split): the
#: viewer's overview shows them too.
CARD_HEADS = ("**Chance level.**", "**Part of the data.**")


def _card_heads(folder: Path) -> list[str]:
    card = folder / "card.md"
    if not card.is_file():
        return []
    return [_plain(line) for line in card.read_text(encoding="utf-8").splitlines() if line.startswith(CARD_HEADS)]


def build(paths: list[Path], resamples: int = 1000, seed: int = 0, adjust: str = "holm") -> tuple[dict[str, Any], dict[str, Any]]:
    """The overview and every eval set's page data: (index, {key: page})."""
    sources: list[Source] = [s for p in paths for s in read_sources(Path(p))]
    pages: dict[str, Any] = {}
    scorings: dict[tuple[int, int], Scoring] = {}
    warnings: list[str] = []
    index_sources = []
    for i, source in enumerate(sources):
        sets = []
        for k, s in enumerate(source.sets):
            key = f"s{i}e{k}"
            page, scoring = set_data(s)
            scorings[(i, k)] = scoring
            page["source"] = source.label
            page["key"] = key
            pages[key] = page
            warnings += mismatches(s.record.metrics, scoring.values, f"{source.label}: {s.name}")
            sets.append(record_summary(s, key))
        entry: dict[str, Any] = {"label": source.label, "kind": source.kind, "epoch": source.epoch, "sets": sets}
        if source.kind == "run":
            entry["curves"] = source.curves
        if source.kind == "protocol":
            entry["protocol"] = _markdown_tables((source.path / "protocol.md").read_text(encoding="utf-8"))
        if source.kind != "run":
            entry["heads"] = _card_heads(source.path)
        index_sources.append(entry)
    pairs = [p for a, b in pairs_of(len(sources)) if (p := pair_data(sources, a, b, scorings, resamples, seed, adjust))]
    index = {"sources": index_sources, "pairs": pairs, "adjust": adjust,
             "bootstrap": {"resamples": resamples, "seed": seed}, "warnings": warnings}
    return index, pages


def _is_site(out: Path) -> bool:
    return (out / MARKER).is_file()


def write_site(paths: list[Path], out: Path, resamples: int = 1000, seed: int = 0, adjust: str = "holm") -> dict[str, Any]:
    """Build and write the site into ``out`` (replacing an earlier site there, never another
    folder); returns the overview data."""
    out = Path(out)
    check_output_dir(out, "--out")
    if out.exists() and any(out.iterdir()) and not _is_site(out):
        raise NegtrainError(f"--out {out}: exists and is not a site `negtrain view` wrote; give a new or empty folder")
    index, pages = build(paths, resamples, seed, adjust)
    assets = resources.files("negtrain.view") / "assets"
    with atomic_dir(out, replace=True) as tmp:
        for name in ASSETS:
            (tmp / name).write_bytes((assets / name).read_bytes())
        data = tmp / "data"
        data.mkdir()
        (data / "index.js").write_text(_script("NEGTRAIN_INDEX", None, index), encoding="utf-8")
        for key, page in pages.items():
            (data / f"{key}.js").write_text(_script("NEGTRAIN_SETS", key, page), encoding="utf-8")
        (tmp / MARKER).write_text(json.dumps({"paths": [str(p) for p in paths]}) + "\n", encoding="utf-8")
    return index


def site_bytes(out: Path) -> int:
    return sum(p.stat().st_size for p in Path(out).rglob("*") if p.is_file())


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass


def serve(out: Path, port: int) -> None:
    """Serve the site on http://127.0.0.1:PORT until interrupted (never on other interfaces)."""
    handler = functools.partial(_Quiet, directory=str(out))
    try:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    except OSError as exc:
        raise NegtrainError(f"--serve {port}: cannot listen on 127.0.0.1:{port} ({exc.strerror or exc})") from exc
    print(f"serving {out} at http://127.0.0.1:{server.server_address[1]}/ (Ctrl-C stops)", flush=True)
    with server:
        server.serve_forever()


