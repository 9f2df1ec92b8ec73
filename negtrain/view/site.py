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
import hashlib
import http.server
import json
import math
import os
import re
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from negtrain.core.errors import NegtrainError
from negtrain.io.atomic import write_text
from negtrain.core.paths import check_output_dir, is_inside
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


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _script(global_name: str, key: str | None, value: Any) -> str:
    """A data file: one JSON value assigned to a global (keyed, for the per-set files). JSON is a
    subset of JavaScript, and json.dumps escapes every quote and control character."""
    body = json.dumps(_finite(value), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    # A lone surrogate (a served answer cut inside an emoji, "\ud83d") has no UTF-8 form: written
    # as its JSON escape, which JavaScript reads as the same string.
    body = _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m[0]):04x}", body)
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


def _finite(value: Any) -> Any:
    """``value`` with every NaN and infinity made null (JSON has neither; the page shows null as
    undefined)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


#: What a site's manifest may name: a file of the site's own layout, never a path out of it.
_OWNED = re.compile(r"^(?:[A-Za-z0-9_][A-Za-z0-9_.-]*/)?[A-Za-z0-9_][A-Za-z0-9_.-]*$")
#: The names a site's files have (its assets and data scripts): nothing else is ever removed,
#: whatever a manifest lists.
_SITE_FILE = re.compile(r"^(?:index\.html|viewer\.js|viewer\.css|data/[A-Za-z0-9_-]+\.js)$")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class _Owned:
    """What an earlier ``negtrain view`` wrote into a folder, as its manifest records it: the
    files it lists, and the SHA-256 of each as written (absent in a site of an earlier version).
    A file is the site's to replace or remove only when it still holds what was written: a
    manifest is a file anyone can edit or copy, the content is the proof."""

    listed: set[str]
    hashes: dict[str, str] | None  # None: a manifest without hashes (an earlier version's)

    def proven(self, root: Path, rel: str) -> bool:
        path = root / rel
        if rel not in self.listed or not _SITE_FILE.match(rel) or path.is_symlink() or not path.is_file():
            return False
        if self.hashes is None:  # an earlier version's site: its own layout, replaced but never removed
            return True
        try:
            return self.hashes.get(rel) == _sha256(path.read_bytes())
        except OSError:
            return False


def _owned(root: Path, where: str) -> _Owned:
    """The files an earlier ``negtrain view`` wrote into ``root``, from its manifest (``MARKER``);
    an empty folder owns nothing; a folder without a manifest is refused (``view`` writes over
    nothing it did not make)."""
    marker = root / MARKER
    if not marker.is_file():
        if any(root.iterdir()):
            raise NegtrainError(f"--out {where}: exists and is not a site `negtrain view` wrote (no {MARKER}); "
                                "give a new or empty folder")
        return _Owned(set(), {})
    try:
        manifest = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise NegtrainError(f"--out {where}: its {MARKER} cannot be read ({exc}); give a new or empty folder") from exc
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if files is None:  # a site of an earlier version: its fixed layout
        data = root / "data"
        files = [*ASSETS, *(f"data/{p.name}" for p in (data.iterdir() if data.is_dir() else [])
                            if re.fullmatch(r"index\.js|s\d+e\d+\.js", p.name))]
    if not isinstance(files, list) or not all(isinstance(f, str) and _OWNED.match(f) and ".." not in f for f in files):
        raise NegtrainError(f"--out {where}: its {MARKER} names files outside the site; give a new or empty folder")
    hashes = manifest.get("sha256") if isinstance(manifest, dict) else None
    if hashes is not None and not (isinstance(hashes, dict) and all(isinstance(v, str) for v in hashes.values())):
        raise NegtrainError(f"--out {where}: its {MARKER} has damaged file hashes (sha256); give a new or empty folder")
    return _Owned(set(files), hashes)


def _check_inside(root: Path, rels: Iterable[str], out: Path) -> None:
    """No file is written or removed through a symlinked folder that leads out of the site (a
    ``data`` linked to another folder would have its files replaced and removed)."""
    for parent in sorted({(root / rel).parent for rel in rels}):
        if not is_inside(parent, root):
            raise NegtrainError(f"--out {out}: {parent.relative_to(root)} is a symlink to {os.path.realpath(parent)}, "
                                "out of the site; view writes only inside it: make it a folder of the site, or give a new or empty folder")


def _site_files(index: dict[str, Any], pages: dict[str, Any]) -> dict[str, bytes]:
    """The site's files (relative path -> bytes), its manifest excepted."""
    assets = resources.files("negtrain.view") / "assets"
    files = {name: (assets / name).read_bytes() for name in ASSETS}
    files["data/index.js"] = _script("NEGTRAIN_INDEX", None, index).encode("utf-8")
    for key, page in pages.items():
        files[f"data/{key}.js"] = _script("NEGTRAIN_SETS", key, page).encode("utf-8")
    return files


