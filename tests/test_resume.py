"""Crash and resume: a real `fit` killed with SIGKILL, resumed, ends exactly as an uninterrupted run.

The run is small but real: a 2-layer BERT (random wide init, the packaged MiniLM tokenizer) on
MoNLI + ScoNe train mixed by weight (so the mixing sampler is in play), evaluated on MoNLI and
ScoNe test every epoch, CPU, fp32, deterministic, one thread. Two processes are killed:

- ``mid-epoch``: during training of epoch 1 (epoch 0 is complete and checkpointed);
- ``mid-save``: halfway through writing the epoch-1 checkpoint, when epoch 1's lines are already
  in metrics.jsonl: resume must take epoch 0's checkpoint, drop epoch 1's lines and redo it.

and three are stopped mid-epoch, to be resumed mid-epoch:

- ``sigterm``: sent SIGTERM during batch 5 of epoch 1: it writes a mid-epoch checkpoint after
  that batch and exits non-zero; the run directory is then moved before it is resumed;
- ``sigusr1``: the same with SIGUSR1 (SLURM's warning signal) in epoch 0, before any epoch-end
  checkpoint exists;
- ``every-n``: ``trainer.checkpoint_every_n_steps: 4``, killed with SIGKILL before batch 7 of
  epoch 1, so its newest checkpoint is the one after batch 4 (step 20); it is resumed from a copy,
  which must leave the original untouched;
- ``every-n-mid-save``: the same setting, killed halfway through writing its first mid-epoch
  checkpoint (step 20): ``last.ckpt`` must still be epoch 0's, whole;
- ``sigterm-in-eval``: sent SIGTERM during epoch 0's evaluation: the evaluation and the epoch-end
  checkpoint finish, and the run stops before epoch 1, non-zero.
- ``max-steps-epoch-end``: ``trainer.max_steps: 48`` (exactly the 3 epochs' steps, so the LR
  schedule is the reference's), killed with SIGKILL after epoch 0's checkpoint, before epoch 1's
  first batch. With ``max_steps`` set, Lightning 2.6 took the epoch-end checkpoint for a restart
  on the epoch's end, ran that end again without training and stopped an epoch early (the bug
  :func:`negtrain.training.resume.settle_epoch_end` fixes).
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

#: The printed resume command carries the data directory the run read (a new shell may lack it).
DATA_PREFIX = f"NEGTRAIN_DATA_DIR={os.environ['NEGTRAIN_DATA_DIR']} " if os.environ.get("NEGTRAIN_DATA_DIR") else ""

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
selection: {{metric: scone/test/accuracy, allow_test_split: true}}
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


def kill_at_marker(proc: subprocess.Popen, marker: Path, timeout: float = 300, signum: int = signal.SIGKILL) -> str:
    """Send ``signum`` once the run is at its stop point; the run's output. SIGKILL kills it; a
    stop signal must end it with exit code 128 + the signal number."""
    deadline = time.monotonic() + timeout
    while not marker.exists():
        if proc.poll() is not None:
            pytest.fail(f"the run ended (code {proc.returncode}) before reaching its kill point:\n{proc.stdout.read()}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("the run did not reach its kill point in time")
        time.sleep(0.1)
    os.kill(proc.pid, signum)
    try:
        out, _ = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"the run did not stop after signal {signum}")
    expected = -signal.SIGKILL if signum == signal.SIGKILL else 128 + signum
    assert proc.returncode == expected, out
    return out


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

    every_n = base / "every_n.yaml"
    every_n.write_text(recipe_text(model).replace("trainer: {", "trainer: {checkpoint_every_n_steps: 4, "))
    max_steps = base / "max_steps.yaml"
    max_steps.write_text(recipe_text(model).replace("trainer: {", f"trainer: {{max_steps: {16 * EPOCHS}, "))
    # name: (recipe, stop point, signal the test sends there)
    stopped = {
        "mid-epoch": (recipe, "train:1:5", signal.SIGKILL),
        "mid-save": (recipe, "save:1", signal.SIGKILL),
        "sigterm": (recipe, "signal:1:5", signal.SIGTERM),
        "sigusr1": (recipe, "signal:0:3", signal.SIGUSR1),
        "every-n": (every_n, "train:1:7", signal.SIGKILL),
        "every-n-mid-save": (every_n, "save:1", signal.SIGKILL),
        "sigterm-in-eval": (recipe, "signal-eval:0:0", signal.SIGTERM),
        "max-steps-epoch-end": (max_steps, "train:1:0", signal.SIGKILL),
    }
    procs = {name: start_and_kill(r, base / name, point, base / f"{name}.marker") for name, (r, point, _) in stopped.items()}
    reference = base / "reference"
    assert main(["fit", "--recipe", str(recipe), "--output-dir", str(reference)]) == 0
    outputs = {name: kill_at_marker(proc, base / f"{name}.marker", signum=stopped[name][2]) for name, proc in procs.items()}
    return base, reference, outputs


def test_killed_runs_left_complete_files_only(runs):
    base, _, _ = runs
    mid_epoch = records(base / "mid-epoch")
    assert {r["epoch"] for r in mid_epoch} == {0}  # epoch 1 was cut short: no line of it
    mid_save = records(base / "mid-save")
    assert {r["epoch"] for r in mid_save} == {0, 1}  # epoch 1's lines were written before its checkpoint
    # The half-written checkpoint is only a temporary file; last.ckpt is still epoch 0's, whole.
    parts = list((base / "mid-save" / "checkpoints").glob(".*.part"))
    assert parts, "the kill should have left the half-written temporary checkpoint"
    last = torch.load(base / "mid-save" / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    assert last["epoch"] == 0
    # The same for a mid-epoch checkpoint (every 4 steps) cut off while being written.
    assert list((base / "every-n-mid-save" / "checkpoints").glob(".last.ckpt.*.part"))
    assert _position(base / "every-n-mid-save" / "checkpoints" / "last.ckpt") == (0, 16, {"epoch": 0, "batches_done": 16, "epoch_batches": 16})


def _position(path: Path) -> tuple[int, int, dict]:
    ckpt = torch.load(path, map_location="cpu", weights_only=True)
    return ckpt["epoch"], ckpt["global_step"], ckpt["negtrain_resume"]["position"]


@pytest.mark.parametrize(
    ("name", "signum", "epoch", "batches"), [("sigterm", signal.SIGTERM, 1, 6), ("sigusr1", signal.SIGUSR1, 0, 4)]
)
def test_a_stop_signal_writes_a_mid_epoch_checkpoint_and_exits_non_zero(runs, name, signum, epoch, batches):
    """The signal arrives during batch B: that batch finishes, then last.ckpt holds B + 1 batches."""
    base, _, outputs = runs
    run = base / name
    step = 16 * epoch + batches
    assert f"stopped by {signal.Signals(signum).name}: wrote checkpoints/last.ckpt (epoch {epoch}, after {batches} of 16 batches, step {step}); continue with: {DATA_PREFIX}python -m negtrain fit --resume {run}" in outputs[name]
    assert _position(run / "checkpoints" / "last.ckpt") == (epoch, step, {"epoch": epoch, "batches_done": batches, "epoch_batches": 16})
    # The loop state carries the sampler's position (Lightning's stateful-loader protocol).
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    assert ckpt["loops"]["fit_loop"]["state_dict"]["combined_loader"] == [{"seed": 7, "epoch": epoch, "batches_done": batches}]
    # Nothing of the cut epoch is recorded yet (in epoch 0: nothing at all).
    assert (run / "metrics.jsonl").is_file() == (epoch > 0)
    assert epoch == 0 or {r["epoch"] for r in records(run)} == set(range(epoch))


def test_a_stop_signal_during_evaluation_stops_after_the_epoch_end_checkpoint(runs):
    base, _, outputs = runs
    run = base / "sigterm-in-eval"
    assert f"stopped by SIGTERM: stopped before epoch 1; checkpoints/last.ckpt is the newest checkpoint; continue with: {DATA_PREFIX}python -m negtrain fit --resume {run}" in outputs["sigterm-in-eval"]
    assert _position(run / "checkpoints" / "last.ckpt") == (0, 16, {"epoch": 0, "batches_done": 16, "epoch_batches": 16})
    assert [r["epoch"] for r in records(run)] == [0, 0, 0]  # epoch 0 whole: both evaluations and training


def test_checkpoint_every_n_steps_writes_mid_epoch_checkpoints(runs):
    base, _, _ = runs
    # Killed before batch 7 of epoch 1 (step 23): the newest is step 20, 4 batches into epoch 1.
    assert _position(base / "every-n" / "checkpoints" / "last.ckpt") == (1, 20, {"epoch": 1, "batches_done": 4, "epoch_batches": 16})


RESUMED = {
    "mid-epoch": "from last.ckpt: end of epoch 0, step 16; continuing with epoch 1/2",
    "mid-save": "from last.ckpt: end of epoch 0, step 16; continuing with epoch 1/2",
    "sigterm": "from last.ckpt: epoch 1 after 6 of 16 batches, step 22; continuing epoch 1/2 with batch 7",
    "sigusr1": "from last.ckpt: epoch 0 after 4 of 16 batches, step 4; continuing epoch 0/2 with batch 5",
    "every-n": "from last.ckpt: epoch 1 after 4 of 16 batches, step 20; continuing epoch 1/2 with batch 5",
    "every-n-mid-save": "from last.ckpt: end of epoch 0, step 16; continuing with epoch 1/2",
    "sigterm-in-eval": "from last.ckpt: end of epoch 0, step 16; continuing with epoch 1/2",
    "max-steps-epoch-end": "from last.ckpt: end of epoch 0, step 16; continuing with epoch 1/2",
}


def _best(run: Path) -> tuple[str, float]:
    """The best checkpoint's file name and score, as the run's own checkpoint callback records them."""
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    (state,) = [v for k, v in ckpt["callbacks"].items() if k.startswith("ModelCheckpoint{'monitor': 'scone/test/accuracy'")]
    return Path(state["best_model_path"]).name, float(state["best_model_score"])


@pytest.mark.parametrize("name", list(RESUMED))
def test_resume_finishes_with_the_uninterrupted_numbers(runs, name, capsys, recwarn):
    import shutil

    base, reference, _ = runs
    run = base / name
    original = None
    if name == "sigterm":
        # Moved: the checkpoints still name the old folder, which no longer exists.
        moved = base / "elsewhere" / "moved-run"
        moved.parent.mkdir()
        shutil.move(run, moved)
        run = moved
    elif name == "every-n":
        # Copied: resuming the copy must not touch the original (or delete its checkpoints).
        copy = base / "copies" / "copied-run"
        shutil.copytree(run, copy)
        original = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
        run, source = copy, run
    # Resumed in this process (a fresh Trainer reading only the run directory) to keep the test
    # short; the killed runs were separate processes.
    assert main(["fit", "--resume", str(run)]) == 0
    out = capsys.readouterr().out
    assert RESUMED[name] in out
    assert not [w for w in recwarn if "dirpath has changed" in str(w.message) or "not resumable" in str(w.message)]
    best_name, best_score = _best(reference)
    assert _best(run) == (best_name, best_score)
    assert f"best scone/test/accuracy = {best_score:.4f}: {run / 'checkpoints' / best_name}" in out
    if original is not None:
        assert {p: p.read_bytes() for p in source.rglob("*") if p.is_file()} == original
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
    _, reference, _ = runs
    # (.negtrain.lock records the pid of whoever holds the directory: not part of the run.)
    before = {p: p.stat().st_mtime_ns for p in reference.rglob("*") if p.is_file() and p.name != ".negtrain.lock"}
    assert main(["fit", "--resume", str(reference)]) == 0
    assert "already complete" in capsys.readouterr().out
    assert {p: p.stat().st_mtime_ns for p in reference.rglob("*") if p.is_file() and p.name != ".negtrain.lock"} == before


def test_every_checkpoint_follows_its_epochs_records(runs):
    """A checkpoint never precedes its epoch's records: it holds every line of its epochs."""
    _, reference, _ = runs
    for path in (reference / "checkpoints").glob("*.ckpt"):
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
        lines = [json.loads(x) for x in ckpt["negtrain_resume"]["metrics_lines"]]
        assert sorted({r["epoch"] for r in lines}) == list(range(ckpt["epoch"] + 1))
        assert sum(r["benchmark"] == "train" and r["epoch"] == ckpt["epoch"] for r in lines) == 1
        assert sum(r["benchmark"] != "train" and r["epoch"] == ckpt["epoch"] for r in lines) == 2


