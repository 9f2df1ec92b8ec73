"""Building the command line costs no schema: `negtrain --help` imports no pydantic (the model
families behind `evaluate --family` are read when a value is checked), and `evaluate` bounds
`--bootstrap` as `compare` and a recipe's `evaluation.bootstrap` do."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Literal

from conftest import REPO

from negtrain.cli import main
from negtrain.config import MAX_BOOTSTRAP, families, register_family, unregister_family
from negtrain.config.model import NliModelConfig


def test_help_imports_no_pydantic():
    script = (
        "import contextlib, io, json, sys\n"
        "from negtrain.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        "        main(['--help'])\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print(json.dumps([m for m in ('pydantic', 'yaml', 'negtrain.config') if m in sys.modules]))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_family_choices_are_the_table_when_the_value_is_checked(capsys):
    assert main(["evaluate", "--model", "m", "--family", "nlii"]) == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'nlii'" in err and ", ".join(repr(f) for f in families()) in err

    class LateSection(NliModelConfig):  # registered after the parser's module was imported
        family: Literal["late"] = "late"

    name = register_family(LateSection)
    try:
        # Past argparse's choice check, the command's own checks answer (before any model loads).
        assert main(["evaluate", "--model", "m", "--family", name, "--protocol", "p", "--shots", "1"]) == 2
        err = capsys.readouterr().err
        assert "invalid choice" not in err and "--protocol names its own benchmarks" in err
    finally:
        unregister_family(name)


def test_evaluate_bootstrap_is_bounded_like_compare(capsys, tmp_path):
    predictions = tmp_path / "p.jsonl"
    predictions.write_text("")
    code = main(["evaluate", "--benchmark", "scone", "--split", "test", "--predictions", str(predictions),
                 "--bootstrap", str(MAX_BOOTSTRAP + 1)])
    assert code == 2
    assert f"--bootstrap must be between 0 and {MAX_BOOTSTRAP}" in capsys.readouterr().err


def test_a_card_takes_bootstrap_into_its_recipe_and_refuses_what_it_cannot_use(data_dir, minilm_path, tmp_path):
    """--bootstrap and --bootstrap-seed with --model reach the card's recipe (they were once ignored
    there); --json and --allow-missing, which a card on the hf backend cannot honour, are refused."""
    import yaml

    from negtrain.cli import main

    out = tmp_path / "card"
    assert main(["evaluate", "--model", minilm_path, "--family", "nli", "--benchmarks", "monli", "--out", str(out),
                 "--bootstrap", "0", "--bootstrap-seed", "7", "--trainer.limit_val_batches=1",
                 "--trainer.enable_progress_bar=false"]) == 0
    evaluation = yaml.safe_load((out / "recipe.yaml").read_text())["evaluation"]
    assert (evaluation["bootstrap"], evaluation["bootstrap_seed"]) == (0, 7)
    record = next(line for line in (out / "metrics.jsonl").read_text().splitlines())
    assert '"ci95"' not in record  # no resamples, no interval
    for flag in ("--json", "--allow-missing"):
        assert main(["evaluate", "--model", minilm_path, "--family", "nli", "--benchmarks", "monli",
                     "--out", str(tmp_path / flag), flag]) == 2
