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


def test_a_quick_answer_loads_no_more_than_the_standard_library_yaml_and_negtrain():
    """What a quick answer costs is the modules it loads: the latency figures themselves are
    perf/cli_latency.py's (a timed test is flaky on a shared machine). Beyond the heavy libraries
    above, a quick answer loads no third-party package but PyYAML and pydantic (the recipe schema),
    so a new import of, say, numpy, scipy or matplotlib on the command line's quick path fails here."""
    script = (
        "import sys, json, contextlib, io\n"
        "before = set(sys.modules)\n"
        "from negtrain.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
        "    main(['fit', '--recipe', 'scone_minilm', '--model.lerning_rate=3e-5'])\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in set(sys.modules) - before})))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    loaded = set(json.loads(done.stdout.strip().splitlines()[-1]))
    third_party = {m for m in loaded - set(sys.stdlib_module_names) if not m.startswith("_")}
    # cython_runtime: the module object a compiled extension (PyYAML's _yaml) registers
    allowed = {"negtrain", "yaml", "pydantic", "pydantic_core", "typing_extensions", "annotated_types", "typing_inspection", "cython_runtime"}
    assert third_party <= allowed, f"a quick answer loaded {sorted(third_party - allowed)}"


@pytest.mark.parametrize("argv", [
    ["export", "--run", "{run}", "--out", "{full}"],  # --out exists and is not empty
    ["push", "--run", "{run}", "--repo-id", "me/model"],  # HF_HUB_OFFLINE
    ["push", "--run", "{run}", "--repo-id", "not-an-id"],
], ids=["export to a full folder", "push offline", "push to a malformed id"])
def test_export_and_push_refuse_a_real_run_before_torch_loads(argv, fake_run, tmp_path):
    # A real run directory (its checkpoints, recipe and records are read): the refusal comes from
    # the checks that need no model, so it imports none of the heavy libraries (once: 17 s).
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("mine\n")
    argv = [a.format(run=fake_run, full=tmp_path / "full") for a in argv]
    script = (
        "import contextlib, io, json, sys\n"
        "from negtrain.cli import main\n"
        "err = io.StringIO()\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):\n"
        f"    code = main({argv!r})\n"
        f"print(json.dumps({{'code': code, 'heavy': [m for m in {HEAVY!r} if m in sys.modules], 'err': err.getvalue()}}))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["code"] == 2 and result["err"].startswith("error: "), result["err"]
    assert result["heavy"] == [], f"`negtrain {' '.join(argv)}` imported {result['heavy']}"
    assert (tmp_path / "full" / "notes.txt").read_text() == "mine\n"  # nothing of the user's touched


def test_a_report_reads_its_run_without_the_model_code(fake_run):
    # report plots records: reading them must not import the objectives' model code (Lightning),
    # which an eval set no benchmark registers (the cue-masking corpus) once pulled in (39 s).
    from negtrain.runs.reading import is_count

    script = ("import sys, json\nfrom negtrain.runs.reading import is_count\n"
              "print(json.dumps([is_count('cue_corpus/heldout', 'n_masked'), is_count('other/x', 'n'), "
              "[m for m in ('torch', 'lightning') if m in sys.modules]]))\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=120)
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [True, False, []], done.stderr
    assert is_count("cue_corpus/heldout", "n_cues") and not is_count("cue_corpus/heldout", "mlm_loss")
