"""ScoNe and MoNLI read from the mirrored upstream files: counts, labels, ids and groups."""

from __future__ import annotations

from collections import Counter

import pytest

from negtrain.benchmarks.registry import get_benchmark
from negtrain.benchmarks.scone import CONDITIONS
from negtrain.core.errors import ConfigError, DataError


def test_scone_test_split(data_dir):
    examples = get_benchmark("scone").load("test")
    assert len(examples) == 6 * 200
    assert Counter(e.subset for e in examples) == {c: 200 for c in CONDITIONS}
    assert Counter(e.label for e in examples) == {"entailment": 600, "not_entailment": 600}
    groups = Counter(e.group for e in examples)
    assert len(groups) == 200 and set(groups.values()) == {6}
    first = examples[0]
    assert first.id == "scone/test/no_negation/0"
    # Every id names its condition and its 0-based data row, and the row is the group.
    for e in examples:
        _, split, condition, row = e.id.split("/")
        assert (split, condition) == ("test", e.subset) and e.group == f"scone/test/{row}"


def test_scone_reads_edited_columns_except_one_scoped(data_dir):
    by_id = {e.id: e for e in get_benchmark("scone").load("train")}
    assert len(by_id) == 6 * 1002
    # Upstream row 0: one_scoped holds the original pair; no_negation holds the edited pair
    # with "not" removed and the label flipped (entailment -> neutral).
    assert by_id["scone/train/one_scoped/0"].inputs[0] == "There is a man not wearing a hat staring at people on a subway."
    assert by_id["scone/train/one_scoped/0"].label == "entailment"
    assert by_id["scone/train/no_negation/0"].inputs == (
        "There is a man wearing a hat staring at people on a subway.",
        "There is a man wearing a sunhat staring at people on a subway.",
    )
    assert by_id["scone/train/no_negation/0"].label == "not_entailment"


@pytest.mark.parametrize("split,count", [("train", 1002), ("test", 200), ("pmonli", 1476)])
def test_monli_splits(data_dir, split, count):
    examples = get_benchmark("monli").load(split)
    assert len(examples) == count
    assert {e.label for e in examples} == {"entailment", "not_entailment"}
    assert [e.id for e in examples[:2]] == [f"monli/{split}/0", f"monli/{split}/1"]


def test_monli_first_row(data_dir):
    first = get_benchmark("monli").load("train")[0]
    assert first.inputs == (
        "There is a man not wearing a hat staring at people on a subway.",
        "There is a man not wearing a sunhat staring at people on a subway.",
    )
    assert first.label == "entailment"


def test_unknown_benchmark_and_split_suggest():
    with pytest.raises(ConfigError, match="did you mean 'scone'"):
        get_benchmark("sconee")
    with pytest.raises(ConfigError, match="did you mean 'test'"):
        get_benchmark("scone").load("tset")


def test_missing_file_names_where_it_looked_and_the_url(tmp_path, monkeypatch):
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(tmp_path / "mirror"))
    monkeypatch.setenv("NEGTRAIN_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(DataError) as err:
        get_benchmark("monli").load("test")
    msg = str(err.value)
    assert str(tmp_path / "mirror" / "atticusg/MoNLI/nmonli_test.jsonl") in msg
    assert str(tmp_path / "cache" / "atticusg/MoNLI/nmonli_test.jsonl") in msg
    assert "https://raw.githubusercontent.com/atticusg/MoNLI/main/nmonli_test.jsonl" in msg


def _mirror_with(tmp_path, monkeypatch, relpath: str, text: str):
    target = tmp_path / relpath
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(tmp_path))
    return target


def test_malformed_jsonl_row_names_file_line_and_field(tmp_path, monkeypatch):
    good = '{"sentence1": "A", "sentence2": "B", "gold_label": "entailment"}\n'
    bad = '{"sentence1": "A", "gold_label": "entailment"}\n'
    path = _mirror_with(tmp_path, monkeypatch, "atticusg/MoNLI/nmonli_test.jsonl", good + good + bad)
    with pytest.raises(DataError, match=rf"{path}:3: field 'sentence2' is missing"):
        get_benchmark("monli").load("test")


def test_bad_json_line(tmp_path, monkeypatch):
    path = _mirror_with(tmp_path, monkeypatch, "atticusg/MoNLI/nmonli_test.jsonl", '{"sentence1": "A",\n')
    with pytest.raises(DataError, match=rf"{path}:1: invalid JSON"):
        get_benchmark("monli").load("test")


def test_label_outside_label_set(tmp_path, monkeypatch):
    row = '{"sentence1": "A", "sentence2": "B", "gold_label": "maybe"}\n'
    path = _mirror_with(tmp_path, monkeypatch, "atticusg/MoNLI/nmonli_test.jsonl", row)
    with pytest.raises(DataError, match=rf"{path}:1: field 'gold_label': label 'maybe'"):
        get_benchmark("monli").load("test")


def test_csv_missing_column(tmp_path, monkeypatch, data_dir):
    # A ScoNe mirror where one condition file lost its gold_label_edited column.
    for condition in CONDITIONS:
        src = data_dir / "selenashe/ScoNe/scone_nli/test" / f"{condition}.csv"
        dst = tmp_path / "selenashe/ScoNe/scone_nli/test" / f"{condition}.csv"
        dst.parent.mkdir(parents=True, exist_ok=True)
        text = src.read_text(encoding="utf-8")
        if condition == "two_scoped":
            text = text.replace("gold_label_edited", "label_edited", 1)
        dst.write_text(text, encoding="utf-8")
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(tmp_path))
    with pytest.raises(DataError, match=r"two_scoped.csv:1: missing column\(s\) \['gold_label_edited'\]"):
        get_benchmark("scone").load("test")
