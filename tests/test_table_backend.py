"""A backend kept outside the package: defined here, answering from a table, registered with
``negtrain.config.register_backend`` and scored on ScoNe through ``evaluate --backend table``
(no package file names it). Its numbers are the table's, checked by hand.

The table: each ScoNe test pair (premise, hypothesis), read from the condition files with the
standard library's csv module, keyed to the label the backend answers: the gold label, except for
one pair (``one_scoped`` row 0), where it answers the other label. It answers a continuation's
log-likelihood 0.0 for that label's verbalizer (" yes"/" no") and -5.0 for the other."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from negtrain.cli import main
from negtrain.config import backend_names, register_backend, unregister_backend
from negtrain.core.errors import ConfigError
from negtrain.engine.requests import Answer, Loglikelihood
from negtrain.serving.backend import BackendBase

ROWS = 3  # per condition file: 18 examples, 3 contrast sets
CONDITIONS = ("no_negation", "one_not_scoped", "one_scoped", "one_scoped_one_not_scoped", "two_scoped", "two_not_scoped")
WRONG = ("one_scoped", 0)  # the one pair the table answers wrongly
VERBALIZER = {"yes": "entailment", "no": "not_entailment"}  # ScoNe's default prompt, as the causal family sends it
PROMPT = re.compile(r'\A(?P<premise>.*)\nQuestion: Does this imply that "(?P<hypothesis>.*)"\? Yes or no\?\nAnswer:\Z', re.S)


class TableBackend(BackendBase):
    """Answers from ``table``: (premise, hypothesis) -> the label it says. A STAND-IN for a model.
    Its model is not here: BackendBase declares that (no tokenizer, no context, no template)."""

    name = "table"

    def __init__(self, table: dict[tuple[str, str], str]) -> None:
        self.table = table
        self.asked: list[Loglikelihood] = []

    def answer(self, requests, counts, allow_missing=False):
        answers = []
        for request in requests:
            assert isinstance(request, Loglikelihood), request  # ScoNe's labels are scored, not generated
            self.asked.append(request)
            m = PROMPT.match(request.context)
            said = self.table[(m["premise"], m["hypothesis"])]
            answers.append(Answer(logprob=0.0 if VERBALIZER[request.continuation.strip()] == said else -5.0, n_tokens=1, is_greedy=True))
        counts.requests += len(requests)
        return answers

    def offers_prompt_logprobs(self):
        return True, ""

    def stop(self):
        pass


def _scone_rows(data: Path) -> dict[str, list[tuple[str, str, str]]]:
    """Per condition, its first ROWS (premise, hypothesis, gold) as the files have them: the
    one_scoped file's own columns, the other files' *_edited columns (ScoNe's layout)."""
    rows = {}
    for condition in CONDITIONS:
        with open(data / "selenashe/ScoNe/scone_nli/test" / f"{condition}.csv", encoding="utf-8", newline="") as f:
            suffix = "" if condition == "one_scoped" else "_edited"
            rows[condition] = [(r["sentence1" + suffix], r["sentence2" + suffix],
                                "entailment" if r["gold_label" + suffix] == "entailment" else "not_entailment")
                               for r in list(csv.DictReader(f))[:ROWS]]
    return rows


@pytest.fixture()
def scone_cut(data_dir, tmp_path, monkeypatch):
    """ScoNe's test split cut to ROWS rows per condition file (read from the mirror, written here)."""
    dest = tmp_path / "data/selenashe/ScoNe/scone_nli/test"
    dest.mkdir(parents=True)
    for f in (data_dir / "selenashe/ScoNe/scone_nli/test").glob("*.csv"):
        lines = f.read_text(encoding="utf-8").splitlines(keepends=True)
        (dest / f.name).write_text("".join(lines[: 1 + ROWS]), encoding="utf-8")
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


@pytest.fixture()
def table_backend():
    made: list[TableBackend] = []
    tables: dict = {}

    def factory(context):
        made.append(TableBackend(tables["table"]))
        return made[-1]

    register_backend("table", factory)
    try:
        yield tables, made
    finally:
        unregister_backend("table")


def test_a_backend_defined_here_scores_scone_with_the_tables_numbers(scone_cut, table_backend, tmp_path):
    tables, made = table_backend
    rows = _scone_rows(scone_cut)
    table = {}
    for condition, pairs in rows.items():
        for i, (premise, hypothesis, gold) in enumerate(pairs):
            other = "not_entailment" if gold == "entailment" else "entailment"
            table[(premise, hypothesis)] = other if (condition, i) == WRONG else gold
    assert len(table) == 6 * ROWS  # every pair distinct: the wrong answer is given to one example only
    tables["table"] = table
    out = tmp_path / "card"
    assert "table" in backend_names()
    assert main(["evaluate", "--model", "table-model", "--backend", "table", "--benchmarks", "scone", "--out", str(out)]) == 0
    assert len(made) == 1 and len(made[0].asked) == 6 * ROWS * 2  # one request per example and label
    (record,) = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    # By hand: 17 of 18 answered right; one_scoped 2 of 3; the contrast set of row 0 has one wrong
    # member, the other two sets are all right: consistency 2 of 3.
    assert record["metrics"] == {
        "accuracy": round(17 / 18, 6), **{f"accuracy/{c}": (round(2 / 3, 6) if c == "one_scoped" else 1.0) for c in CONDITIONS},
        "consistency": round(2 / 3, 6), "groups_scored": 3.0, "n": 18.0,
    }
    predictions = {r["id"]: r for r in map(json.loads, (out / "predictions/scone-test-validate.jsonl").read_text().splitlines())}
    for condition, pairs in rows.items():
        for i, (_, _, gold) in enumerate(pairs):
            p = predictions[f"scone/test/{condition}/{i}"]
            assert p["label"] == gold
            assert (p["prediction"] == gold) == ((condition, i) != WRONG)
            assert p["response"] == {p["prediction"]: 0.0, ({"entailment", "not_entailment"} - {p["prediction"]}).pop(): -5.0}


def test_a_backend_name_with_a_typo_is_refused_with_the_closest(table_backend, capsys):
    assert main(["evaluate", "--model", "m", "--backend", "tabel", "--benchmarks", "scone"]) == 2
    err = capsys.readouterr().err
    assert "unknown backend 'tabel' (did you mean 'table'?)" in err and "Traceback" not in err


def test_the_table_keeps_its_shipped_rows_and_refuses_a_second_of_a_name():
    with pytest.raises(ConfigError, match="already has a backend 'openai'"):
        register_backend("openai", lambda context: None)
    with pytest.raises(ConfigError, match="ships with negtrain"):
        unregister_backend("openai")
    with pytest.raises(ConfigError, match="'module:function'"):
        register_backend("x", "no_colon")
