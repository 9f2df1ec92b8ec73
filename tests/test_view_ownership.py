"""`negtrain view` deletes only files it can prove it wrote (issue 55): its manifest records the
SHA-256 of every file as written, and a rerun removes a file no longer written only when it still
holds exactly that; a file the manifest lists that it did not record, or that changed since, is
kept and named. Nothing is written or removed through a folder symlinked out of the site."""

from __future__ import annotations

import json
import os
from pathlib import Path

from test_view_faults import cards, one_error, view  # noqa: F401  (cards: the module's fixture)


def _edit_manifest(site: Path, change) -> None:
    path = site / "negtrain-view.json"
    manifest = json.loads(path.read_text())
    change(manifest)
    path.write_text(json.dumps(manifest))


def test_a_manifest_edited_to_list_the_users_files_deletes_none_of_them(cards, tmp_path, capsys):  # noqa: F811
    a, b = cards
    site = tmp_path / "site"
    assert view(capsys, a, b, "--out", site)[0] == 0
    users = {"notes.txt": "my notes", "thesis/main.tex": "\\chapter{One}", "data/my_table.csv": "a,b\n1,2\n"}
    for rel, text in users.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)
    _edit_manifest(site, lambda m: m["files"].extend(users))
    code, out, err = view(capsys, a, b, "--out", site)
    assert code == 0, err
    assert {rel: (site / rel).read_text() for rel in users} == users
    assert "kept 3 file(s)" in out and all(rel in out for rel in users)


def test_a_manifest_with_forged_hashes_of_the_users_files_deletes_none_of_them(cards, tmp_path, capsys):  # noqa: F811
    import hashlib

    a, _ = cards
    site = tmp_path / "site"
    assert view(capsys, a, "--out", site)[0] == 0
    (site / "notes.txt").write_text("my notes")
    (site / "data" / "my_table.csv").write_text("a,b\n")

    def forge(m):
        for rel in ("notes.txt", "data/my_table.csv"):
            m["files"].append(rel)
            m["sha256"][rel] = hashlib.sha256((site / rel).read_bytes()).hexdigest()

    _edit_manifest(site, forge)
    assert view(capsys, a, "--out", site)[0] == 0
    assert (site / "notes.txt").read_text() == "my notes" and (site / "data" / "my_table.csv").read_text() == "a,b\n"


def test_a_stale_site_file_changed_since_it_was_written_is_kept(cards, tmp_path, capsys):  # noqa: F811
    a, b = cards
    site = tmp_path / "site"
    assert view(capsys, a, b, "--out", site)[0] == 0
    (site / "data" / "s0e0.js").write_text("my annotated copy")  # still written on the rerun: refused
    assert "data/s0e0.js is there and not the site's own (changed since it was written" in one_error(view(capsys, a, "--out", site)[2])
    assert (site / "data" / "s0e0.js").read_text() == "my annotated copy"
    (site / "data" / "s0e0.js").unlink()
    (site / "data" / "s1e0.js").write_text("my annotated copy")  # no longer written on the rerun: kept
    code, out, err = view(capsys, a, "--out", site)
    assert code == 0, err
    assert (site / "data" / "s1e0.js").read_text() == "my annotated copy"
    assert "kept 1 file(s)" in out and "data/s1e0.js" in out
    # An unchanged stale file is the site's own: removed.
    (site / "data" / "s1e0.js").unlink()
    assert view(capsys, a, b, "--out", site)[0] == 0
    assert view(capsys, a, "--out", site)[0] == 0
    assert not (site / "data" / "s1e0.js").exists()


def test_a_data_folder_symlinked_out_of_the_site_is_refused_and_untouched(cards, tmp_path, capsys):  # noqa: F811
    a, b = cards
    site = tmp_path / "site"
    assert view(capsys, a, b, "--out", site)[0] == 0
    elsewhere = tmp_path / "elsewhere"
    os.rename(site / "data", elsewhere)
    (elsewhere / "my_table.csv").write_text("a,b\n")
    (site / "data").symlink_to(elsewhere)
    before = {p.name: p.read_bytes() for p in elsewhere.iterdir()}
    line = one_error(view(capsys, a, "--out", site)[2])
    assert f"data is a symlink to {elsewhere}, out of the site" in line
    assert {p.name: p.read_bytes() for p in elsewhere.iterdir()} == before


def test_a_site_of_the_earlier_manifest_is_rewritten_and_its_stale_files_kept(cards, tmp_path, capsys):  # noqa: F811
    """A manifest without hashes (as sites were written before) proves nothing: its site files are
    replaced, but none is removed; the next manifest records hashes."""
    a, b = cards
    site = tmp_path / "site"
    assert view(capsys, a, b, "--out", site)[0] == 0
    _edit_manifest(site, lambda m: m.pop("sha256"))
    code, out, err = view(capsys, a, "--out", site)
    assert code == 0, err
    assert (site / "data" / "s1e0.js").is_file() and "data/s1e0.js" in out
    manifest = json.loads((site / "negtrain-view.json").read_text())
    assert set(manifest["sha256"]) == set(manifest["files"]) and "data/s1e0.js" not in manifest["files"]
