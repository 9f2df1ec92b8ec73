"""The NLI negation benchmarks read from the data mirror: counts, labels, ids, groups, odd bytes."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest

from negtrain.benchmarks.registry import get_benchmark
from negtrain.benchmarks.files import HubSplit, resolve
from negtrain.core.errors import DataError

FIXTURES = Path(__file__).parent / "fixtures" / "data"


@pytest.fixture(autouse=True)
def mirror(monkeypatch):
    if not os.environ.get("NEGTRAIN_DATA_DIR"):
        pytest.fail("set NEGTRAIN_DATA_DIR to the shared data mirror")
    monkeypatch.setenv("NEGTRAIN_OFFLINE", "1")


NEGNLI = {
    "negnli-rte": {"entailment": 316, "not_entailment": 1184},
    "negnli-snli": {"neutral": 847, "contradiction": 405, "entailment": 248},
    "negnli-mnli": {"neutral": 589, "contradiction": 539, "entailment": 372},
}


@pytest.mark.parametrize("name", sorted(NEGNLI))
def test_negnli_all_reads_every_row(name):
    ex = get_benchmark(name).load("all")
    assert len(ex) == 1500
    assert Counter(e.label for e in ex) == NEGNLI[name]
    assert [e.id for e in ex] == [f"{name}/all/{i}" for i in range(1500)]
    assert [e.subset for e in ex[:6]] == ["Tneg-H", "T-Hneg", "Tneg-Hneg"] * 2
    assert Counter(e.subset for e in ex) == {"Tneg-H": 500, "T-Hneg": 500, "Tneg-Hneg": 500}
    groups = Counter(e.group for e in ex)
    assert len(groups) == 500 and set(groups.values()) == {3}
    assert ex[0].group == ex[2].group != ex[3].group


@pytest.mark.parametrize("name", sorted(NEGNLI))
def test_negnli_splits_are_by_group_and_deterministic(name):
    bench = get_benchmark(name)
    every = {e.id: e for e in bench.load("all")}
    split = {s: bench.load(s) for s in ("train", "test", "train85", "val15")}
    assert {s: len(v) for s, v in split.items()} == {"train": 1050, "test": 450, "train85": 1275, "val15": 225}
    for part in split.values():
        # Same ids and content as under `all`; whole groups only.
        assert all(every[e.id] == e for e in part)
        assert set(Counter(e.group for e in part).values()) == {3}
    train, test = ({e.group for e in split[s]} for s in ("train", "test"))
    assert not train & test and len(train | test) == 500
    assert not {e.group for e in split["train85"]} & {e.group for e in split["val15"]}
    assert [e.id for e in get_benchmark(name).load("test")] == [e.id for e in split["test"]]


def test_negnli_non_utf8_and_quotes_are_read_as_written():
    rte = {e.id: e for e in get_benchmark("negnli-rte").load("all")}
    text = " ".join(t for e in rte.values() for t in e.inputs)
    assert "Québec" in text and "£174,000" in text and "Hergé" in text and "Inácio" in text
    assert rte["negnli-rte/all/111"].inputs[0].endswith('recording "Les Paul & Friends."')
    mnli = {e.id: e for e in get_benchmark("negnli-mnli").load("all")}
    assert mnli["negnli-mnli/all/1210"].inputs[0] == "I ”I believe so."
    assert mnli["negnli-mnli/all/240"].inputs[0] == 'I do not hope we shall have lots more adventures."'
    assert mnli["negnli-mnli/all/0"].label == "neutral"
    assert all("\r" not in t and "\t" not in t for e in mnli.values() for t in e.inputs)


def test_nannli():
    ex = get_benchmark("nannli").load("test")
    assert len(ex) == 258
    assert Counter(e.label for e in ex) == {"contradiction": 117, "entailment": 97, "neutral": 44}
    assert [e.id for e in ex] == [f"nannli/test/{i}" for i in range(258)]
    assert len({e.group for e in ex}) == 48
    assert ex[0].inputs == (
        "Not all people have had the opportunities you have had.",
        "Some people have not had the opportunities you have had.",
    )
    assert ex[0].subset == "not + quantifier"
    assert ex[0].meta["operations"] == ("Indefinite quantifier change", "Negator position change")
    assert ex[0].meta["quantification"] is True  # NaN-Quant (§5.2), not an operation
    assert Counter(e.subset for e in ex)["not + quantifier"] == 93
    # Table 9's denominators: the rows that apply an operation once (118 of the 124 with a
    # negator addition or deletion; the six with two are left out, as the paper's 0.364 = 43/118).
    assert sum("Negator addition or deletion" in e.meta["operations"] for e in ex) == 118
    assert sum("Negator addition or deletion" in e.meta["operations_repeated"] for e in ex) == 6


def test_monli_pmonli_is_an_evaluation_split():
    ex = get_benchmark("monli").load("pmonli")
    assert len(ex) == 1476 and ex[0].id == "monli/pmonli/0"


def test_mnli_reads_the_hub_schema_from_a_data_dir(monkeypatch):
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", f"{FIXTURES}{os.pathsep}{os.environ['NEGTRAIN_DATA_DIR']}")
    bench = get_benchmark("mnli")
    train = bench.load("train")
    assert len(train) == 48
    assert train[0].id == "mnli/train/10000e" and train[0].label == "entailment"
    assert [e.label for e in train[:3]] == ["entailment", "neutral", "contradiction"]
    assert len(bench.load("validation_matched")) == len(bench.load("validation_mismatched")) == 12
    # The mirror is still searched after the fixture directory.
    assert len(get_benchmark("scone").load("test")) == 1200


def test_mnli_rejects_a_row_without_gold_label(tmp_path, monkeypatch):
    folder = tmp_path / "nyu-mll" / "multi_nli"
    folder.mkdir(parents=True)
    (folder / "validation_matched.jsonl").write_text(
        '{"pairID": "1e", "premise": "a", "hypothesis": "b", "label": 0}\n'
        '{"pairID": "2n", "premise": "a", "hypothesis": "b", "label": -1}\n'
    )
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(tmp_path))
    with pytest.raises(DataError, match=r"validation_matched.jsonl:2: field 'label': expected a class id"):
        get_benchmark("mnli").load("validation_matched")


def test_hub_split_offline_error_names_the_path_and_dataset(tmp_path, monkeypatch):
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("NEGTRAIN_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(DataError) as err:
        resolve(HubSplit("HiTZ/This-is-not-a-dataset", "test"))
    msg = str(err.value)
    assert "Hub dataset HiTZ/This-is-not-a-dataset (split test)" in msg
    assert str(tmp_path / "data" / "HiTZ" / "This-is-not-a-dataset" / "test.jsonl") in msg
    assert str(tmp_path / "cache" / "HiTZ" / "This-is-not-a-dataset" / "test.jsonl") in msg
    assert "NEGTRAIN_OFFLINE" in msg


def test_read_csv_tab_files_keep_literal_quotes_and_reject_surplus_fields(tmp_path):
    import csv

    from negtrain.benchmarks.rows import read_csv

    path = tmp_path / "t.txt"
    path.write_bytes(b'index\tText\r\n0\t"Quoted\tstart\r\n1\tQu\xe9bec\r\n')
    with pytest.raises(DataError, match=r"t.txt:2: more fields than the header's 2"):
        list(read_csv(path, ["Text"], delimiter="\t", encodings=("utf-8", "cp1252"), quoting=csv.QUOTE_NONE))
    path.write_bytes(b'index\tText\r\n0\t"Quoted start\r\n1\tQu\xe9bec\r\n')
    rows = list(read_csv(path, ["Text"], delimiter="\t", encodings=("utf-8", "cp1252"), quoting=csv.QUOTE_NONE))
    assert [r.fields["Text"] for r in rows] == ['"Quoted start', "Québec"]