def write_site(paths: list[Path], out: Path, resamples: int = 1000, seed: int = 0, adjust: str = "holm") -> dict[str, Any]:
    """Build and write the site into ``out`` and return the overview data. The site owns only the
    files its manifest (``MARKER``) lists with the SHA-256 of what it wrote: a rerun replaces those
    (each file renamed into place), removes the ones no longer written that still hold what was
    written, and keeps (and names) everything else in the folder; a folder it did
    not make (non-empty, no manifest) is refused. ``out`` may be ``.`` or a symlink to a folder
    (the site is written where it points)."""
    out = Path(out)
    check_output_dir(out, "--out")
    root = Path(os.path.realpath(out))
    owned = _owned(root, str(out)) if root.is_dir() else _Owned(set(), {})
    index, pages = build(paths, resamples, seed, adjust)
    files = _site_files(index, pages)
    _check_inside(root, files, out)
    for rel in files:
        target = root / rel
        if target.is_symlink() or target.is_dir():
            raise NegtrainError(f"--out {out}: {rel} is {'a symlink' if target.is_symlink() else 'a folder'}, not the file the site wrote; "
                                "move it, or give a new or empty folder")
        if target.exists() and not owned.proven(root, rel):
            why = "not in its" if rel not in owned.listed else "changed since it was written, by its"
            raise NegtrainError(f"--out {out}: {rel} is there and not the site's own ({why} {MARKER}); "
                                "move it, or give a new or empty folder")
    stale = sorted(owned.listed - set(files) - {MARKER})
    removable = [rel for rel in stale if owned.hashes is not None and owned.proven(root, rel)]
    kept = [rel for rel in stale if rel not in removable and (root / rel).exists()]
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".negtrain-view-", dir=root))
    try:
        for rel, data in files.items():
            (staging / rel).parent.mkdir(parents=True, exist_ok=True)
            (staging / rel).write_bytes(data)
        for rel in files:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            os.replace(staging / rel, root / rel)
        for rel in removable:  # the earlier site's files no longer written, as it wrote them
            (root / rel).unlink()
        manifest = {"paths": [str(p) for p in paths], "files": sorted(files),
                    "sha256": {rel: _sha256(data) for rel, data in sorted(files.items())}}
        write_text(root / MARKER, json.dumps(manifest) + "\n")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if kept:
        print(f"view: kept {len(kept)} file(s) its {MARKER} listed but not as view wrote them (changed since, or not "
              f"written by it): {', '.join(kept)}", flush=True)
    return index


def site_bytes(out: Path) -> int:
    return sum(p.stat().st_size for p in Path(out).rglob("*") if p.is_file())


class _SiteOnly(http.server.SimpleHTTPRequestHandler):
    """Serves the site's own files to its own address only: a request whose ``Host`` is not
    127.0.0.1 or localhost with the server's port is refused (a web page elsewhere cannot read
    the site by rebinding a name of its own to 127.0.0.1), and a path that leads, through a
    symlink, out of the site's folder is not found."""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    def parse_request(self) -> bool:
        if not super().parse_request():
            return False
        hosts = getattr(self.server, "site_hosts", ())
        if (self.headers.get("Host") or "").strip().lower() not in hosts:
            self.send_error(403, "not this site's host (127.0.0.1 or localhost with its port)")
            return False
        return True

    def send_head(self) -> Any:
        root = os.path.realpath(self.directory)
        real = os.path.realpath(self.translate_path(self.path))
        if real != root and not real.startswith(root + os.sep):
            self.send_error(404, "File not found")
            return None
        return super().send_head()


def site_server(out: Path, port: int) -> http.server.ThreadingHTTPServer:
    """The server of the site in ``out`` on 127.0.0.1:PORT (0: any free port), not yet serving."""
    handler = functools.partial(_SiteOnly, directory=os.path.realpath(out))
    try:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    except OSError as exc:
        raise NegtrainError(f"--serve {port}: cannot listen on 127.0.0.1:{port} ({exc.strerror or exc})") from exc
    bound = server.server_address[1]
    server.site_hosts = (f"127.0.0.1:{bound}", f"localhost:{bound}")  # type: ignore[attr-defined]  # read by the handler (_SiteOnly); the stdlib server declares no such field
    return server


def serve(out: Path, port: int) -> None:
    """Serve the site on http://127.0.0.1:PORT until interrupted (never on other interfaces)."""
    server = site_server(out, port)
    bound = server.server_address[1]
    print(f"serving {out} at http://127.0.0.1:{bound}/ (Ctrl-C stops)", flush=True)
    with server:
        server.serve_forever()
