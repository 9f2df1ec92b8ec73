"""Provenance (negtrain.models.provenance): a fit and a report card record the SHA-256 of the data
files they read (checked against hashlib over the mirror's own files), the model's content hash,
versions and machine; one changed byte in a data file changes its hash and makes `compare` warn;
`env --constraints` gives back a run's versions; digests are cached by size and mtime."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import shutil

import pytest

from negtrain.cli import main
from negtrain.io.digests import file_sha256, folder_sha256
from negtrain.models import provenance
from tiny_models import save_tiny_bert_nli, write_recipe

MONLI_TEST = "atticusg/MoNLI/nmonli_test.jsonl"


def _sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def tiny_nli(tmp_path_factory):
    return save_tiny_bert_nli(tmp_path_factory.mktemp("nli") / "bert")


@pytest.fixture
def copied_data(data_dir, tmp_path, monkeypatch):
    """A data directory holding a copy of the mirror's MoNLI test file (which a test may change)."""
    root = tmp_path / "data"
    (root / MONLI_TEST).parent.mkdir(parents=True)
    shutil.copyfile(data_dir / MONLI_TEST, root / MONLI_TEST)
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(root))
    return root


def _files(record) -> dict[str, str]:
    return {f["file"]: f["sha256"] for entry in record["data"] for f in entry["files"]}


def _recipe(model) -> dict:
    return {
        "description": "provenance test",
        "seed": 7,
        "model": {"name": str(model), "family": "nli", "max_length": 48, "head_labels": ["entailment", "not_entailment"]},
        "data": {"train": [{"benchmark": "monli", "split": "train"}], "eval": [{"benchmark": "monli", "split": "test"}],
                 "batch_size": 16, "eval_batch_size": 64},
        "trainer": {"max_epochs": 1, "limit_train_batches": 2, "limit_val_batches": 1, "enable_progress_bar": False,
                    "accelerator": "cpu", "torch_threads": 1, "precision": "32-true"},
        "logger": "none",
        "selection": {"metric": "monli/test/accuracy", "allow_test_split": True},  # its only eval set is a test split
    }


def test_fit_records_data_hashes_model_hash_versions_and_constraints(tiny_nli, data_dir, tmp_path, one_thread, capsys):
    run = tmp_path / "run"
    assert main(["fit", "--recipe", str(write_recipe(tmp_path / "r.yaml", _recipe(tiny_nli))), "--output-dir", str(run)]) == 0
    record = json.loads((run / "provenance.json").read_text())
    assert (run / "recipe.yaml").is_file()
    # The data files' hashes are those of the mirror's bytes, per benchmark split and role.
    by_role = {(e["role"], e["benchmark"], e["split"]): [f["file"] for f in e["files"]] for e in record["data"]}
    assert by_role == {("train", "monli", "train"): ["atticusg/MoNLI/nmonli_train.jsonl"], ("eval", "monli", "test"): [MONLI_TEST]}
    for name, digest in _files(record).items():
        assert digest == _sha256(data_dir / name), name
        assert [f["bytes"] for e in record["data"] for f in e["files"] if f["file"] == name][0] == (data_dir / name).stat().st_size
    # The model: a local folder, by the content of its files (path-independent).
    h = hashlib.sha256()
    for path in sorted(p for p in tiny_nli.rglob("*") if p.is_file()):
        h.update(f"{path.relative_to(tiny_nli).as_posix()}\0{_sha256(path)}\n".encode())
    assert record["model"] == {"name": str(tiny_nli), "source": "local", "content_sha256": h.hexdigest()}
    assert record["seed"] == 7 and record["precision"] == "32-true"
    import torch
    import transformers

    assert record["torch"]["version"] == torch.__version__ and record["torch"]["cuda"] == torch.version.cuda
    assert record["packages"]["transformers"] == transformers.__version__
    assert record["packages"]["lightning"] == importlib.metadata.version("lightning")
    assert record["negtrain"]["version"] and record["python"]
    assert record["machine"]["cpu_cores"] == os.cpu_count() and record["machine"]["gpu_count"] == torch.cuda.device_count()
    # What collecting took is recorded, not bounded: a wall-clock limit fails on a busy machine. That a
    # warm start reads cached digests instead of the files is test_digests_cached_by_size_and_mtime's.
    assert isinstance(record["collect_seconds"], float) and record["collect_seconds"] >= 0

    # env --constraints: the run's package versions, one NAME==VERSION per line.
    out = tmp_path / "constraints.txt"
    assert main(["env", "--constraints", str(run), "--out", str(out)]) == 0
    pins = [line for line in out.read_text().splitlines() if line and not line.startswith("#")]
    assert dict(line.split("==") for line in pins) == record["packages"]
    assert all(line.count("==") == 1 and " " not in line for line in pins)
    for name, version in record["packages"].items():
        assert importlib.metadata.version(name) == version
    capsys.readouterr()
    assert main(["env", "--constraints", str(run)]) == 0
    assert capsys.readouterr().out == out.read_text()

    # An export carries it beside the weights and in its model card.
    exported = tmp_path / "export"
    assert main(["export", "--run", str(run), "--out", str(exported)]) == 0
    assert json.loads((exported / "provenance.json").read_text()) == record
    card = (exported / "README.md").read_text()
    assert "## Provenance" in card and _sha256(data_dir / MONLI_TEST) in card and record["model"]["content_sha256"] in card

    # report --run A --run B warns when B read other bytes or ran another major version.
    other = tmp_path / "other"
    shutil.copytree(run, other, ignore=shutil.ignore_patterns("checkpoints", ".negtrain.lock"))
    changed = json.loads((other / "provenance.json").read_text())
    changed["data"][1]["files"][0]["sha256"] = "0" * 64
    bumped = f"{int(record['packages']['transformers'].split('.')[0]) + 1}.0.0"
    changed["packages"]["transformers"] = bumped
    (other / "provenance.json").write_text(json.dumps(changed))
    capsys.readouterr()
    assert main(["report", "--run", str(run), "--run", str(other)]) == 0
    said = capsys.readouterr().out
    summary = (run / "report-vs-other" / "summary.md").read_text()
    for warning in (f"data file {MONLI_TEST} differs", f"transformers major version differs: {record['packages']['transformers']} in A, {bumped} in B"):
        assert warning in said and warning in summary


