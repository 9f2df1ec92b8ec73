"""The command line answers quickly because its quick answers import no torch, Lightning,
transformers or torchmetrics (ARCHITECTURE.md, "Imports"), and the latency benchmark's recorded
result shows every command under the limit.

Timing itself is left to perf/cli_latency.py (on a shared machine a wall-clock assertion would be
flaky); what makes the answers fast is checked here exactly.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from conftest import REPO

HEAVY = ("torch", "lightning", "transformers", "torchmetrics", "peft", "datasets", "wandb")


def _latency_script():
    spec = importlib.util.spec_from_file_location("cli_latency", REPO / "perf" / "cli_latency.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


COMMANDS = _latency_script().COMMANDS


@pytest.mark.parametrize("what,argv,expected", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_a_quick_answer_imports_no_heavy_library(what, argv, expected):
    script = (
        "import contextlib, io, json, sys\n"
        "from negtrain.cli import main\n"
        "out, err = io.StringIO(), io.StringIO()\n"
        "with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):\n"
        "    try:\n"
        f"        code = main({argv!r})\n"
        "    except SystemExit as exc:  # argparse's --help\n"
        "        code = exc.code\n"
        f"print(json.dumps({{'code': code, 'heavy': [m for m in {HEAVY!r} if m in sys.modules], 'err': err.getvalue()}}))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["code"] == expected, result["err"]
    if expected == 2:
        assert result["err"].startswith("error: ") and result["err"].count("\n") == 1, result["err"]
    assert result["heavy"] == [], f"`negtrain {' '.join(argv)}` imported {result['heavy']}"


def test_the_recorded_latencies_cover_every_command_and_are_under_the_limit():
    recorded = json.loads((REPO / "perf" / "results" / "cli_latency.json").read_text())
    assert recorded["limit_seconds"] == 1.5
    rows = {r["command"]: r for r in recorded["commands"]}
    assert sorted(rows) == sorted(what for what, _, _ in COMMANDS), "re-run perf/cli_latency.py"
    for what, argv, _ in COMMANDS:
        assert rows[what]["args"] == argv
        assert rows[what]["runs"] >= 5
        assert rows[what]["median_wall_seconds"] < 1.5, f"{what}: {rows[what]['median_wall_seconds']} s"
