"""perf/scaling.py's whole-run memory sampler: a phase's peak is the memory held during it, even
when it is freed before the phase ends (which a reading at the boundaries alone would miss)."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO

CODE = """
import json, time, numpy as np
from scaling import PhaseSampler
s = PhaseSampler().start()
s.enter("holding 200 MB")
block = np.ones(200 * 2**20, dtype=np.uint8)  # touched: anonymous resident pages
time.sleep(0.1)
del block
s.enter("after freeing")
time.sleep(0.05)
print(json.dumps(s.stop()))
"""


def test_a_phase_keeps_the_peak_of_memory_freed_before_its_end():
    # A fresh process: the test runner's own heap would blur the 200 MB.
    done = subprocess.run([sys.executable, "-c", CODE], cwd=REPO / "perf", capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": f"{REPO}:{REPO / 'perf'}", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    import json

    result = json.loads(done.stdout.splitlines()[-1])
    phases = {p["phase"]: p for p in result["phases"]}
    assert list(phases) == ["imports and setup", "holding 200 MB", "after freeing"]
    held = phases["holding 200 MB"]["peak_RssAnon_mb"] - phases["imports and setup"]["peak_RssAnon_mb"]
    assert 190 <= held <= 260
    assert result["peak_anon_mb"] == phases["holding 200 MB"]["peak_RssAnon_mb"]
    # Freed: the next phase's peak is back near the start, not the whole run's.
    assert phases["after freeing"]["peak_RssAnon_mb"] < phases["holding 200 MB"]["peak_RssAnon_mb"] - 150
    marks = [m["at"] for m in result["marks"]]
    assert marks == ["start of imports and setup", "start of holding 200 MB", "start of after freeing"]
