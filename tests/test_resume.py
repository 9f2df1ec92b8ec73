"""Crash and resume: a real `fit` killed with SIGKILL, resumed, ends exactly as an uninterrupted run.

The run is small but real: a 2-layer BERT (random wide init, the packaged MiniLM tokenizer) on
MoNLI + ScoNe train mixed by weight (so the mixing sampler is in play), evaluated on MoNLI and
ScoNe test every epoch, CPU, fp32, deterministic, one thread. Two processes are killed:

- ``mid-epoch``: during training of epoch 1 (epoch 0 is complete and checkpointed);
- ``mid-save``: halfway through writing the epoch-1 checkpoint, when epoch 1's lines are already
  in metrics.jsonl: resume must take epoch 0's checkpoint, drop epoch 1's lines and redo it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from negtrain.cli import main

TESTS = Path(__file__).resolve().parent
TIMING = {"eval_seconds", "train_seconds", "train_examples_per_second"}
EPOCHS = 3


def recipe_text(model: Path, *, seed: int = 7, epoch: int = 256, batch_size: int = 16, trainer: str = "", what: str = "crash-and-resume test") -> str:
    """The crash tests' recipe; ``trainer``: extra trainer keys in flow style (e.g. for DDP)."""
    return f"""\
description: {what}
seed: {seed}
model: {{name: {model}, max_length: 64, learning_rate: 1.0e-3, warmup_ratio: 0.1}}
data:
  train: [{{benchmark: monli, split: train}}, {{benchmark: scone, split: train, weight: 0.5}}]
  mix: {{epoch: {epoch}}}
  eval: [{{benchmark: monli, split: test}}, {{benchmark: scone, split: test}}]
  batch_size: {batch_size}
  eval_batch_size: 256
trainer: {{max_epochs: {EPOCHS}, {trainer}precision: 32-true, deterministic: true, torch_threads: 1, enable_progress_bar: false}}
selection: {{metric: scone/test/accuracy}}
"""


def records(run: Path) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if k not in TIMING} for line in (run / "metrics.jsonl").read_text().splitlines()]


def predictions(run: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted((run / "predictions").iterdir())}


def subprocess_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS.parent), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def start_and_kill(recipe: Path, run: Path, point: str, marker: Path) -> subprocess.Popen:
    """Start `fit` in a subprocess that stops at ``point``; returns it (kill it with :func:`kill`)."""
    return subprocess.Popen(
        [sys.executable, str(TESTS / "crash_fit.py"), str(marker), point, "fit", "--recipe", str(recipe), "--output-dir", str(run)],
        env=subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )


def kill_at_marker(proc: subprocess.Popen, marker: Path, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not marker.exists():
        if proc.poll() is not None:
            pytest.fail(f"the run ended (code {proc.returncode}) before reaching its kill point:\n{proc.stdout.read()}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("the run did not reach its kill point in time")
        time.sleep(0.1)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    proc.stdout.close()


@pytest.fixture(scope="module")
def runs(tmp_path_factory, data_dir):
    sys.path.insert(0, str(TESTS))
    from crash_fit import tiny_model

    base = tmp_path_factory.mktemp("resume")
    model = tiny_model(base / "tiny")
    recipe = base / "recipe.yaml"
    recipe.write_text(recipe_text(model))
    # Tokenize once, so the subprocesses find the cache (and all three runs read the same inputs).
    from negtrain.recipes import load_recipe
    from negtrain.training.build import build

    build(load_recipe(str(recipe)).recipe)

    killed = {"mid-epoch": "train:1:5", "mid-save": "save:1"}
    procs = {name: start_and_kill(recipe, base / name, point, base / f"{name}.marker") for name, point in killed.items()}
    reference = base / "reference"
    assert main(["fit", "--recipe", str(recipe), "--output-dir", str(reference)]) == 0
    for name, proc in procs.items():
        kill_at_marker(proc, base / f"{name}.marker")
    return base, reference


def test_killed_runs_left_complete_files_only(runs):
    base, _ = runs
    mid_epoch = records(base / "mid-epoch")
    assert {r["epoch"] for r in mid_epoch} == {0}  # epoch 1 was cut short: no line of it
    mid_save = records(base / "mid-save")
    assert {r["epoch"] for r in mid_save} == {0, 1}  # epoch 1's lines were written before its checkpoint
    # The half-written checkpoint is only a temporary file; last.ckpt is still epoch 0's, whole.
    parts = list((base / "mid-save" / "checkpoints").glob(".*.part"))
    assert parts, "the kill should have left the half-written temporary checkpoint"
    last = torch.load(base / "mid-save" / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    assert last["epoch"] == 0


@pytest.mark.parametrize("name", ["mid-epoch", "mid-save"])
def test_resume_finishes_with_the_uninterrupted_numbers(runs, name, capsys):
    base, reference = runs
    run = base / name
    # Resumed in this process (a fresh Trainer reading only the run directory) to keep the test
    # short; the killed runs were separate processes.
    assert main(["fit", "--resume", str(run)]) == 0
    assert "from last.ckpt: end of epoch 0, step 16; continuing with epoch 1 of 3" in capsys.readouterr().out
    assert records(run) == records(reference)
    assert [r["epoch"] for r in records(run)] == [e for e in range(EPOCHS) for _ in range(3)]
    assert predictions(run) == predictions(reference)
    assert {p.name for p in (run / "checkpoints").iterdir()} == {p.name for p in (reference / "checkpoints").iterdir()}
    assert not list(run.rglob("*.part"))
    a = torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    b = torch.load(reference / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    assert a["global_step"] == b["global_step"] and a["epoch"] == b["epoch"] == EPOCHS - 1
    for key, value in b["state_dict"].items():
        assert torch.equal(a["state_dict"][key], value), key


def test_resuming_a_complete_run_does_nothing(runs, capsys):
    _, reference = runs
    before = {p: p.stat().st_mtime_ns for p in reference.rglob("*") if p.is_file()}
    assert main(["fit", "--resume", str(reference)]) == 0
    assert "already complete" in capsys.readouterr().out
    assert {p: p.stat().st_mtime_ns for p in reference.rglob("*") if p.is_file()} == before


def test_every_checkpoint_follows_its_epochs_records(runs):
    """A checkpoint never precedes its epoch's records: it holds every line of its epochs."""
    _, reference = runs
    for path in (reference / "checkpoints").glob("*.ckpt"):
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
        lines = [json.loads(x) for x in ckpt["negtrain_resume"]["metrics_lines"]]
        assert sorted({r["epoch"] for r in lines}) == list(range(ckpt["epoch"] + 1))
        assert sum(r["benchmark"] == "train" and r["epoch"] == ckpt["epoch"] for r in lines) == 1
        assert sum(r["benchmark"] != "train" and r["epoch"] == ckpt["epoch"] for r in lines) == 2


def test_resume_refuses_an_edited_seed_and_touches_nothing(runs, tmp_path):
    import shutil

    from negtrain.errors import NegtrainError
    from negtrain.training.run import resume

    _, reference = runs
    run = tmp_path / "run"
    shutil.copytree(reference, run)
    recipe = run / "recipe.yaml"
    assert "\nseed: 7\n" in recipe.read_text()
    recipe.write_text(recipe.read_text().replace("\nseed: 7\n", "\nseed: 8\n"))
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    with pytest.raises(NegtrainError, match=r"recipe.yaml has seed 8, but .*\.ckpt was trained with seed 7; put seed: 7 back"):
        resume(run)
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before
