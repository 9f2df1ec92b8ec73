"""Crash and resume under real DDP: a 2-process `fit` killed mid-epoch, resumed with 2 processes,
ends exactly as an uninterrupted 2-process run.

Why the runs are comparable: all three are the same recipe on the same machine (gloo on CPU,
fp32, deterministic, one thread per rank). Each epoch's batches come from the sampler's
``(seed, epoch)`` generator and are dealt out to the ranks, so the resumed epoch 1 replays the
same batches on the same ranks. What a resumed run could get wrong is what is not in the weights:
crash_fit's tiny model keeps BERT's default dropout (0.1), and each rank draws its dropout masks
from its own torch RNG. Length bucketing pads the two ranks' batches to different lengths, so after an epoch the ranks'
RNG states differ (asserted below); a resume that gave rank 1 rank 0's state, or left it at the
seed's, would change rank 1's gradients, hence the averaged update and every number after it.

The killed run goes through ``tests/crash_fit.py``; Lightning's launcher starts rank 1 by rerunning
the same command, so both ranks stop at the kill point. The whole process group is killed with
SIGKILL, as a scheduler or an OOM killer would.

A fourth run is preempted: SIGTERM goes to rank 0 only, mid-epoch 1. Rank 0 forwards it to the
rank it launched, the ranks agree on the step to stop after, write one mid-epoch checkpoint
(holding each rank's RNG state and running counts) and exit with 143; resumed with 2 processes
it continues mid-epoch and ends with the uninterrupted numbers too.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from crash_fit import tiny_model
from test_resume import EPOCHS, predictions, records, recipe_text, subprocess_env

TESTS = Path(__file__).resolve().parent
# mix.epoch 132 examples = 17 batches of 8 (the last one short), padded to 18 so both ranks step 9 times.
STEPS_PER_EPOCH = 9


def _env(cache: Path) -> dict[str, str]:
    return dict(subprocess_env(), NEGTRAIN_CACHE_DIR=str(cache), NEGTRAIN_OFFLINE="1")


def _fit(args: list[str], env: dict[str, str]) -> str:
    done = subprocess.run([sys.executable, "-m", "negtrain", "fit", *args], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done.stdout


def _kill_group(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    # Rank 1 is an orphan now; wait until it is gone too, so it cannot touch the run directory.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    pytest.fail("a rank of the killed run outlived SIGKILL to its process group")


def crash(recipe: Path, run: Path, point: str, marker: Path, env: dict[str, str], timeout: float = 600) -> None:
    """Run a 2-process `fit` until a rank reaches ``point``, then SIGKILL every rank."""
    # A session of its own: rank 0 and the rank 1 it launches share one process group to kill.
    proc = subprocess.Popen(
        [sys.executable, str(TESTS / "crash_fit.py"), str(marker), point, "fit", "--recipe", str(recipe), "--output-dir", str(run)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + timeout
        while not marker.exists():
            if proc.poll() is not None:
                pytest.fail(f"the run ended (code {proc.returncode}) before reaching its kill point:\n{proc.stdout.read()[-5000:]}")
            if time.monotonic() > deadline:
                pytest.fail("the run did not reach its kill point in time")
            time.sleep(0.1)
    finally:
        _kill_group(proc)
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL


def preempt(recipe: Path, run: Path, point: str, marker: Path, env: dict[str, str], timeout: float = 600) -> str:
    """Run a 2-process `fit` until a rank is inside ``point``, then SIGTERM rank 0 alone; its output."""
    proc = subprocess.Popen(
        [sys.executable, str(TESTS / "crash_fit.py"), str(marker), point, "fit", "--recipe", str(recipe), "--output-dir", str(run)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + timeout
        while not marker.exists():
            if proc.poll() is not None:
                pytest.fail(f"the run ended (code {proc.returncode}) before reaching its stop point:\n{proc.stdout.read()[-5000:]}")
            if time.monotonic() > deadline:
                pytest.fail("the run did not reach its stop point in time")
            time.sleep(0.1)
        os.kill(proc.pid, signal.SIGTERM)
        out, _ = proc.communicate(timeout=300)
        # Rank 1 stops on its own (the forwarded signal); wait for it before touching the run.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            pytest.fail("rank 1 of the preempted run did not stop")
    finally:
        if proc.poll() is None:
            _kill_group(proc)
    assert proc.returncode == 128 + signal.SIGTERM, out[-5000:]
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory, data_dir):
    base = tmp_path_factory.mktemp("ddp_resume")
    recipe = base / "recipe.yaml"
    recipe.write_text(recipe_text(
        tiny_model(base / "tiny"), seed=11, epoch=132, batch_size=8, trainer="devices: 2, accelerator: cpu, ", what="DDP crash-and-resume test"
    ))
    env = _env(base / "cache")
    reference, killed = base / "reference", base / "killed"
    # The reference tokenizes the data into the cache the other two runs then read.
    _fit(["--recipe", str(recipe), "--output-dir", str(reference)], env)
    # Mid-epoch 1: a rank can only reach batch 4 once both ranks stepped past epoch 0's checkpoint.
    crash(recipe, killed, "train:1:4", base / "killed.marker", env)
    preempted = base / "preempted"
    out = preempt(recipe, preempted, "signal:1:4", base / "preempted.marker", env)
    return reference, killed, env, preempted, out


def test_killed_run_stopped_after_epoch_0_with_rank_specific_rng(runs):
    _, killed, *_ = runs
    assert {r["epoch"] for r in records(killed)} == {0}
    last = torch.load(killed / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    assert last["epoch"] == 0 and last["global_step"] == STEPS_PER_EPOCH
    rng = last["negtrain_resume"]["rng"]
    # Both ranks' states are kept, and they differ: restoring the wrong one would show.
    assert len(rng) == 2
    assert not torch.equal(rng[0]["torch"], rng[1]["torch"])


def test_ddp_training_counts_are_summed_over_ranks(runs):
    # The short batch lands on one rank, so the ranks train on different numbers of examples:
    # the count is the sum over ranks (the same sum the per-source counts are), never one rank's
    # count times two. The padding batch (17 batches for 2 ranks) repeats real examples but
    # trains on nothing, so it counts for nothing.
    reference, *_ = runs
    train = [r for r in records(reference) if r["benchmark"] == "train"]
    assert len(train) == EPOCHS
    for r in train:
        assert r["train_examples"] == sum(s["examples"] for s in r["sources"].values()) == 132


def test_ddp_resume_finishes_with_the_uninterrupted_numbers(runs):
    reference, killed, env, *_ = runs
    out = _fit(["--resume", str(killed)], env)
    assert f"from last.ckpt: end of epoch 0, step {STEPS_PER_EPOCH}; continuing with epoch 1/{EPOCHS - 1}" in out
    assert [r["epoch"] for r in records(killed)] == [e for e in range(EPOCHS) for _ in range(3)]
    assert records(killed) == records(reference)
    assert predictions(killed) == predictions(reference)
    assert {p.name for p in (killed / "checkpoints").iterdir()} == {p.name for p in (reference / "checkpoints").iterdir()}
    assert not list(killed.rglob("*.part"))
    a = torch.load(killed / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    b = torch.load(reference / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    assert a["global_step"] == b["global_step"] == EPOCHS * STEPS_PER_EPOCH
    for key, value in b["state_dict"].items():
        assert torch.equal(a["state_dict"][key], value), key


def test_ddp_preemption_stops_every_rank_at_one_step_and_resumes_mid_epoch(runs):
    reference, _, env, preempted, out = runs
    step = STEPS_PER_EPOCH + 5  # the signal came during batch 4 of epoch 1; that batch finished
    assert f"stopped by SIGTERM: wrote checkpoints/last.ckpt (epoch 1, after 5 of {STEPS_PER_EPOCH} batches, step {step})" in out
    last = torch.load(preempted / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    assert (last["epoch"], last["global_step"]) == (1, step)
    assert len(last["negtrain_resume"]["rng"]) == 2
    (recorder,) = [v for k, v in last["callbacks"].items() if k == "RunRecorder"]
    assert [r["epoch"] for r in recorder["ranks"]] == [1, 1]  # each rank's running counts
    assert 5 * 2 * 8 - 4 <= sum(r["examples"] for r in recorder["ranks"]) <= 5 * 2 * 8  # one batch may be the short one
    resumed = _fit(["--resume", str(preempted)], env)
    assert f"epoch 1 after 5 of {STEPS_PER_EPOCH} batches, step {step}; continuing epoch 1/{EPOCHS - 1} with batch 6" in resumed
    assert records(preempted) == records(reference)
    assert predictions(preempted) == predictions(reference)
    a = torch.load(preempted / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    b = torch.load(reference / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    for key, value in b["state_dict"].items():
        assert torch.equal(a["state_dict"][key], value), key
