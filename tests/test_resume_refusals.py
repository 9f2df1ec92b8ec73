"""`fit --resume` refuses a folder that is no resumable run before it changes anything.

Resuming a folder without a checkpoint trains from the start and rewinds its records, so a folder
with records and no checkpoint is refused: a report card's folder (a user handing the card's folder
instead of the run's) or a finished run whose checkpoints were deleted to save disk. Its records stay.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from negtrain.cli import main


def _snapshot(folder: Path) -> dict[Path, bytes | None]:
    return {p: p.read_bytes() if p.is_file() else None for p in folder.rglob("*")}


def _refused(folder: Path, capsys, monkeypatch) -> str:
    import negtrain.training.run as run_module

    monkeypatch.setattr(run_module, "_build", lambda *a, **k: pytest.fail("the model was built before the folder was refused"))
    before = _snapshot(folder)
    assert main(["fit", "--resume", str(folder)]) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: --resume {folder}: "), captured.err
    assert _snapshot(folder) == before  # metrics.jsonl above all
    return lines[0]


def test_a_report_cards_folder_is_refused_and_its_records_kept(fake_run, tmp_path, capsys, monkeypatch):
    card = tmp_path / "card"
    shutil.copytree(fake_run, card)
    for name in ("model", "checkpoints"):
        shutil.rmtree(card / name)
    (card / "command.txt").unlink()
    (card / "card.md").write_text("# Report card\n")
    line = _refused(card, capsys, monkeypatch)
    assert "a report card's folder (card.md)" in line
    assert "a run folder is the --output-dir `fit` wrote: recipe.yaml, model/ and checkpoints/*.ckpt" in line


def test_an_evaluations_folder_is_refused(fake_run, tmp_path, capsys, monkeypatch):
    folder = tmp_path / "validated"
    shutil.copytree(fake_run, folder)
    for name in ("model", "checkpoints"):
        shutil.rmtree(folder / name)
    assert "an evaluation's folder (no model/)" in _refused(folder, capsys, monkeypatch)


@pytest.mark.parametrize("how", ["folder removed", "files removed", "only a temporary file left"])
def test_a_finished_run_without_its_checkpoints_is_refused_with_the_way_to_start_over(fake_run, tmp_path, capsys, monkeypatch, how):
    run = tmp_path / "run"
    shutil.copytree(fake_run, run)
    if how == "folder removed":
        shutil.rmtree(run / "checkpoints")
    else:
        for ckpt in (run / "checkpoints").glob("*.ckpt"):
            ckpt.unlink()
        if how == "only a temporary file left":
            (run / "checkpoints" / ".last.ckpt.part").write_bytes(b"half")
    line = _refused(run, capsys, monkeypatch)
    assert "has records (metrics.jsonl) but no checkpoint" in line
    assert f"to start over, train into a new folder: python -m negtrain fit --recipe {run / 'recipe.yaml'} --output-dir NEW_DIR" in line


def test_a_folder_without_a_recipe_says_what_a_run_folder_is(tmp_path, capsys, monkeypatch):
    folder = tmp_path / "predictions-only"
    folder.mkdir()
    (folder / "metrics.jsonl").write_text('{"epoch": 0, "benchmark": "monli", "split": "test", "metrics": {}}\n')
    line = _refused(folder, capsys, monkeypatch)
    assert "not a negtrain run directory (no recipe.yaml); a run folder is the --output-dir `fit` wrote" in line
