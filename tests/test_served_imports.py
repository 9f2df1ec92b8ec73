"""A served card imports neither Lightning nor the training floor: it loads no model and runs no
Trainer; nor torchmetrics' metric families (audio through scipy.signal, text, image), of which the
metrics use only the ``Metric`` base (negtrain/metrics/torchmetrics_core.py). Checked in a process of its own (an in-process test would see what earlier tests
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


#: What an evaluation imports that it does not use.
UNUSED_ON_EVALUATION = ("lightning", "pytorch_lightning", "negtrain.training", "torchmetrics.functional",
                        "torchmetrics.audio", "torchmetrics.text", "torchmetrics.image", "scipy.signal")

#: The modules of an evaluation that only evaluates: the card, its scoring through a backend, the
#: backends, scoring a predictions file, the protocols' tables, every metric.
EVALUATION_MODULES = (
    "negtrain.evaluation.card", "negtrain.evaluation.card_run", "negtrain.evaluation.card_render",
    "negtrain.evaluation.served", "negtrain.evaluation.predictions", "negtrain.evaluation.protocol",
    "negtrain.evaluation.across_splits", "negtrain.serving.in_process", "negtrain.serving.openai",
    "negtrain.data.eval_set", "negtrain.data.scoring", "negtrain.metrics.multiple_choice",
    "negtrain.metrics.cloze", "negtrain.metrics.mlm", "negtrain.metrics.scone", "negtrain.metrics.condaqa",
    "negtrain.evaluation.compare", "negtrain.runs.seeds", "negtrain.view.site_data",
)


def test_the_evaluation_modules_import_no_lightning_and_no_unused_torchmetrics():
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    code = "import importlib, json, sys\n" \
           f"for m in {EVALUATION_MODULES!r}: importlib.import_module(m)\n" \
           "print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    modules = json.loads(done.stdout.splitlines()[-1])
    assert "negtrain.metrics.base" in modules and "torchmetrics.metric" in modules
    for name in UNUSED_ON_EVALUATION:
        assert _imported(name, modules) == [], name


def test_torchmetrics_imported_later_is_whole_and_shares_the_metric_base():
    """After the metrics took torchmetrics' ``Metric`` alone, a later ``import torchmetrics`` (as
    Lightning's, when training) runs the whole package, with that very class as its ``Metric``."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    code = """
import sys
from negtrain.metrics.base import ExampleMetric
from negtrain.metrics.torchmetrics_core import Metric, dim_zero_cat
assert "torchmetrics.functional" not in sys.modules
import torch, torchmetrics
import lightning.pytorch
assert torchmetrics.Metric is Metric and issubclass(ExampleMetric, torchmetrics.Metric)
assert "torchmetrics.functional" in sys.modules and hasattr(torchmetrics, "MetricCollection")
acc = torchmetrics.classification.BinaryAccuracy()
acc.update(torch.tensor([1, 0, 1, 1]), torch.tensor([1, 0, 0, 1]))
assert float(acc.compute()) == 0.75
assert dim_zero_cat([torch.tensor([1]), torch.tensor([2, 3])]).tolist() == [1, 2, 3]
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("ok")


def test_a_served_card_imports_no_lightning_and_nothing_of_training(scone_cut, tmp_path):  # noqa: F811
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    with Scripted() as server:
        done = subprocess.run([sys.executable, "-c", CARD, "evaluate", "--model", "served-model", "--backend", "openai",
                               "--base-url", server.url, "--benchmarks", "scone", "--out", str(tmp_path / "card")],
                              env=env, capture_output=True, text=True, timeout=300)
        # the checks (log-probabilities offered: one request; aligned: three; two spot checks: four), then each example's two labels
        assert len(server.requests) == 1 + 3 + 2 * 2 + 18 * 2
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["code"] == 0
    assert (tmp_path / "card" / "predictions" / "scone-test-validate.jsonl").is_file()
    for name in UNUSED_ON_EVALUATION:
        assert _imported(name, result["modules"]) == [], name
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
    for name in UNUSED_ON_EVALUATION:
        assert _imported(name, result["modules"]) == [], name
    assert "negtrain.evaluation.served" in result["modules"]