def _card(model, out):
    args = ["evaluate", "--model", str(model), "--family", "nli", "--benchmarks", "monli", "--out", str(out),
            "--trainer.limit_val_batches=1", "--data.eval_batch_size=32", "--trainer.torch_threads=1", "--trainer.precision=32-true"]
    assert main(args) == 0
    return json.loads((out / "provenance.json").read_text())


def test_card_records_hashes_and_one_changed_byte_makes_compare_warn(tiny_nli, data_dir, copied_data, tmp_path, one_thread, capsys):
    first = _card(tiny_nli, tmp_path / "a")
    assert _files(first) == {MONLI_TEST: _sha256(data_dir / MONLI_TEST)}
    card = (tmp_path / "a" / "card.md").read_text()
    # The data files' hashes are in provenance.json; card.md counts them and says where they are.
    assert "## Provenance" in card and "- data: 1 file, the bytes and sha256 of each in `provenance.json`" in card
    assert _sha256(data_dir / MONLI_TEST) not in card

    # One byte of the copy changed (a letter inside a sentence; same size, the file still valid).
    path = copied_data / MONLI_TEST
    data = bytearray(path.read_bytes())
    at = data.index(b'"sentence1": "') + len(b'"sentence1": "')
    data[at] = ord("Q") if data[at] != ord("Q") else ord("R")
    path.write_bytes(bytes(data))
    second = _card(tiny_nli, tmp_path / "b")
    assert _files(second) == {MONLI_TEST: _sha256(path)} != _files(first)

    capsys.readouterr()
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--bootstrap", "0", "--allow-missing"]) == 0
    captured = capsys.readouterr()
    warning = f"data file {MONLI_TEST} differs"
    assert warning in captured.err and warning in captured.out
    # The same card against itself: nothing to warn about.
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "a"), "--bootstrap", "0", "--allow-missing"]) == 0
    assert "warning" not in capsys.readouterr().err


def test_digests_cached_by_size_and_mtime(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    f = tmp_path / "data.txt"
    f.write_bytes(b"not every cat is black\n")
    real = _sha256(f)
    assert file_sha256(f, cache) == real
    # A second call reads the cached digest, not the file: plant a different one to see it used.
    (entry,) = (cache / "digests").iterdir()
    entry.write_text("f" * 64 + "\n")
    assert file_sha256(f, cache) == "f" * 64
    monkeypatch.setenv("NEGTRAIN_REHASH", "1")
    assert file_sha256(f, cache) == real
    monkeypatch.delenv("NEGTRAIN_REHASH")
    # A changed file (new size and mtime) is hashed again.
    f.write_bytes(b"no cat is black\n")
    os.utime(f, ns=(1, 1))
    assert file_sha256(f, cache) == _sha256(f)
    # A folder's digest depends on its files' names and bytes, not on where it lies.
    model = tmp_path / "model"
    (model / "sub").mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (model / "sub" / "w.bin").write_bytes(b"\x00\x01")
    (model / ".git").mkdir()
    (model / ".git" / "HEAD").write_text("ref")
    moved = tmp_path / "elsewhere"
    shutil.copytree(model, moved)
    (moved / ".git" / "HEAD").write_text("other")  # version control is not content
    assert folder_sha256(model, cache) == folder_sha256(moved, cache)
    (moved / "sub" / "w.bin").write_bytes(b"\x00\x02")
    assert folder_sha256(model, cache) != folder_sha256(moved, cache)


def test_differences_name_data_files_and_major_versions():
    a = {"python": "3.11.7", "packages": {"torch": "2.13.0+cpu", "transformers": "5.24.0", "peft": "0.21.2", "wandb": "0.31.0"},
         "data": [{"files": [{"file": "x/y/a.csv", "sha256": "1" * 64}, {"file": "x/y/b.csv", "sha256": "2" * 64}]}]}
    b = {"python": "3.11.9", "packages": {"torch": "2.14.1", "transformers": "4.57.0", "peft": "0.22.0", "wandb": "0.31.1"},
         "data": [{"files": [{"file": "x/y/a.csv", "sha256": "1" * 64}, {"file": "x/y/b.csv", "sha256": "3" * 64}]}]}
    found = provenance.differences(a, b)
    assert found == [
        "data file x/y/b.csv differs: sha256 222222222222… in A, 333333333333… in B",
        "peft major version differs: 0.21.2 in A, 0.22.0 in B",  # 0.x: a minor release may break
        "transformers major version differs: 5.24.0 in A, 4.57.0 in B",
    ]
    assert provenance.differences(a, a) == []
    assert provenance.differences(a, None) == ["B records no provenance (provenance.json): data files and versions not compared"]
    assert [provenance.major(v) for v in ("2.13.0+cpu", "0.21.2", "5", "1.0.0rc1")] == ["2", "0.21", "5", "1"]


def test_env_prints_this_machine(capsys):
    assert main(["env"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert set(shown) >= {"negtrain", "python", "torch", "packages", "machine"}
    assert shown["packages"]["lightning"] == importlib.metadata.version("lightning")
    assert main(["env", "--out", "x.txt"]) == 2
