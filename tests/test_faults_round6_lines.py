"""Issue 55's tracebacks and hang, each now one clear line (or, for a reader that went away, a
quiet end): output to a closed pipe or a full device, a metrics line whose ``metrics`` is no
object, a stored answer with a lone surrogate, a seed out of range, a FIFO or device given as an
input file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from negtrain.cli import main
from test_view import write_card
from test_view_faults import monli_lines, one_error, view

REPO = Path(__file__).resolve().parents[1]


def _negtrain(*args: str, **kwargs) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    return subprocess.Popen([sys.executable, "-m", "negtrain", *args], env=env, stderr=subprocess.PIPE, text=True, **kwargs)


@pytest.mark.parametrize("command", [["evaluate", "--list"], ["recipes"]])
def test_a_closed_pipe_ends_quietly(command):
    proc = _negtrain(*command, stdout=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before the first line (`| head -1` after its line)
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 141, err
    assert err == ""


@pytest.mark.parametrize("command", [["evaluate", "--list"], ["recipes"], ["env"]])
def test_a_full_device_is_one_line(command):
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full on this system")
    with open("/dev/full", "w") as full:
        proc = _negtrain(*command, stdout=full)
        err = proc.stderr.read()
        code = proc.wait(timeout=120)
    assert code == 1 and "Traceback" not in err, err
    assert err.splitlines() == ["error: cannot write the output: No space left on device (a full disk or device)"]


def test_a_metrics_line_whose_metrics_is_a_list_names_file_and_line(tmp_path, capsys):
    card = write_card(tmp_path / "a", monli_lines(1), benchmark="monli")
    record = json.loads((card / "metrics.jsonl").read_text())
    record["metrics"] = [1, 2]
    (card / "metrics.jsonl").write_text(json.dumps(record) + "\n")
    line = one_error(view(capsys, card, "--out", tmp_path / "site")[2])
    assert f"{card / 'metrics.jsonl'}:1: metrics is list [1, 2], not an object of metric names and values" in line


def test_a_stored_answer_with_a_lone_surrogate_is_shown(tmp_path, capsys):
    lines = [dict(line, response="cut inside an emoji \ud83d") for line in monli_lines(1)]
    card = write_card(tmp_path / "a", lines, benchmark="monli")
    site = tmp_path / "site"
    code, _, err = view(capsys, card, "--out", site)
    assert code == 0, err
    page = (site / "data" / "s0e0.js").read_text(encoding="utf-8")
    assert "cut inside an emoji \\ud83d" in page  # its JSON escape, which the page reads as the same string
    data = json.loads(page.split("]=", 1)[1].rstrip().removesuffix(";"))
    assert set(data["examples"]["response"]) == {"cut inside an emoji \ud83d"}


@pytest.mark.parametrize("seed,says", [("18446744073709551616", "18446744073709551616 is out of range: give a whole number from 0 to 4294967295"),
                                       ("-1", "-1 is out of range"), ("1e3", "'1e3' is not a whole number")])
def test_tiny_model_seed_out_of_range_is_one_line(tmp_path, capsys, seed, says):
    assert main(["tiny-model", str(tmp_path / "m"), f"--seed={seed}"]) == 2
    assert says in one_error(capsys.readouterr().err)
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_fifo_or_device_as_predictions_is_refused_not_waited_on(tmp_path, kind):
    if kind == "fifo":
        path = tmp_path / "predictions.jsonl"
        os.mkfifo(path)
    else:
        path = Path("/dev/zero")
    proc = _negtrain("evaluate", "--benchmark", "monli", "--split", "test", "--predictions", str(path), stdout=subprocess.PIPE)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"evaluate waited on the {kind}")
    assert proc.returncode == 2
    said = "a named pipe (FIFO)" if kind == "fifo" else "a device"
    assert err.splitlines() == [f"error: --predictions {path}: is {said}, not a file; give a file (reading it could wait forever)"]


@pytest.mark.parametrize("limit", ["0", "0.0"])
def test_a_card_limited_to_no_batch_is_refused(lm_env, tmp_path, capsys, limit):
    """A card of ``--trainer.limit_val_batches=0`` read "0 of 20", bootstrapped over 20 and printed
    ``tinad/test: None``."""
    out = tmp_path / "card"
    assert main(["evaluate", "--model", str(lm_env["llama"]), "--benchmarks", "tinad", "--out", str(out),
                 f"--trainer.limit_val_batches={limit}"]) == 2
    captured = capsys.readouterr()
    assert "None" not in captured.out
    assert "--trainer.limit_val_batches=0: a report card would score no example" in one_error(captured.err)
    assert not (out / "card.md").exists()
