"""A served card imports neither Lightning nor the training floor: it loads no model and runs no
Trainer. Checked in a process of its own (an in-process test would see what earlier tests
imported), against the scripted stand-in server (tests/scripted_server.py), through the modules
left in ``sys.modules`` when the card has finished."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from scripted_server import Scripted
from test_table_backend import scone_cut  # noqa: F401 (a fixture: ScoNe's test split cut to 3 rows a file)

ROOT = Path(__file__).resolve().parent.parent

CARD = """
import json, sys
from negtrain.cli import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def _imported(name: str, modules: list[str]) -> list[str]:
    return [m for m in modules if m == name or m.startswith(name + ".")]


def test_a_served_card_imports_no_lightning_and_nothing_of_training(scone_cut, tmp_path):  # noqa: F811
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    with Scripted() as server:
        done = subprocess.run([sys.executable, "-c", CARD, "evaluate", "--model", "served-model", "--backend", "openai",
                               "--base-url", server.url, "--benchmarks", "scone", "--out", str(tmp_path / "card")],
                              env=env, capture_output=True, text=True, timeout=300)
        # the two checks (log-probabilities offered: one request; aligned: three), then each example's two labels
        assert len(server.requests) == 1 + 3 + 18 * 2
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["code"] == 0
    assert (tmp_path / "card" / "predictions" / "scone-test-validate.jsonl").is_file()
    assert _imported("lightning", result["modules"]) == []
    assert _imported("pytorch_lightning", result["modules"]) == []
    assert _imported("negtrain.training", result["modules"]) == []
    assert "negtrain.evaluation.served" in result["modules"]  # the card did score through the served path


def test_a_transformers_card_loads_the_model_here_yet_imports_nothing_of_training(lm_world, scone_cut, tmp_path):  # noqa: F811
    """The in-process ``transformers`` backend answers the served path's requests: the model is
    loaded in this process, and still neither Lightning nor the training floor is imported."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run([sys.executable, "-c", CARD, "evaluate", "--model", str(lm_world["llama"]), "--backend", "transformers",
                           "--benchmarks", "scone", "--out", str(tmp_path / "card"), "--data.eval_batch_size=4"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["code"] == 0
    assert (tmp_path / "card" / "predictions" / "scone-test-validate.jsonl").is_file()
    assert "transformers" in result["modules"] and "negtrain.serving.in_process" in result["modules"]
    assert _imported("lightning", result["modules"]) == []
    assert _imported("pytorch_lightning", result["modules"]) == []
    assert _imported("negtrain.training", result["modules"]) == []
    assert "negtrain.evaluation.served" in result["modules"]
