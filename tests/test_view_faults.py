"""`negtrain view` under faults (issue 47): the site owns only the files its manifest lists (a
rerun keeps a user's notes and screenshots, and refuses a folder it did not make), `--out .` and
a symlinked `--out` work, NaN and Infinity in a card become null (shown as undefined), a line that
is not UTF-8 or a benchmark that is not a name is one error naming the file and line, and
`--serve` answers only its own Host and never follows a symlink out of the site.

Each case failed before (a traceback, a lost file, a file served from outside the site)."""

from __future__ import annotations

import http.client
import json
import os
import threading
from pathlib import Path

import pytest

from negtrain.benchmarks.registry import get_benchmark
from negtrain.cli import main
from test_view import flip, write_card


def monli_lines(wrong: int = 1) -> list[dict]:
    """MoNLI's test split (200 examples), the first ``wrong`` predicted wrong."""
    return [{"id": e.id, "prediction": flip(e.label) if i < wrong else e.label, "label": e.label}
            for i, e in enumerate(get_benchmark("monli").load("test"))]


@pytest.fixture(scope="module")
def cards(tmp_path_factory):
    root = tmp_path_factory.mktemp("cards")
    return write_card(root / "a", monli_lines(1), benchmark="monli"), write_card(root / "b", monli_lines(3), benchmark="monli")


def view(capsys, *args) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["view", *map(str, args), "--bootstrap", "0"])
    out, err = capsys.readouterr()
    return code, out, err


def one_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


def data_of(site: Path, name: str = "index.js"):
    text = (site / "data" / name).read_text(encoding="utf-8")
    body = text.split("=", 1)[1] if name == "index.js" else text.split("]=", 1)[1]
    return json.loads(body.rstrip().removesuffix(";"))


# ---- the site owns only what it wrote ------------------------------------------------------------

def test_a_rerun_keeps_the_users_files_and_removes_only_its_own(cards, tmp_path, capsys):
    a, b = cards
    site = tmp_path / "site"
    assert view(capsys, a, b, "--out", site)[0] == 0
    assert (site / "data" / "s1e0.js").is_file()
    manifest = json.loads((site / "negtrain-view.json").read_text())
    assert "data/s1e0.js" in manifest["files"] and "index.html" in manifest["files"]
    (site / "notes.txt").write_text("my notes")
    (site / "screenshots").mkdir()
    (site / "screenshots" / "overview.png").write_bytes(b"\x89PNG")
    (site / "data" / "mine.txt").write_text("kept")
    code, out, err = view(capsys, a, "--out", site)  # one card now: its second set's file is stale
    assert code == 0, err
    assert (site / "notes.txt").read_text() == "my notes"
    assert (site / "screenshots" / "overview.png").read_bytes() == b"\x89PNG"
    assert (site / "data" / "mine.txt").read_text() == "kept"
    assert not (site / "data" / "s1e0.js").exists()  # the site's own file it no longer writes
    assert [s["label"] for s in data_of(site)["sources"]] == ["a"]
    assert not [p for p in site.iterdir() if p.name.startswith(".negtrain-view-")]  # no staging folder left


def test_a_folder_view_did_not_make_is_refused_and_left_as_it_was(cards, tmp_path, capsys):
    a, _ = cards
    folder = tmp_path / "photos"
    folder.mkdir()
    (folder / "index.html").write_text("my page")
    line = one_error(view(capsys, a, "--out", folder)[2])
    assert "is not a site `negtrain view` wrote" in line
    assert [p.name for p in folder.iterdir()] == ["index.html"] and (folder / "index.html").read_text() == "my page"
    # A user's file where the site would write one of its own (not in its manifest) is refused too.
    site = tmp_path / "site"
    assert view(capsys, a, "--out", site)[0] == 0
    (site / "data" / "s0e0.js").unlink()
    manifest = json.loads((site / "negtrain-view.json").read_text())
    manifest["files"].remove("data/s0e0.js")
    (site / "negtrain-view.json").write_text(json.dumps(manifest))
    (site / "data" / "s0e0.js").write_text("the user's")
    assert "data/s0e0.js is there and not the site's own" in one_error(view(capsys, a, "--out", site)[2])
    assert (site / "data" / "s0e0.js").read_text() == "the user's"


