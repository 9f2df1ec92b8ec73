"""A path a command reads that is not there is answered "does not exist", at once: before the
command imports torch (issue 48: `fit --resume`, `view` and `compare` took 25 s under load to say
so, and `compare` called a missing path "neither a predictions file nor a run directory")."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import REPO

#: Each command with a path it reads, missing; `{missing}` is a path under the test's folder.
CASES = {
    "compare": (["compare", "{missing}", "{here}"], "A"),
    "compare B": (["compare", "{here}", "{missing}"], "B"),
    "view": (["view", "{here}", "{missing}"], "PATH"),
    "report": (["report", "--run", "{missing}"], "--run"),
    "report second run": (["report", "--run", "{here}", "--run", "{missing}"], "--run"),
    "fit --resume": (["fit", "--resume", "{missing}"], "--resume"),
    "validate --checkpoint": (["validate", "--recipe", "scone_minilm", "--checkpoint", "{missing}"], "--checkpoint"),
    "export": (["export", "--run", "{missing}", "--out", "{here}/out"], "--run"),
    "push": (["push", "--run", "{missing}", "--repo-id", "me/model"], "--run"),
    "env --constraints": (["env", "--constraints", "{missing}"], "--constraints"),
    "evaluate --predictions": (["evaluate", "--benchmark", "monli", "--split", "test", "--predictions", "{missing}"], "--predictions"),
}


def test_every_missing_path_is_named_as_missing_without_importing_torch(tmp_path):
    missing = tmp_path / "no-such-run"
    calls = {name: [a.format(missing=missing, here=tmp_path) for a in args] for name, (args, _) in CASES.items()}
    code = (
        "import contextlib, io, json, sys\nfrom negtrain import cli\n"
        "out = {}\n"
        f"for name, args in {calls!r}.items():\n"
        "    err = io.StringIO()\n"
        "    with contextlib.redirect_stderr(err):\n"
        "        code = cli.main(args)\n"
        "    out[name] = [code, err.getvalue()]\n"
        "out['heavy'] = [m for m in ('torch', 'lightning', 'transformers') if m in sys.modules]\n"
        "print(json.dumps(out))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert done.returncode == 0, done.stderr
    answers = json.loads(done.stdout.strip().splitlines()[-1])
    assert answers.pop("heavy") == []
    for name, (_, shown) in CASES.items():
        code, err = answers[name]
        assert (code, err) == (2, f"error: {shown} {missing}: does not exist\n"), name


def test_a_missing_folder_deep_in_a_path_names_the_nearest_one_that_exists(tmp_path):
    import pytest

    from negtrain.core.errors import ConfigError
    from negtrain.core.paths import check_input_path

    with pytest.raises(ConfigError, match=rf"^A {tmp_path}/a/b/c: does not exist \(the nearest folder that does: {tmp_path}\)$"):
        check_input_path(tmp_path / "a" / "b" / "c", "A")
    check_input_path(tmp_path, "A")  # there: no error
