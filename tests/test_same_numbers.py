"""perf/same_numbers.py's comparison, on hand-written run outputs: what it drops (timing fields,
time columns, the run's own folder, the commit) and what it still catches (any other value, a
file on one side only, a file no rule covers)."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest

from conftest import REPO


@pytest.fixture(scope="module")
def same_numbers():
    spec = importlib.util.spec_from_file_location("same_numbers", REPO / "perf" / "same_numbers.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["same_numbers"] = module  # dataclasses look their module up by name
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules["same_numbers"]


def _line(**fields) -> str:
    return json.dumps(fields) + "\n"


def test_timing_fields_are_dropped_at_any_depth_and_nothing_else(same_numbers):
    record = {"metrics": {"accuracy": 0.5}, "eval_seconds": 2.9, "train_examples_per_second": 24.3,
              "sources": {"scone/train": {"examples": 561, "load_seconds": 0.1}}, "requests": {"sent": 18, "cached": 0}}
    assert same_numbers.drop_timing(record) == {"metrics": {"accuracy": 0.5}, "sources": {"scone/train": {"examples": 561}},
                                                "requests": {"sent": 18, "cached": 0}}
    a = _line(metrics={"accuracy": 0.5}, eval_seconds=2.9) + _line(metrics={"loss": 0.69}, train_seconds=26.3)
    b = _line(metrics={"accuracy": 0.5}, eval_seconds=3.4) + _line(metrics={"loss": 0.69}, train_seconds=30.1)
    assert same_numbers.compare_json_lines(a.encode(), b.encode()) is None
    c = _line(metrics={"accuracy": 0.5}, eval_seconds=2.9) + _line(metrics={"loss": 0.691}, train_seconds=26.3)
    assert same_numbers.compare_json_lines(a.encode(), c.encode()) == "line 2: metrics.loss: 0.69 vs 0.691"
    # A served card's request counts are results too: the same from an empty cache.
    d = _line(requests={"sent": 18, "cached": 0})
    e = _line(requests={"sent": 17, "cached": 1})
    assert same_numbers.compare_json_lines(d.encode(), e.encode()) == "line 1: requests.cached: 0 vs 1"
    assert same_numbers.compare_json_lines(a.encode(), a.splitlines()[0].encode()) == "2 lines vs 1"


def test_a_cards_time_columns_are_dropped_and_every_other_cell_kept(same_numbers):
    card = ("# card\n\n| benchmark | accuracy | n | seconds | examples/s | tokens generated |\n|---|---|---|---|---|---|\n"
            "| scone | 0.5000 | 16 | {s} | {r} | 256 |\n\nseconds are wall time\n")
    a, b = card.format(s="0.069", r="231.9"), card.format(s="0.1", r="160.0")
    assert same_numbers.drop_time_columns(a) == (
        "# card\n\n| benchmark | accuracy | n | tokens generated |\n|---|---|---|---|\n| scone | 0.5000 | 16 | 256 |\n\nseconds are wall time\n")
    assert same_numbers.compare_markdown(a.encode(), b.encode()) is None
    c = a.replace("| 256 |", "| 255 |")
    assert same_numbers.compare_markdown(a.encode(), c.encode()).startswith("line 5:")


def test_the_runs_folder_the_commit_and_the_servers_port_are_normalized(same_numbers, tmp_path):
    text = (f"python -m negtrain fit --output-dir {tmp_path}/fit/run\n- code: negtrain 0.1.0, git 4abb74bec2c6 with uncommitted changes; Python\n"
            "    base_url: http://127.0.0.1:35715/v1\n")
    assert same_numbers.normalize(text.encode(), tmp_path) == (
        b"python -m negtrain fit --output-dir <OUTDIR>/fit/run\n- code: negtrain 0.1.0, git <commit>; Python\n"
        b"    base_url: http://127.0.0.1:<port>/v1\n")


def _write(root, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text.replace("ROOT", str(root)), encoding="utf-8")


def test_compare_passes_two_runs_that_differ_only_in_time_place_and_commit(same_numbers, tmp_path, capsys):
    common = {"predictions/scone-test-validate.jsonl": _line(id="a", prediction="yes"),
              "recipe.yaml": "model: {name: x}\n", "provenance.json": "{}", ".negtrain.lock": "pid"}
    before, after = tmp_path / "before", tmp_path / "after"
    _write(before / "card" / "run", {**common, "metrics.jsonl": _line(metrics={"accuracy": 0.5}, eval_seconds=1.0),
                                     "card.md": "| n | seconds |\n|---|---|\n| 16 | 1.0 |\n- code: git 4abb74bec2c6\n",
                                     "command.txt": "evaluate --out ROOT/card/run\n"})
    _write(after / "card" / "run", {**common, "metrics.jsonl": _line(metrics={"accuracy": 0.5}, eval_seconds=9.0),
                                    "card.md": "| n | seconds |\n|---|---|\n| 16 | 9.0 |\n- code: git 0123456789ab\n",
                                    "command.txt": "evaluate --out ROOT/card/run\n"})
    assert same_numbers.compare(before, after) == 0
    out = capsys.readouterr().out
    assert "| card | predictions, byte for byte | 1 | identical |" in out
    assert "| card | metrics.jsonl, timing fields aside | 1 | identical |" in out


@pytest.mark.parametrize("change,expected", [
    ({"predictions/scone-test-validate.jsonl": _line(id="a", prediction="no")}, "predictions/scone-test-validate.jsonl: sha256"),
    ({"metrics.jsonl": _line(metrics={"accuracy": 0.25}, eval_seconds=1.0)}, "metrics.jsonl: line 1: metrics.accuracy: 0.5 vs 0.25"),
    ({"predictions/neqa-test-validate.jsonl": _line(id="b")}, "predictions/neqa-test-validate.jsonl: only after"),
    ({"notes.txt": "new"}, "files no rule covers"),
])
def test_compare_fails_on_any_other_difference(same_numbers, tmp_path, capsys, change, expected):
    files = {"predictions/scone-test-validate.jsonl": _line(id="a", prediction="yes"),
             "metrics.jsonl": _line(metrics={"accuracy": 0.5}, eval_seconds=1.0)}
    _write(tmp_path / "before" / "card" / "run", files)
    _write(tmp_path / "after" / "card" / "run", {**files, **change})
    assert same_numbers.compare(tmp_path / "before", tmp_path / "after") == 1
    assert expected in capsys.readouterr().out
