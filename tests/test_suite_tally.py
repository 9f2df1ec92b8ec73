"""The suite prints its tally when a time limit stops it (tests/conftest.py turns SIGTERM into
pytest's own interruption), and the checkout holds no generated output folders."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def test_a_sigterm_leaves_the_tally(tmp_path):
    # The suite's own hook, in a tiny suite of its own: one test passes, the next sleeps until
    # the "time limit" (SIGTERM) arrives.
    (tmp_path / "conftest.py").write_text("from suite_tally import pytest_configure  # noqa: F401\n")
    (tmp_path / "test_sleepy.py").write_text(
        "import pathlib, time\n"
        "def test_quick():\n    assert True\n"
        "def test_sleepy():\n    pathlib.Path('started').write_text('x')\n    time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_sleepy.py"],
                            cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO / "tests")}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 30
    while not (tmp_path / "started").exists():
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert "1 passed" in out and "KeyboardInterrupt: SIGTERM" in out, out


@pytest.mark.skipif(not (REPO / ".git").exists(), reason="not a git checkout")
def test_no_generated_output_is_committed():
    # The quickstart writes runs/, cards/, models/ and site/ in the checkout; they are outputs.
    tracked = subprocess.run(["git", "ls-files", "runs", "cards", "models", "site"], cwd=REPO,
                             capture_output=True, text=True, env={**os.environ, "GIT_DIR": str(REPO / ".git")}).stdout
    assert tracked == ""


def test_a_forked_child_still_dies_of_sigterm(tmp_path):
    # A multiprocessing pool's worker inherits the handler; its pool ends it with SIGTERM, which
    # must end it (not raise inside it: a worker once hung on its pool's lock, and the suite with it).
    (tmp_path / "conftest.py").write_text("from suite_tally import pytest_configure  # noqa: F401\n")
    (tmp_path / "test_pool.py").write_text(
        "import multiprocessing, signal, time\n"
        "def _sleep(x):\n    time.sleep(30)\n"
        "def _default():\n    return signal.getsignal(signal.SIGTERM) == signal.SIG_DFL\n"
        "def test_pool_terminates():\n"
        "    assert signal.getsignal(signal.SIGTERM) != signal.SIG_DFL  # the suite's own process: the tally's handler\n"
        "    pool = multiprocessing.get_context('fork').Pool(2)\n"
        "    assert pool.apply(_default)  # a worker: SIGTERM's default, set at the fork\n"
        "    pool.map_async(_sleep, range(4))\n"
        "    time.sleep(0.5)\n"
        "    start = time.monotonic()\n"
        "    pool.terminate(); pool.join()\n"
        "    assert time.monotonic() - start < 10\n"
    )
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_pool.py"], cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(REPO / "tests")}, capture_output=True, text=True, timeout=60)
    assert "1 passed" in done.stdout, done.stdout + done.stderr