def test_resume_refuses_an_edited_seed_and_touches_nothing(runs, tmp_path):
    import shutil

    from negtrain.core.errors import NegtrainError
    from negtrain.training.run import resume

    _, reference, _ = runs
    run = tmp_path / "run"
    shutil.copytree(reference, run)
    recipe = run / "recipe.yaml"
    assert "\nseed: 7\n" in recipe.read_text()
    recipe.write_text(recipe.read_text().replace("\nseed: 7\n", "\nseed: 8\n"))
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    with pytest.raises(NegtrainError, match=r"recipe.yaml has seed 8, but .*\.ckpt was trained with seed 7; put seed: 7 back"):
        resume(run)
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before


def _replace_with_folder(path: Path) -> None:
    path.unlink()
    path.mkdir()


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _replace_with_file(path: Path) -> None:
    import shutil

    shutil.rmtree(path)
    path.write_text("not a folder\n")


#: A damaged run directory: how to damage a copy of a finished run, and what the error must say.
DAMAGED = {
    "no recipe.yaml": (lambda run: (run / "recipe.yaml").unlink(), "not a negtrain run directory (no recipe.yaml)"),
    "recipe.yaml is a folder": (lambda run: _replace_with_folder(run / "recipe.yaml"), "recipe.yaml is not a file"),
    "recipe.yaml is not YAML": (lambda run: (run / "recipe.yaml").write_text("model: [unclosed\n"), "recipe.yaml"),
    "last.ckpt is a folder": (
        lambda run: _replace_with_folder(run / "checkpoints" / "last.ckpt"),
        "checkpoints/last.ckpt is a folder, not a checkpoint; move checkpoints/last.ckpt out of the run directory",
    ),
    "last.ckpt is truncated": (
        lambda run: _truncate(run / "checkpoints" / "last.ckpt"),
        "checkpoints/last.ckpt is truncated or damaged (cannot be read",
    ),
    "a checkpoint is text": (
        lambda run: (run / "checkpoints" / "notes.ckpt").write_text("hello\n"),
        "checkpoints/notes.ckpt is truncated or damaged",
    ),
    "another program's checkpoint": (
        lambda run: torch.save({"state_dict": {"w": torch.ones(1)}}, run / "checkpoints" / "other.ckpt"),
        "checkpoints/other.ckpt was not written by `negtrain fit`",
    ),
    "a checkpoint links out of the run": (
        lambda run: (run / "checkpoints" / "far.ckpt").symlink_to(run.parent / "far-away.ckpt"),
        "checkpoints/far.ckpt leads outside",
    ),
    "a dangling link": (
        lambda run: (run / "checkpoints" / "gone.ckpt").symlink_to(run / "checkpoints" / "nothing-here"),
        "checkpoints/gone.ckpt is a broken link",
    ),
    "checkpoints is a file": (lambda run: _replace_with_file(run / "checkpoints"), "checkpoints is not a folder"),
    "metrics.jsonl is a folder": (lambda run: _replace_with_folder(run / "metrics.jsonl"), "metrics.jsonl is not a file"),
    "predictions is a file": (lambda run: _replace_with_file(run / "predictions"), "predictions is not a folder"),
    "model is a file": (lambda run: _replace_with_file(run / "model"), "model is not a folder"),
    "model/config.json is garbage": (
        lambda run: (run / "model" / "config.json").write_text("{garbage"),
        "model/config.json is damaged (not a model config); remove the model/ folder",
    ),
}