def test_a_manifest_naming_files_outside_the_site_deletes_nothing(cards, tmp_path, capsys):
    a, _ = cards
    site = tmp_path / "site"
    assert view(capsys, a, "--out", site)[0] == 0
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (site / "negtrain-view.json").write_text(json.dumps({"paths": [], "files": ["../victim.txt"]}))
    assert "names files outside the site" in one_error(view(capsys, a, "--out", site)[2])
    assert victim.read_text() == "keep me"


def test_out_dot_from_an_empty_folder(cards, tmp_path, capsys, monkeypatch):
    a, _ = cards
    here = tmp_path / "empty"
    here.mkdir()
    monkeypatch.chdir(here)
    code, out, err = view(capsys, a, "--out", ".")
    assert code == 0, err
    assert (here / "index.html").is_file() and (here / "data" / "index.js").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty"]  # no stray ..old-XXXX beside it
    assert view(capsys, a, "--out", ".")[0] == 0  # and again, over its own site


def test_a_symlinked_out_updates_the_linked_site(cards, tmp_path, capsys):
    a, b = cards
    real = tmp_path / "real-site"
    assert view(capsys, a, "--out", real)[0] == 0
    link = tmp_path / "site"
    link.symlink_to(real)
    assert view(capsys, a, b, "--out", link)[0] == 0
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert [s["label"] for s in data_of(real)["sources"]] == ["a", "b"]  # the linked site is the new one


# ---- what a card holds ---------------------------------------------------------------------------

def test_nan_and_infinity_in_a_cards_interval_are_null(cards, tmp_path, capsys):
    a, _ = cards
    card = tmp_path / "card"
    (card / "predictions").mkdir(parents=True)
    for p in (a / "predictions").iterdir():
        (card / "predictions" / p.name).write_bytes(p.read_bytes())
    record = json.loads((a / "metrics.jsonl").read_text())
    record["uncertainty"]["accuracy"]["ci95"] = [float("nan"), float("inf")]
    (card / "metrics.jsonl").write_text(json.dumps(record) + "\n")  # NaN and Infinity, as Python writes them
    code, out, err = view(capsys, card, "--out", tmp_path / "site")
    assert code == 0, err
    shown = data_of(tmp_path / "site")["sources"][0]["sets"][0]
    assert shown["uncertainty"]["accuracy"]["ci95"] == [None, None]
    assert shown["metrics"]["accuracy"] == pytest.approx(199 / 200)


