"""One writer per run directory (:mod:`negtrain.io.run_lock`): a second ``fit`` into a directory
being written is refused with the holder's pid, and a lock left by a killed process is free."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from negtrain.errors import NegtrainError
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
    first = subprocess.Popen(
        [sys.executable, str(TESTS / "crash_fit.py"), str(marker), "hold:0:0", "fit", "--recipe", str(recipe), "--output-dir", str(run)],
        env=subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
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