@pytest.mark.parametrize("case", list(DAMAGED))
def test_a_damaged_run_directory_is_one_error_line_before_any_work(runs, tmp_path, capsys, monkeypatch, case):
    import shutil

    import negtrain.training.run as run_module

    _, reference, _ = runs
    run = tmp_path / "run"
    shutil.copytree(reference, run, symlinks=True)
    damage, message = DAMAGED[case]
    damage(run)
    before = {p: (p.is_symlink(), p.read_bytes() if p.is_file() else None) for p in run.rglob("*")}
    # Before any work: the model is never built (asked directly; a bound on the seconds it took
    # fails on a busy machine and passes a fast build).
    monkeypatch.setattr(run_module, "_build", lambda *args, **kwargs: pytest.fail("the model was built before the damage was named"))
    assert main(["fit", "--resume", str(run)]) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), captured.err
    assert message in lines[0], lines[0]
    assert captured.out == ""
    # Nothing in the directory changed.
    assert {p: (p.is_symlink(), p.read_bytes() if p.is_file() else None) for p in run.rglob("*")} == before


def _edit_weights(change):
    def damage(run: Path) -> None:
        path = run / "checkpoints" / "last.ckpt"
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
        change(ckpt["state_dict"])
        torch.save(ckpt, path)
    return damage


