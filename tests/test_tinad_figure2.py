"""TINAD's Figure 2 (accuracy per pattern) drawn: in a card (card.md's table and figure2.png) and
in a report of several runs side by side, the numbers by hand; the breakdown's details stay in
metrics.jsonl, out of the report's tables."""

from __future__ import annotations

import json
import shutil

import pytest
from PIL import Image

from negtrain import cli
from negtrain.evaluation.predictions import score_file
from negtrain.evaluation.scored_file import format_scored
from negtrain.io.records import EvalRecord
from tinad_fixture import row, write_split

#: (pattern, gold labels of one test id's four cells) and the prediction of every sentence:
#: pattern 1 all right (4/4), pattern 2 half right (2/4), pattern 5 all wrong (0/4).
GROUPS = [(1, True), (2, None), (5, False)]


def _rows_and_predictions() -> tuple[list[dict], list[str]]:
    rows, predictions = [], []
    for tid, (pattern, right) in enumerate(GROUPS):
        antonymy = pattern in (2, 4)
        cells = [("input_affirmation", not antonymy), ("input_negation", antonymy), ("distractor_affirmation", False),
                 ("distractor_negation", True)]
        for k, (cell, label) in enumerate(cells):
            rows.append(row(tid, pattern, cell, label, f"s{tid}{k}."))
            good = right if right is not None else k < 2
            predictions.append("True" if label == good else "False")
    return rows, predictions


@pytest.fixture
def tinad_record(tmp_path, monkeypatch):
    rows, predictions = _rows_and_predictions()
    write_split(tmp_path / "data", "test", rows)
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(tmp_path / "data"))
    path = tmp_path / "predictions.jsonl"
    path.write_text("".join(json.dumps({"id": f"tinad/test/{i}", "prediction": p}) + "\n" for i, p in enumerate(predictions)))
    scored = score_file("tinad", "test", path, bootstrap=0)
    assert scored.metrics["accuracy/pattern/01"] == 1.0 and scored.metrics["accuracy/pattern/02"] == 0.5
    # evaluate --predictions' table leaves the details to --json, and says how many
    details = [k for k in scored.metrics if k.startswith(("pattern/", "confusion/", "coherent/", "incoherent/"))]
    text = format_scored(scored)
    assert f"(and {len(details)} numbers of the breakdown" in text and "confusion/" not in text and "accuracy/pattern/01" in text
    return {"epoch": 0, "stage": "validate", "benchmark": "tinad", "split": "test", "metrics": scored.metrics, "uncertainty": {}}


def _rows_of(png) -> list[str]:
    with Image.open(png) as img:
        assert img.format == "PNG"
        return img.text["negtrain:rows"].split("|")


def _figure2_lines(text: str) -> list[list[str]]:
    section = text[text.index("## TINAD Figure 2: accuracy per pattern"):].splitlines()
    return [[c.strip() for c in line.strip("|").split("|")] for line in section if line.startswith("| ")]


def test_a_card_shows_figure_2_as_a_table_and_a_figure(tinad_record, tmp_path):
    from negtrain.evaluation.card import write_card

    out = tmp_path / "card"
    out.mkdir()
    write_card(out, [EvalRecord(tinad_record), EvalRecord(dict(tinad_record, variant="chat/test"))], "m", "causal_lm", [])
    header, *rows = _figure2_lines((out / "card.md").read_text())
    assert header[:3] == ["scored", "#01 Synonymy1", "#02 Antonymy1"] and header[-1] == "#11 Result" and len(header) == 12
    # by hand: #01 4/4, #02 2/4, #05 0/4 (a real 0); the patterns not scored are empty, never 0
    assert rows[0] == ["tinad/test", "1.0000", "0.5000", "-", "-", "0.0000", *["-"] * 6]
    assert rows[1][0] == "tinad/test (chat/test)" and rows[1][1:] == rows[0][1:]
    assert "Drawn in `figure2.png`" in (out / "card.md").read_text()
    assert _rows_of(out / "figure2.png") == ["tinad/test", "tinad/test (chat/test)"]
    # A card without TINAD has neither, and a rerun leaves no stale figure.
    scone = {"epoch": 0, "stage": "validate", "benchmark": "scone", "split": "test", "metrics": {"accuracy": 0.5, "n": 4.0}}
    write_card(out, [EvalRecord(scone)], "m", "nli", [])
    assert "Figure 2" not in (out / "card.md").read_text() and not (out / "figure2.png").exists()


def test_a_report_puts_several_runs_side_by_side_without_the_details(fake_run, tinad_record, tmp_path):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for run, pattern2 in ((a, 0.5), (b, 0.75), (c, 0.25)):
        shutil.copytree(fake_run, run)
        line = dict(tinad_record, epoch=2, stage="fit", metrics=dict(tinad_record["metrics"], **{"accuracy/pattern/02": pattern2}))
        with (run / "metrics.jsonl").open("a") as f:
            f.write(json.dumps(line) + "\n")
    assert cli.main(["report", "--run", str(a), "--run", str(b), "--run", str(c)]) == 0
    out = a / "report-vs-b-c"
    summary = (out / "summary.md").read_text()
    _, first, second, third = _figure2_lines(summary)
    assert first[:3] == ["a: tinad/test", "1.0000", "0.5000"] and second[:3] == ["b: tinad/test", "1.0000", "0.7500"]
    assert third[:3] == ["c: tinad/test", "1.0000", "0.2500"]
    assert _rows_of(out / "figure2.png") == ["a: tinad/test", "b: tinad/test", "c: tinad/test"]
    assert "| tinad/test | accuracy | 0." in summary and "## Best epoch per metric: c" in summary
    # The per-pattern breakdown and the authors' counts are in metrics.jsonl, not in the tables.
    assert "pattern/01/coherence" in tinad_record["metrics"] and "confusion/all/TP" in tinad_record["metrics"]
    assert "| tinad/test | accuracy/pattern/01 |" in summary
    assert "pattern/01/coherence" not in summary and "confusion/" not in summary and "coherent/" not in summary


def test_the_viewer_is_told_which_numbers_are_details():
    from negtrain.view.site_data import metric_info

    info = metric_info("tinad", ["accuracy", "accuracy/pattern/01", "accuracy/non_verbal_input", "pattern/01/coherence", "confusion/all/TP"])
    assert [k for k, v in info.items() if v["detail"]] == ["pattern/01/coherence", "confusion/all/TP"]
    assert info["confusion/all/TP"]["count"] and not info["pattern/01/coherence"]["count"]


def test_the_per_epoch_table_counts_the_details_instead_of_printing_them(tinad_record):
    from negtrain.benchmarks.registry import get_benchmark
    from negtrain.data.eval_set import EvalResult
    from negtrain.training.recorder import format_table

    metrics = tinad_record["metrics"]
    details = [k for k in metrics if k.startswith(("pattern/", "confusion/", "coherent/", "incoherent/"))]
    text = format_table("validate:", [EvalResult("tinad/test", metrics, None)], [get_benchmark("tinad").is_count], width=100)
    assert "accuracy/pattern/02" in text and "coherence/input" in text and "accuracy/non_verbal_input" not in text  # none in the fixture
    assert "confusion/" not in text and "pattern/01/" not in text
    assert f"and {len(details)} numbers of the breakdown" in " ".join(text.split())
