"""One writer per run directory (:mod:`negtrain.io.run_lock`): a second ``fit`` into a directory
being written is refused with the holder's pid, and a lock left by a killed process is free."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from negtrain.core.errors import NegtrainError
from negtrain.io.run_lock import LOCK_NAME, RunDirLocked, run_lock

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))


def subprocess_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS.parent), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def wait_for(path: Path, proc: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            pytest.fail(f"the process ended (code {proc.returncode}) before {path.name}:\n{proc.stdout.read()}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"{path.name} did not appear in time")
        time.sleep(0.05)


def start_crash_fit(marker: Path, point: str, *argv: str) -> subprocess.Popen:
    """``negtrain ARGV`` in a process of its own, under tests/crash_fit.py, which stops it at POINT
    (the points are in that file's docstring) and writes MARKER there."""
    return subprocess.Popen([sys.executable, str(TESTS / "crash_fit.py"), str(marker), point, *argv], env=subprocess_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def kill_at(marker: Path, point: str, *argv: str) -> None:
    """``negtrain ARGV`` run until it reaches POINT, then killed with SIGKILL (nothing of it runs on)."""
    proc = start_crash_fit(marker, point, *argv)
    try:
        wait_for(marker, proc)
    finally:
        proc.kill()
        proc.wait()


def stamps(run: Path) -> dict[str, int]:
    """When the run's metrics.jsonl and each checkpoint were written: the same later, it was not trained again."""
    return {p.name: p.stat().st_mtime_ns for p in [run / "metrics.jsonl", *sorted((run / "checkpoints").glob("*.ckpt"))]}


_HOLDER = """
import sys, time
from pathlib import Path
from negtrain.io.run_lock import run_lock
with run_lock(Path(sys.argv[1]), "holder test"):
    Path(sys.argv[2]).write_text("locked")
    time.sleep(600)
"""


def test_a_second_writer_is_refused_with_the_pid_and_a_killed_holders_lock_is_taken_over(tmp_path):
    run = tmp_path / "run"
    marker = tmp_path / "locked"
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, str(run), str(marker)], env=subprocess_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(marker, proc)
        with pytest.raises(RunDirLocked, match=rf"pid {proc.pid}: holder test"):
            with run_lock(run):
                pass
    finally:
        proc.kill()
        proc.wait()
    # kill -9 left the lock file (with the dead pid in it), but the kernel dropped the lock.
    assert (run / LOCK_NAME).read_text().startswith(f"pid {proc.pid}")
    with run_lock(run, "after the kill"):
        assert (run / LOCK_NAME).read_text() == f"pid {os.getpid()}: after the kill\n"
        with run_lock(run):  # the same process again: re-entrant, not refused
            pass


def test_a_failure_before_anything_is_written_leaves_no_directory(tmp_path):
    run = tmp_path / "a" / "b" / "run"
    with pytest.raises(NegtrainError, match="boom"):
        with run_lock(run):
            raise NegtrainError("boom")
    assert not (tmp_path / "a").exists()
    (tmp_path / "kept").mkdir()
    with pytest.raises(NegtrainError):
        with run_lock(tmp_path / "kept"):
            (tmp_path / "kept" / "recipe.yaml").write_text("x")
            raise NegtrainError("boom")
    assert (tmp_path / "kept" / "recipe.yaml").exists()


def test_two_fits_into_one_directory_one_refuses_and_each_epoch_is_recorded_once(tmp_path):
    from crash_fit import tiny_model
    from test_resume import recipe_text

    model = tiny_model(tmp_path / "tiny")
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(recipe_text(model, epoch=32).replace("max_epochs: 3", "max_epochs: 2"))
    run = tmp_path / "run"
    marker = tmp_path / "held"
    first = start_crash_fit(marker, "hold:0:0", "fit", "--recipe", str(recipe), "--output-dir", str(run))
    try:
        wait_for(marker, first)  # the first fit is training, epoch 0, before its first batch
        second = subprocess.run([sys.executable, "-m", "negtrain", "fit", "--recipe", str(recipe), "--output-dir", str(run)],
                                env=subprocess_env(), capture_output=True, text=True, timeout=300)
        assert second.returncode == 2, second.stderr
        [line] = second.stderr.strip().splitlines()
        assert line.startswith("error: ") and f"pid {first.pid}" in line and "being written by another negtrain process" in line
        Path(str(marker) + ".go").write_text("go")
        out, _ = first.communicate(timeout=600)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0, out
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    epochs = [(r["epoch"], r["benchmark"]) for r in lines]
    assert sorted(epochs) == sorted({(e, b) for e in (0, 1) for b in ("train", "monli", "scone")})
    assert len([p for p in (run / "checkpoints").glob("best-*.ckpt")]) == 1


# ---- sweeps resume ---------------------------------------------------------------------------


def sweep_recipe(folder: Path, parameters: str = "model.learning_rate: {distribution: log_uniform_values, min: 1.0e-4, max: 1.0e-3}",
                 method: str = "random") -> Path:
    """A sweep of the tiny model that makes each trial a few seconds: 2 epochs of 2 batches."""
    from crash_fit import tiny_model
    from test_resume import recipe_text

    model = folder / "tiny"
    if not model.exists():
        tiny_model(model)
    text = recipe_text(model, epoch=32).replace("max_epochs: 3", "max_epochs: 2, limit_val_batches: 1")
    text += f"sweep:\n  method: {method}\n  metric: scone/test/accuracy\n  parameters:\n    {parameters}\n"
    recipe = folder / f"sweep-{method}.yaml"
    recipe.write_text(text)
    return recipe


def _sweep_args(recipe: Path, parent: Path, n: int = 3) -> list[str]:
    return ["sweep", "--recipe", str(recipe), "--local", str(n), "--output-dir", str(parent)]


def _check_resumed_sweep(parent: Path, trial0: dict[str, int], out: str) -> None:
    board = json.loads((parent / "leaderboard.json").read_text())
    assert [t["status"] for t in board["trials"]] == ["done"] * 3, board
    assert all(t["best"] is not None for t in board["trials"])
    assert sorted(t["trial"] for t in board["trials"]) == ["trial-0", "trial-1", "trial-2"]
    bests = [t["best"] for t in board["trials"]]
    assert bests == sorted(bests, reverse=True)
    assert (parent / "leaderboard.md").read_text().count("| trial-") == 3
    # trial 0 was finished: kept as it was, not trained again.
    assert stamps(parent / "trial-0") == trial0
    assert f"run {parent / 'trial-0'} is already complete" in out
    for k in range(3):
        lines = [json.loads(line) for line in (parent / f"trial-{k}" / "metrics.jsonl").read_text().splitlines()]
        keys = [(r["epoch"], r["benchmark"]) for r in lines]
        assert sorted(keys) == sorted({(e, b) for e in (0, 1) for b in ("train", "monli", "scone")})


@pytest.mark.slow
def test_a_sweep_killed_during_trial_1_continues_with_the_same_command(tmp_path, capsys):
    from negtrain.cli import main

    recipe = sweep_recipe(tmp_path)
    parent = tmp_path / "sweep"
    kill_at(tmp_path / "killed", "train:0:1:1", *_sweep_args(recipe, parent))
    trial0 = stamps(parent / "trial-0")
    state = json.loads((parent / "sweep.json").read_text())
    assert [t["status"] for t in state["trials"]] == ["done", "running"]
    capsys.readouterr()
    assert main(_sweep_args(recipe, parent)) == 0
    _check_resumed_sweep(parent, trial0, capsys.readouterr().out)


@pytest.mark.slow
def test_sigterm_stops_a_sweep_with_143_and_the_rerun_continues_it(tmp_path, capsys):
    from negtrain.cli import main

    recipe = sweep_recipe(tmp_path)
    parent = tmp_path / "sweep"
    marker = tmp_path / "signalled"
    proc = start_crash_fit(marker, "signal:0:1:1", *_sweep_args(recipe, parent))
    try:
        wait_for(marker, proc)
        os.kill(proc.pid, signal.SIGTERM)
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, out
    assert f"continue with: python -m negtrain sweep --recipe {recipe} --local 3 --output-dir {parent}" in out
    board = json.loads((parent / "leaderboard.json").read_text())
    assert {t["trial"]: t["status"] for t in board["trials"]} == {"trial-0": "done", "trial-1": "interrupted"}
    trial0 = stamps(parent / "trial-0")
    capsys.readouterr()
    assert main(_sweep_args(recipe, parent)) == 0
    out = capsys.readouterr().out
    assert f"resuming {parent / 'trial-1'} from last.ckpt" in out  # the mid-epoch checkpoint SIGTERM wrote
    _check_resumed_sweep(parent, trial0, out)


def test_a_failing_trial_never_ends_the_sweep(tmp_path, capsys):
    from negtrain.cli import main

    # flash_attention_2 needs the flash-attn package (and a GPU): the second trial cannot start.
    recipe = sweep_recipe(tmp_path, "model.attn_implementation: {values: [eager, flash_attention_2]}", method="grid")
    parent = tmp_path / "sweep"
    assert main(_sweep_args(recipe, parent, n=2) + ["--trainer.max_epochs=1"]) == 0
    board = json.loads((parent / "leaderboard.json").read_text())
    first, second = board["trials"]
    assert first["trial"] == "trial-0" and first["status"] == "done" and first["best"] is not None
    assert second["trial"] == "trial-1" and second["status"] == "failed" and second["error"]
    assert len(second["error"]) <= 220 and "\n" not in second["error"]


def test_sweep_bounds_and_a_changed_sweep_in_the_same_directory(tmp_path, capsys):
    from negtrain.cli import main
    from negtrain.runs.sweeps import MAX_LOCAL_TRIALS

    recipe = sweep_recipe(tmp_path)
    assert main(["sweep", "--recipe", str(recipe), "--local", str(MAX_LOCAL_TRIALS + 1)]) == 2
    assert f"at most {MAX_LOCAL_TRIALS} trials" in capsys.readouterr().err
    parent = tmp_path / "sweep"
    parent.mkdir()
    (parent / "sweep.json").write_text(json.dumps({
        "recipe": str(recipe), "overrides": {}, "metric": {"name": "scone/test/accuracy", "goal": "maximize"},
        "method": "random", "seed": 8, "args": ["--recipe", str(recipe), "--local", "3", "--seed", "8"], "width": 1, "trials": [],
    }))
    assert main(_sweep_args(recipe, parent)) == 2
    err = capsys.readouterr().err
    assert "holds a sweep with another seed" in err and "--seed 8" in err


def test_random_trials_are_drawn_lazily(monkeypatch):
    from negtrain.runs import local_sweep
    from negtrain.config import SweepConfig

    # Counted at the draw: a sweep that drew its trials ahead (a list of MAX_LOCAL_TRIALS) fails here,
    # where comparing iter_trials with sample_trials (its first N) alone could not.
    drawn = []
    real = local_sweep.draw
    monkeypatch.setattr(local_sweep, "draw", lambda param, rng: drawn.append(param) or real(param, rng))
    space = SweepConfig.model_validate({"method": "random", "parameters": {"model.learning_rate": {"min": 0.1, "max": 0.2}}})
    trials = local_sweep.iter_trials(space, seed=0)
    assert drawn == []
    first = [next(trials)["model.learning_rate"] for _ in range(3)]
    assert len(drawn) == 3  # one draw per trial asked for, none ahead
    assert all(0.1 <= v <= 0.2 for v in first) and len(set(first)) == 3
    # More trials leave the first ones as they were: a resumed sweep draws the same.
    assert [t["model.learning_rate"] for t in local_sweep.sample_trials(space, 5, 0)][:3] == first


# ---- a signal never means success ---------------------------------------------------------------

_WAITING_COMMAND = """
import sys, time
from pathlib import Path
from negtrain import cli
from negtrain.commands import recipes

def wait(args, extra):
    Path(sys.argv[1]).write_text("waiting")
    time.sleep(600)
    return 0

cli.COMMANDS["recipes"] = cli.Command("", recipes.add_arguments, wait)
sys.exit(cli.main(["recipes"]))
"""


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_every_command_ends_non_zero_on_a_stop_signal(tmp_path, signum, code):
    marker = tmp_path / "waiting"
    proc = subprocess.Popen([sys.executable, "-c", _WAITING_COMMAND, str(marker)], env=subprocess_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(marker, proc, timeout=60)
        os.kill(proc.pid, signum)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code
    assert err.strip() == f"stopped by {signal.Signals(signum).name}"  # one line, no traceback


# ---- secrets masking never changes what is not the secret -----------------------------------------


def test_a_short_word_as_an_api_key_leaves_recipe_yaml_intact(monkeypatch, tmp_path):
    from negtrain.recipes import load_recipe
    from negtrain.core.secrets import MIN_SECRET_LENGTH, redact_text
    from negtrain.recipes import resolved_recipe_yaml

    monkeypatch.setenv("MY_API_KEY", "entailment")
    monkeypatch.setenv("OTHER_TOKEN", "not entailment, but with spaces")
    loaded = load_recipe("scone_minilm", {"model.head_labels": ["entailment", "not_entailment"]})
    text = resolved_recipe_yaml(loaded)
    assert "***" not in text and "- not_entailment" in text
    (tmp_path / "recipe.yaml").write_text(text)
    assert load_recipe(str(tmp_path / "recipe.yaml")).recipe == loaded.recipe
    # A value long enough to be a credential is masked wherever it is written, inside text too.
    secret = "hf_" + "x1" * (MIN_SECRET_LENGTH // 2)
    monkeypatch.setenv("HF_TOKEN", secret)
    assert redact_text(f"runs/{secret}/model and entailment") == "runs/***/model and entailment"


# ---- limits -------------------------------------------------------------------------------------


def test_more_cpu_devices_than_cores_is_refused_before_any_process_starts(tmp_path, capsys):
    from negtrain.cli import main
    from negtrain.training.checks import available_cores

    devices = max(64, available_cores() + 1)
    run = tmp_path / "run"
    assert main(["fit", "--recipe", "scone_minilm", f"--trainer.devices={devices}", "--trainer.accelerator=cpu", "--output-dir", str(run)]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert f"trainer.devices {devices}: a CPU run starts one process per device" in line and f"use at most {available_cores()}" in line
    assert not run.exists()  # refused before the run directory (or any process) was made
    recipe = sweep_recipe(tmp_path)
    assert main(_sweep_args(recipe, tmp_path / "sweep") + [f"--trainer.devices={devices}", "--trainer.accelerator=cpu"]) == 2
    assert "a CPU run starts one process per device" in capsys.readouterr().err
    assert not (tmp_path / "sweep").exists()


# ---- error lines stay short -----------------------------------------------------------------------


def test_one_id_repeated_many_times_is_one_short_error_line(tmp_path, capsys):
    from negtrain.benchmarks.registry import get_benchmark
    from negtrain.cli import MAX_ERROR_CHARS, main, one_line

    example = get_benchmark("monli").load("test")[0]
    path = tmp_path / "predictions.jsonl"
    row = json.dumps({"id": example.id, "prediction": example.label}) + "\n"
    path.write_text(row * 100_000)  # (a million takes longer to read, and says the same)
    assert main(["evaluate", "--benchmark", "monli", "--split", "test", "--predictions", str(path)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert len(line) < 500, line[:1000]
    assert f"1 duplicate id(s): {example.id!r} (lines 1, 2, 3, ...; 100000 lines in all)" in line
    # Whatever a message quotes, the line printed is bounded.
    long = one_line("x" * 10_000_000 + "\n" + "the end")
    assert len(long) <= MAX_ERROR_CHARS and long.endswith("\\nthe end") and "characters left out" in long


def test_a_path_as_the_wandb_project_is_one_error_line(capsys):
    from negtrain.cli import main

    assert main(["fit", "--recipe", "scone_minilm", "--logger=wandb", "--logger.project=../../x"]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "logger.project" in line and "'../../x' is not a W&B name: it may not contain '/'" in line
