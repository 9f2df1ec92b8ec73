"""perf/gpu_smoke.py on a machine without a CUDA GPU: one line saying so, exit 0, nothing run or
written. (CUDA_VISIBLE_DEVICES is emptied, so this holds on a GPU machine too.)"""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import REPO


def test_without_a_gpu_it_says_so_in_one_line_and_exits():
    result_file = REPO / "perf" / "results" / "gpu_smoke.md"
    before = result_file.stat().st_mtime_ns if result_file.exists() else None
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONPATH=str(REPO))
    env.pop("NEGTRAIN_DATA_DIR", None)  # it must not get as far as needing data
    done = subprocess.run([sys.executable, str(REPO / "perf" / "gpu_smoke.py")], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1, done.stdout
    assert lines[0].startswith("gpu_smoke: no CUDA GPU on this machine (torch ") and "nothing checked" in lines[0]
    assert done.stderr.strip() == ""
    assert (result_file.stat().st_mtime_ns if result_file.exists() else None) == before
