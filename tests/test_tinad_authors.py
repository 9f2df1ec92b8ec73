"""TINAD scored by negtrain gives every number the authors' scorer gives, under the same names
where a name exists: the authors' own ``evaluate.py`` (vendored unchanged under
tests/fixtures/authors, Apache-2.0) scores a fixture in their schema and spelling, and each of its
numbers is checked against negtrain's metric, name by name, both ways.

The authors' names and negtrain's (the docs' TINAD page lists the same):

=========================================  ====================================================
authors' ``evaluate.py``                   negtrain
=========================================  ====================================================
``all`` / ``all_affirmations`` /           ``accuracy`` / ``accuracy/affirmation`` /
``all_negations`` / ``<cell>``             ``accuracy/negation`` / ``accuracy/<cell>``
``Negation_analysis.<type>_all``           ``accuracy/<type>``
``Negation_analysis.<type>_input``         ``accuracy/<type>_input`` (and ``_distractor``)
``<x>.TP`` (FP, FN, TN)                    ``confusion/<all | the accuracy's part>/TP``
``coherence_scores.All`` and the           ``coherence`` and ``coherence/input``,
four pairs                                 ``/distractor``, ``/affirmation``, ``/negation``
``<pair>.Coherent`` / ``Incoherent``       ``coherent/<all|input|...>`` / ``incoherent/...``
``<Pattern>.<any of the above>``           ``pattern/<NN>/<the same name>``; the pattern's
                                           ``all.accuracy``: ``accuracy/pattern/<NN>``
=========================================  ====================================================

Where negtrain and the authors differ, by design: an accuracy over no sentence is 0 for the
authors and NaN here (undefined, not 0); a pattern absent from the data is listed by the authors
with empty scores and zero coherence, and not reported here. Accuracies are the authors'
percentages with two decimals; negtrain's fractions are compared at that precision.
"""

from __future__ import annotations

import importlib.util
import json
import math
import random
from pathlib import Path

import pytest
import torch

from negtrain.benchmarks.registry import get_benchmark
from negtrain.benchmarks.tinad import LABELS
from tinad_fixture import write_split

AUTHORS = Path(__file__).parent / "fixtures" / "authors" / "tinad_evaluate.py"
#: The authors' pattern names by pattern_id (their evaluate.py's dataset_pattern, in order).
PATTERN_NAMES = ("Synonymy1", "Antonymy1", "Synonymy2", "Antonymy2", "Hypernymy", "Part", "Substance", "Member", "Agent",
                 "Instrument", "Result")
CELL_REFERENCE = {"input_affirmation": True, "input_negation": False, "distractor_affirmation": False, "distractor_negation": True}
COHERENCE_NAMES = {"All": "all", "Affirmation-Negation_Input": "input", "Affirmation-Negation_Distractor": "distractor",
                   "Input-Distractor_Affirmation": "affirmation", "Input-Distractor_Negation": "negation"}
PARTS = {"all": "", "all_affirmations": "affirmation", "all_negations": "negation"}
#: negtrain's numbers the authors' scorer has no name for.
NEGTRAIN_ONLY = {"n", "groups_scored", "groups_lacking_cell"}


