"""A GGUF file's conversion is checked against the file, and its folder in the cache is checked
before each use (issue 55), on small GGUF files written here (tests/gguf_files.py):

- a header that names an architecture whose tensors are not in the file (``mamba`` over Llama
  tensors) is refused in one line naming the architecture and how many tensors are missing,
  instead of a model of random weights;
- a converted folder changed since (its weights rewritten), one without ``gguf_source.json`` and
  a file in its place are each left as they are and the file converted again into a fresh folder,
  said in one line; a checked folder is used with no word;
- a partial conversion left by a killed process is removed by the next conversion, and only that
  (a hidden folder without negtrain's marker, or whose writer lives, is kept);
- ``gguf-export`` of a file that does not exist says so, and where it looked.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gguf_files import write_llama_gguf
from negtrain.cli import main

pytest.importorskip("gguf")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("gguf")
    return {"llama": write_llama_gguf(root / "tiny.gguf"), "mamba": write_llama_gguf(root / "not-mamba.gguf", "mamba")}


@pytest.fixture()
def cache(tmp_path, monkeypatch, one_thread):
    monkeypatch.setenv("NEGTRAIN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("NEGTRAIN_OFFLINE", "1")
    return tmp_path / "cache"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _said(capsys) -> list[str]:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    # transformers' own progress bars and warnings aside: negtrain's lines
    return [line for line in err.splitlines() if line.strip() and "warn" not in line.lower() and "it/s]" not in line]


def test_a_header_naming_another_architecture_is_refused_not_filled_at_random(files, cache, tmp_path, capsys):
    from negtrain.core.errors import ConfigError
    from negtrain.models.gguf import loadable_folder

    with pytest.raises(ConfigError) as caught:
        loadable_folder(files["mamba"])
    message = str(caught.value)
    assert "architecture 'mamba' (MambaForCausalLM)" in message and "18 of that model's 23 tensors are not in the file" in message
    assert "\n" not in message
    folders = cache / "gguf"
    assert not folders.exists() or not any(folders.iterdir())  # nothing converted, nothing partial left
    capsys.readouterr()
    assert main(["gguf-export", str(files["mamba"]), str(tmp_path / "out")]) == 2
    assert "18 of that model's 23 tensors are not in the file" in _said(capsys)[-1] and not (tmp_path / "out").exists()


def test_a_converted_folder_changed_since_is_left_and_the_file_converted_again(files, cache, capsys):
    from safetensors.torch import load_file, save_file

    from negtrain.models.gguf import cached_folder, loadable_folder, source_record

    first = Path(loadable_folder(files["llama"]))
    weights = first / "model.safetensors"
    original = _sha(weights)
    assert source_record(first)["converted"]["model.safetensors"] == original
    capsys.readouterr()
    assert loadable_folder(files["llama"]) == str(first) and _said(capsys) == []  # checked, used, nothing said

    tensors = load_file(weights)
    name = sorted(tensors)[0]
    tensors[name] = tensors[name] + 1.0
    save_file(tensors, weights, metadata={"format": "pt"})
    tampered = _sha(weights)
    again = Path(loadable_folder(files["llama"]))
    lines = _said(capsys)
    assert again == first.with_name(first.name + "-2") and cached_folder(files["llama"]) == again
    assert len([line for line in lines if "changed since it was converted" in line]) == 1
    assert f"{first} changed since it was converted (model.safetensors differs" in lines[0] and "left as it is" in lines[0]
    assert _sha(again / "model.safetensors") == original  # the file's weights again
    assert _sha(weights) == tampered and (first / "gguf_source.json").is_file()  # the changed folder untouched

    (again / "adapter_config.json").write_text("{}")  # a file added changes what a loader reads
    assert Path(loadable_folder(files["llama"])) == first.with_name(first.name + "-3")
    assert "changed since it was converted (added: adapter_config.json)" in _said(capsys)[-1]


@pytest.mark.parametrize("occupant", ["folder without a record", "file"])
def test_what_lies_where_a_conversion_goes_is_kept_and_the_file_converted_beside_it(files, cache, capsys, occupant):
    from negtrain.models.gguf import cached_folder, loadable_folder

    place = cached_folder(files["llama"])
    place.parent.mkdir(parents=True)
    if occupant == "file":
        place.write_text("mine")
    else:
        place.mkdir()
        (place / "notes.txt").write_text("mine")
    capsys.readouterr()
    folder = Path(loadable_folder(files["llama"]))
    lines = _said(capsys)
    assert folder == place.with_name(place.name + "-2") and (folder / "model.safetensors").is_file()
    said = "is not a folder" if occupant == "file" else "has no readable gguf_source.json (not a conversion negtrain finished)"
    assert len(lines) == 1 and f"{place} {said}" in lines[0] and "left as it is" in lines[0]
    assert (place.read_text() if occupant == "file" else (place / "notes.txt").read_text()) == "mine"


def test_a_partial_conversion_of_a_killed_process_is_removed_by_the_next(files, cache, capsys):
    from negtrain.models.gguf import cached_folder, loadable_folder
    from negtrain.models.gguf_cache import mark_partial

    place = cached_folder(files["llama"])
    place.parent.mkdir(parents=True)
    killed, foreign, live = (place.parent / f".{place.name}.killed", place.parent / ".my-hidden-folder",
                             place.parent / f".{place.name}.live")
    for folder in (killed, foreign, live):
        folder.mkdir()
        (folder / "model.safetensors").write_bytes(b"\0" * 4096)
    mark_partial(live)  # this process: alive
    # A conversion killed by SIGKILL: its marker written by a process that is gone.
    script = ("import os, signal, sys; from pathlib import Path; from negtrain.models.gguf_cache import mark_partial; "
              "mark_partial(Path(sys.argv[1])); os.kill(os.getpid(), signal.SIGKILL)")
    done = subprocess.run([sys.executable, "-c", script, str(killed)], env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert done.returncode == -9 and json.loads((killed / ".negtrain-converting.json").read_text())["pid"] > 0
    capsys.readouterr()
    loadable_folder(files["llama"])
    lines = _said(capsys)
    assert not killed.exists() and foreign.is_dir() and live.is_dir()
    assert any(f"removed 1 partial conversion(s) left by runs that were killed ({killed.name})" in line for line in lines)


def test_gguf_export_of_a_missing_file_says_it_does_not_exist_and_where_it_looked(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["gguf-export", "missing.gguf", str(tmp_path / "out")]) == 2
    line = _said(capsys)[-1]
    assert line == f"error: missing.gguf: no such file (looked for {tmp_path / 'missing.gguf'})"
    assert not (tmp_path / "out").exists()