def test_a_nan_point_in_a_runs_curve_is_null(tmp_path, capsys):
    run = write_card(tmp_path / "run", monli_lines(1), benchmark="monli", epochs=(0, 1))
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    lines[1]["metrics"]["accuracy"] = float("nan")
    (run / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    code, out, err = view(capsys, run, "--out", tmp_path / "site")
    assert code == 0, err
    assert data_of(tmp_path / "site")["sources"][0]["curves"]["monli/test"]["accuracy"] == [[0, pytest.approx(199 / 200)], [1, None]]


def _shown_by_the_viewer(calls: list[str], site: Path) -> list[str]:
    """What viewer.js's own formatting functions (fmt, signed, withCi: copied out of the site's
    viewer.js, not rewritten here) print for each JavaScript expression in ``calls``, evaluated by
    Node.js with the site's index data as ``INDEX``. Skips without Node.js, as the browser tests
    skip without Chromium."""
    import re
    import shutil
    import subprocess

    node = shutil.which("node") or shutil.which("nodejs")
    if node is None:
        pytest.skip("no Node.js on PATH (Debian: apt-get install nodejs); the viewer's formatting test needs it")
    source = (site / "viewer.js").read_text(encoding="utf-8")
    block = re.search(r"^  const UNDEFINED = .*?^  }\n", source, re.S | re.M)
    assert block and "function withCi" in block.group(0), "viewer.js: the formatting functions moved"
    script = (block.group(0) + f"const INDEX = {json.dumps(data_of(site))};\n"
              + f"console.log(JSON.stringify([{', '.join(calls)}]));\n")
    done = subprocess.run([node, "-e", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_nan_metric_shows_as_undefined_and_an_absent_one_as_a_dash(tmp_path, capsys):
    """A computed metric that is NaN or infinite reaches the page as null and shows as the word
    undefined; "-" is left for a metric that is absent."""
    run = write_card(tmp_path / "run", monli_lines(1), benchmark="monli", epochs=(0, 1))
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    lines[1]["metrics"]["accuracy"] = float("nan")
    (run / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    site = tmp_path / "site"
    code, out, err = view(capsys, run, "--out", site)
    assert code == 0, err
    curve = "INDEX.sources[0].curves['monli/test'].accuracy"
    shown = _shown_by_the_viewer([
        f"fmt({curve}[0][1])", f"fmt({curve}[1][1])",  # epoch 0: 199/200; epoch 1: NaN, written as null
        f"withCi({curve}[1][1], null, false)", f"signed({curve}[1][1])",
        "fmt(undefined)", "withCi(undefined, null, false)", "signed(undefined)",  # absent
        "fmt(Infinity)", "fmt(NaN)", "signed(-0.25)", "withCi(0.995, {ci95: [0.99, 1]}, false)", "withCi(12, null, true)",
    ], site)
    assert shown == ["0.9950", "undefined", "undefined", "undefined", "-", "-", "-",
                     "undefined", "undefined", "-0.2500", "0.9950 [0.9900, 1.0000]", "12"]


def test_a_line_that_is_not_utf8_is_named_with_its_file_and_line(cards, tmp_path, capsys):
    a, _ = cards
    card = tmp_path / "card"
    (card / "predictions").mkdir(parents=True)
    for p in (a / "predictions").iterdir():
        (card / "predictions" / p.name).write_bytes(p.read_bytes())
    (card / "metrics.jsonl").write_bytes(b"\n" + (a / "metrics.jsonl").read_bytes().rstrip(b"\n") + b"\xff\xfe\n")
    line = one_error(view(capsys, card, "--out", tmp_path / "site")[2])
    assert f"{card / 'metrics.jsonl'}:2: not UTF-8" in line
    assert not (tmp_path / "site").exists()


def test_a_benchmark_that_is_no_name_builds_no_path(cards, tmp_path, capsys):
    a, _ = cards
    card = tmp_path / "deep" / "card"
    card.mkdir(parents=True)
    record = json.loads((a / "metrics.jsonl").read_text())
    record["benchmark"] = "../../x"
    (card / "metrics.jsonl").write_text(json.dumps(record) + "\n")
    (tmp_path / "x-test-validate.jsonl").write_text("")  # where ../../x would lead
    line = one_error(view(capsys, card, "--out", tmp_path / "site")[2])
    assert f"{card / 'metrics.jsonl'}:1: benchmark '../../x' is not a name" in line


# ---- serving -------------------------------------------------------------------------------------

@pytest.fixture()
def served(cards, tmp_path, capsys):
    """The site of card A served on a free port in this process: (site, port)."""
    from negtrain.view.site import site_server

    site = tmp_path / "site"
    assert view(capsys, cards[0], "--out", site)[0] == 0
    server = site_server(site, 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield site, server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def get(port: int, path: str, host: str | None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.putrequest("GET", path, skip_host=True)
        if host is not None:
            conn.putheader("Host", host)
        conn.endheaders()
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def test_serve_answers_only_its_own_host(served):
    site, port = served
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}"):
        status, body = get(port, "/index.html", host)
        assert status == 200 and b"script-src 'self'" in body
    # A name rebound to 127.0.0.1 by another site's page, another port, or no Host at all.
    for host in (f"attacker.example:{port}", "127.0.0.1:1", "localhost", None):
        assert get(port, "/data/index.js", host)[0] == 403


def test_serve_follows_no_symlink_out_of_the_site(served, tmp_path):
    site, port = served
    secret = tmp_path / "outside" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("not for the page")
    (site / "root").symlink_to(secret.parent)
    (site / "leak.txt").symlink_to(secret)
    host = f"127.0.0.1:{port}"
    for path in ("/root/secret.txt", "/leak.txt", "/root/", "/../outside/secret.txt", "/%2e%2e/outside/secret.txt"):
        status, body = get(port, path, host)
        assert status == 404 and b"not for the page" not in body, path
    # A symlink inside the site to the site's own file is served.
    (site / "same.js").symlink_to(site / "data" / "index.js")
    assert get(port, "/same.js", host)[0] == 200
