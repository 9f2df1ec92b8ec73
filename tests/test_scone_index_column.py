"""ScoNe's unnamed first column is the row number (issue 36, case 21): a row whose index holds
anything else (200,000 characters, a shifted or repeated number, nothing) is a malformed row,
named by file, line and field, not read as the next contrast set's member."""

from __future__ import annotations

import csv
import io

import pytest

from negtrain.benchmarks.registry import get_benchmark
from negtrain.cli import main
from negtrain.core.errors import DataError
from test_malformed import valid_files
from test_scone_nlg import write_nlg

ONE_SCOPED = "selenashe/ScoNe/scone_nli/test/one_scoped.csv"


@pytest.fixture
def mirror(tmp_path, monkeypatch):
    root = tmp_path / "data"
    for rel, text in valid_files().items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(root))
    return root


def _with_index(text: str, row: int, index: str) -> str:
    rows = list(csv.reader(io.StringIO(text)))
    rows[1 + row][0] = index
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()


def test_the_fixture_and_the_mirror_load(mirror):
    assert len(get_benchmark("scone").load("test")) == 6 * 12


@pytest.mark.parametrize(("index", "says"), [
    ("x" * 200_000, "a 200,000-character value starting 'xxxxxxxxxxxxxxxxxxxx' is not the row number 2"),
    ("3", "'3' is not the row number 2"),
    ("", "'' is not the row number 2"),
    ("02", "'02' is not the row number 2"),
    (" 2", "' 2' is not the row number 2"),
])
def test_an_index_that_is_not_the_row_number_is_a_malformed_row(mirror, index, says):
    path = mirror / ONE_SCOPED
    path.write_text(_with_index(path.read_text(encoding="utf-8"), 2, index), encoding="utf-8")
    with pytest.raises(DataError) as bad:
        get_benchmark("scone").load("test")
    assert str(bad.value) == f"{path}:4: field '' (the index column): {says}"


def test_a_repeated_row_is_named_where_the_numbers_part(mirror):
    path = mirror / ONE_SCOPED
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text("".join(lines[:4] + [lines[3]] + lines[4:]), encoding="utf-8")  # data row 2 twice
    with pytest.raises(DataError, match=rf"^{path}:5: field '' \(the index column\): '2' is not the row number 3$"):
        get_benchmark("scone").load("test")


def test_a_file_without_the_index_column_is_named(mirror):
    path = mirror / ONE_SCOPED
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join(line.split(",", 1)[1] for line in lines) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=rf"^{path}:1: no index column"):
        get_benchmark("scone").load("test")


def test_the_command_line_says_it_in_one_line(mirror, tmp_path, capsys):
    path = mirror / ONE_SCOPED
    path.write_text(_with_index(path.read_text(encoding="utf-8"), 5, "y" * 200_000), encoding="utf-8")
    preds = tmp_path / "predictions.jsonl"
    preds.write_text('{"id": "scone/test/no_negation/0", "prediction": "entailment"}\n')
    code = main(["evaluate", "--benchmark", "scone", "--split", "test", "--predictions", str(preds), "--allow-missing"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert err[0] == f"error: {path}:7: field '' (the index column): a 200,000-character value starting 'yyyyyyyyyyyyyyyyyyyy' is not the row number 5"


def test_scone_nlg_ids_are_the_row_number_so_its_index_must_be_too(tmp_path, monkeypatch):
    path = write_nlg(tmp_path / "data")
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(tmp_path / "data"))
    assert [e.id for e in get_benchmark("scone_nlg").load("test")][:2] == ["scone_nlg/test/0", "scone_nlg/test/1"]
    path.write_text(_with_index(path.read_text(encoding="utf-8"), 1, "7"), encoding="utf-8")
    with pytest.raises(DataError, match=rf"^{path}:3: field '' \(the index column\): '7' is not the row number 1$"):
        get_benchmark("scone_nlg").load("test")