def _wider(state: dict) -> None:
    key = next(k for k in state if k.endswith("query.weight"))
    state[key] = torch.zeros(state[key].shape[0] + 1, state[key].shape[1])


@pytest.mark.parametrize("case,damage,message", [
    ("wrong shapes", _edit_weights(_wider), "1 weights of another shape (e.g. model."),
    ("missing keys", _edit_weights(lambda s: s.pop(next(k for k in s if k.endswith("value.bias")))), "1 weights missing (e.g. model."),
])
def test_resume_from_a_checkpoint_that_does_not_fit_is_one_error_line(runs, tmp_path, capsys, case, damage, message):
    import shutil

    import yaml

    _, reference, _ = runs
    run = tmp_path / "run"
    shutil.copytree(reference, run, symlinks=True)
    for ckpt in (run / "checkpoints").glob("best-*.ckpt"):
        ckpt.unlink()  # last.ckpt the only checkpoint
    # One epoch more than it ran: the run is incomplete, so the resume loads last.ckpt.
    text = (run / "recipe.yaml").read_text()
    header = "".join(line for line in text.splitlines(keepends=True) if line.startswith("#"))
    recipe = yaml.safe_load(text)
    recipe["trainer"]["max_epochs"] += 1
    (run / "recipe.yaml").write_text(header + yaml.safe_dump(recipe, sort_keys=False))
    damage(run)
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    capsys.readouterr()
    assert main(["fit", "--resume", str(run)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"error: --resume {run}: checkpoints/last.ckpt does not fit the recipe's model: "), err[-1]
    assert message in err[-1] and len([line for line in err if line.startswith("error:")]) == 1
    after = {p: p.read_bytes() for p in run.rglob("*") if p.is_file() and not p.name.endswith(".lock")}
    assert after == {p: b for p, b in before.items() if not p.name.endswith(".lock")}


@pytest.mark.parametrize("where", ["missing", "a file"])
def test_resume_of_something_that_is_no_run_directory(tmp_path, capsys, where):
    target = tmp_path / "run"
    if where == "a file":
        target.write_text("x\n")
    assert main(["fit", "--resume", str(target)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [f"error: --resume {target}: {'does not exist' if where == 'missing' else 'not a directory'}"]