def authors_evaluate():
    spec = importlib.util.spec_from_file_location("tinad_authors_evaluate", AUTHORS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.evaluate


def fixture_rows(seed: int = 7) -> list[dict]:
    """Groups of patterns 1, 2 (antonymy), 4 (antonymy), 5 and 8, in the authors' schema and
    spelling (``non_verbal``): per test_id the four reference sentences and up to two more of
    random cell and label (which coherence skips when their label is not the cell's reference).
    Synthetic negation only ever without a distractor, so its _distractor accuracy is over no
    sentence. A prediction per row: a group all right, all wrong, or random."""
    rng = random.Random(seed)
    rows = []
    for test_id in range(40):
        pattern_id = (1, 2, 4, 5, 8)[test_id % 5]
        antonymy = pattern_id in (2, 4)
        mode = ("right", "wrong", "random", "random")[test_id % 4]
        cells = list(CELL_REFERENCE) + [rng.choice(list(CELL_REFERENCE)) for _ in range(rng.randint(0, 2))]
        for k, cell in enumerate(cells):
            reference = CELL_REFERENCE[cell] != (antonymy and cell.startswith("input"))
            label = reference if k < 4 else rng.random() < 0.5
            distractor, affirmation = cell.startswith("distractor"), cell.endswith("affirmation")
            semantic = "analytic" if distractor else rng.choice(("analytic", "synthetic"))
            right = {"right": True, "wrong": False}.get(mode, rng.random() < 0.6)
            rows.append({
                "pattern_id": pattern_id,
                "pattern": PATTERN_NAMES[pattern_id - 1],
                "test_id": test_id,
                "negation_type": "affirmation" if affirmation else rng.choice(("verbal", "non_verbal")),
                "semantic_type": "none" if affirmation else semantic,
                "syntactic_scope": "none" if affirmation else rng.choice(("clausal", "subclausal")),
                "isDistractor": distractor,
                "sentence": f"Sentence {len(rows)} of test {test_id}.",
                "label": label,
                "prediction": label if right else not label,
            })
    return rows


def expected_from_authors(scores: dict, pattern_ids: dict[str, int]) -> dict[str, float]:
    """The authors' numbers under negtrain's names (accuracies as fractions; NaN where the authors
    print 0 over no sentence)."""
    out: dict[str, float] = {}

    def confusion(prefix: str, part: str, cell: dict, overall_key: str) -> None:
        total = sum(cell[c] for c in ("TP", "FP", "FN", "TN"))
        name = f"accuracy/{part}" if part else overall_key
        out[prefix + name if part or not prefix else name] = cell["accuracy"] / 100 if total else math.nan
        for c in ("TP", "FP", "FN", "TN"):
            out[f"{prefix}confusion/{part or 'all'}/{c}"] = cell[c]

    def scorer(prefix: str, result: dict, overall_key: str) -> None:
        for key, cell in result.items():
            if key == "Negation_analysis":
                for type_key, type_cell in cell.items():
                    confusion(prefix, type_key.removesuffix("_all"), type_cell, overall_key)
            elif key == "coherence_scores":
                for pair, which in COHERENCE_NAMES.items():
                    counts = cell[pair]
                    total = counts["Coherent"] + counts["Incoherent"]
                    out[prefix + ("coherence" if which == "all" else f"coherence/{which}")] = (
                        counts["Coherence_percentage"] / 100 if total else math.nan)
                    out[f"{prefix}coherent/{which}"] = counts["Coherent"]
                    out[f"{prefix}incoherent/{which}"] = counts["Incoherent"]
            elif key in PARTS or key in CELL_REFERENCE:
                confusion(prefix, PARTS.get(key, key), cell, overall_key)

    scorer("", {k: v for k, v in scores.items() if k not in PATTERN_NAMES}, "accuracy")
    for name, result in scores.items():
        if name in PATTERN_NAMES and name in pattern_ids:  # the authors list absent patterns too, empty
            nn = f"{pattern_ids[name]:02d}"
            scorer(f"pattern/{nn}/", result, f"accuracy/pattern/{nn}")
    return out


@pytest.fixture
def scored(tmp_path, monkeypatch):
    rows = fixture_rows()
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    authors = authors_evaluate()(str(predictions))
    write_split(tmp_path / "data", "test", [{k: v for k, v in r.items() if k != "prediction"} for r in rows])
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("NEGTRAIN_OFFLINE", "1")
    bench = get_benchmark("tinad")
    examples = bench.load("test")
    metric = bench.metric(examples)
    ids = torch.tensor([LABELS.index("True" if r["prediction"] else "False") for r in rows])
    metric.update(torch.arange(len(rows)), ids)  # the torchmetrics path a run and a card take
    values = {k: float(v) for k, v in metric.compute().items()}
    pattern_ids = {r["pattern"]: r["pattern_id"] for r in rows}
    return authors, values, expected_from_authors(authors, pattern_ids), bench


def test_every_number_of_the_authors_scorer_by_name_and_value(scored):
    authors, values, expected, _ = scored
    assert set(values) - NEGTRAIN_ONLY == set(expected), (
        f"only negtrain: {sorted(set(values) - NEGTRAIN_ONLY - set(expected))}; only the authors: {sorted(set(expected) - set(values))}")
    compared = 0
    for name, want in expected.items():
        got = values[name]
        if math.isnan(want):
            assert math.isnan(got), name
        elif name.startswith(("accuracy", "coherence", "pattern/")) and "/confusion/" not in name and "coherent/" not in name:
            assert round(got * 100, 2) == pytest.approx(want * 100, abs=1e-9), name  # the authors' rounding
        else:
            assert got == want, name
        compared += 1
    # The fixture reaches every kind of number: per-type input/distractor, non_verbal, five patterns.
    assert compared > 500
    assert values["confusion/non_verbal_input/TP"] == authors["Negation_analysis"]["non_verbal_input"]["TP"]
    assert values["pattern/02/coherent/affirmation"] == authors["Antonymy1"]["coherence_scores"]["Input-Distractor_Affirmation"]["Coherent"]
    assert values["accuracy/pattern/08"] * 100 == pytest.approx(authors["Member"]["all"]["accuracy"], abs=0.005)


def test_a_type_never_with_a_distractor_is_undefined_not_zero(scored):
    authors, values, _, _ = scored
    assert authors["Negation_analysis"]["synthetic_distractor"] == {"TP": 0, "FP": 0, "FN": 0, "TN": 0, "accuracy": 0}
    assert math.isnan(values["accuracy/synthetic_distractor"])
    assert values["confusion/synthetic_distractor/TP"] == 0
    assert values["accuracy/synthetic_input"] == values["accuracy/synthetic"]


def test_every_new_number_is_declared_with_its_kind(scored):
    _, values, _, bench = scored
    assert bench.is_count("confusion/all/TP") and bench.is_count("coherent/input") and bench.is_count("incoherent/all")
    assert bench.is_count("pattern/02/confusion/non_verbal_distractor/FN") and bench.is_count("pattern/02/incoherent/negation")
    assert not bench.is_count("pattern/02/coherence/input") and not bench.is_count("accuracy/non_verbal_input")
    assert bench.declared("pattern/02/accuracy/input_negation").name == "pattern/<NN>/<metric>"
    assert bench.declared("accuracy/pattern/02").name == "accuracy/pattern/<NN>"
    for name in values:
        assert bench.declared(name) is not None, name
