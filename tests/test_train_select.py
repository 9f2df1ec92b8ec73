"""TINAD's training-source filters (García-Ferrero et al. 2023, §6: Table 7 trains on the
affirmative sentences, the negated ones, or the affirmative ones plus one negation type; Figure 2
on one pattern): ``data.train[].select`` keeps exactly the hand-counted rows of a fixture, names the
source with its selection in the run's training line, and refuses unknown filters and values
with "did you mean"."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from tinad_fixture import easy_rows, row, write_split

from negtrain.benchmarks.registry import get_benchmark
from negtrain.benchmarks.row_filters import check_select
from negtrain.config import validate_recipe
from negtrain.core.errors import ConfigError, DataError
from negtrain.data.sources import TrainSource

REPO = Path(__file__).resolve().parents[1]
OTHER = ("non_verbal", "synthetic", "subclausal")


def fixture_rows() -> list[dict]:
    """16 rows: pattern 1 (two test ids, negations verbal/analytic/clausal) and pattern 2 (two test
    ids, negations non_verbal/synthetic/subclausal); four cells each."""
    rows = easy_rows(2)  # test ids 0, 1: pattern 1
    for tid in (2, 3):
        rows += [
            row(tid, 2, "input_affirmation", True, f"Cold {tid} is the opposite of hot."),
            row(tid, 2, "input_negation", False, f"Cold {tid} is never the opposite of hot.", neg=OTHER),
            row(tid, 2, "distractor_affirmation", False, f"Cold {tid} is the opposite of blue."),
            row(tid, 2, "distractor_negation", True, f"Cold {tid} is never the opposite of blue.", neg=OTHER),
        ]
    return rows


@pytest.fixture
def tinad(tmp_path, monkeypatch):
    write_split(tmp_path / "data", "train", fixture_rows())
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("NEGTRAIN_CACHE_DIR", str(tmp_path / "cache"))
    return get_benchmark("tinad")


def _rows(bench, select) -> list[str]:
    return [e.id for e in TrainSource(bench, "train", select)]


# row indices in the fixture: per test id, input_affirmation, input_negation, distractor_affirmation, distractor_negation
def _ids(*indices: int) -> list[str]:
    return [f"tinad/train/{i}" for i in indices]


@pytest.mark.parametrize(("select", "expected"), [
    (None, list(range(16))),
    ([{"polarity": "affirmation"}], [0, 2, 4, 6, 8, 10, 12, 14]),
    ([{"polarity": "negation"}], [1, 3, 5, 7, 9, 11, 13, 15]),
    ([{"polarity": "affirmation"}, {"negation_type": "synthetic"}], [0, 2, 4, 6, 8, 9, 10, 11, 12, 13, 14, 15]),
    ([{"polarity": "affirmation"}, {"negation_type": ["verbal"]}], [0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14]),
    ([{"negation_type": "clausal"}], [1, 3, 5, 7]),  # not "subclausal": values are whole words
    ([{"pattern": 2}], list(range(8, 16))),
    ([{"pattern": [2], "polarity": "negation"}], [9, 11, 13, 15]),
    ([{"distractor": True, "polarity": "negation"}], [3, 7, 11, 15]),
    ([{"pattern": 5}], []),
    # Table 7's "Affirmations + Non-Verbal", in the authors' spelling: the non_verbal rows are kept.
    ([{"polarity": "affirmation"}, {"negation_type": "non_verbal"}], [0, 2, 4, 6, 8, 9, 10, 11, 12, 13, 14, 15]),
    ([{"negation_type": "non_verbal"}], [9, 11, 13, 15]),
])
def test_select_keeps_exactly_the_hand_counted_rows(tinad, select, expected):
    source = TrainSource(tinad, "train", select)
    assert [e.id for e in source] == _ids(*expected)
    assert len(source) == len(expected)  # the sizes (and labels) cached for mixing are the selection's
    assert source.gold_labels() == [e.label for e in source.examples()]


def test_a_selection_is_its_own_source_in_names_and_caches(tinad):
    whole, part = TrainSource(tinad, "train"), TrainSource(tinad, "train", [{"polarity": "affirmation"}, {"negation_type": "synthetic"}])
    assert whole.name == "tinad/train" and part.name == "tinad/train[polarity=affirmation|negation_type=synthetic]"
    assert whole.fingerprint != part.fingerprint
    assert len(whole) == 16 and len(part) == 12  # each from its own cache entry


@pytest.mark.parametrize(("select", "message"), [
    ([{"polarty": "affirmation"}], r"data.train\[0\].select\[0\]: 'tinad' has no row filter 'polarty' \(did you mean 'polarity'\?\)"),
    ([{"negation_type": "synthtic"}], r"select\[0\].negation_type: unknown value 'synthtic' \(did you mean 'synthetic'\?\)"),
    # The paper's "non-verbal" is not how the authors' files spell it: refused, naming the accepted values.
    ([{"polarity": "affirmation"}, {"negation_type": "non-verbal"}],
     r"^data.train\[0\].select\[1\].negation_type: unknown value 'non-verbal' \(did you mean 'non_verbal'\?\); negation_type .* is one of "
     r"verbal, non_verbal, analytic, synthetic, clausal, subclausal$"),
    ([{"polarity": "affirmation"}, {"pattern": 12}], r"select\[1\].pattern: unknown value 12.*one of 1, 2, 3"),
    ([], r"select: a list of clauses"),
    ([{}], r"select\[0\]: an empty clause would keep every row"),
])
def test_unknown_filters_and_values_are_refused_with_did_you_mean(select, message):
    with pytest.raises(ConfigError, match=message):
        check_select(get_benchmark("tinad"), select, "data.train[0]")


@pytest.mark.parametrize(("field", "value"), [("negation_type", "non-verbal"), ("semantic_type", "Analytical"),
                                              ("syntactic_scope", "sub-clausal")])
def test_a_row_spelled_otherwise_than_the_authors_files_is_refused_with_its_line(tmp_path, monkeypatch, field, value):
    rows = fixture_rows()
    rows[9][field] = value
    write_split(tmp_path, "train", rows)
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(tmp_path))
    with pytest.raises(DataError, match=rf"train.jsonl:10: field '{field}': unknown value '{value}'; the authors' files spell it one of "):
        get_benchmark("tinad").load("train")


def test_a_benchmark_without_filters_refuses_select():
    raw = {"description": "d", "model": {"name": "m", "family": "causal_lm"},
           "data": {"train": [{"benchmark": "condaqa", "split": "train", "select": [{"polarity": "negation"}]}]}}
    recipe = validate_recipe(raw, "r.yaml")
    from negtrain.benchmarks.matrix import resolve_benchmarks

    with pytest.raises(ConfigError, match=r"data.train\[0\].select: benchmark 'condaqa' offers no row filters"):
        resolve_benchmarks(recipe, announce=False)


def _doc_table() -> list[list[str]]:
    """The rows of docs/training.md's table of Table 7 / Figure 2 selections."""
    text = (REPO / "docs" / "training.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- tinad-select-recipes -->\n((?:\|.*\n)+)", text)
    assert block, "docs/training.md lost its table of TINAD select recipes"
    return [[c.strip() for c in line.strip("|").split("|")] for line in block.group(1).splitlines()[2:]]


def test_the_documented_table_7_rows_are_the_shipped_recipes_selects():
    """Each row naming a recipe of its own holds that recipe's `select`; the others name a recipe to
    give their `select` to. The recipes' other claims are checked in test_recipe_claims.py."""
    from negtrain.recipes import load_recipe

    rows = _doc_table()
    own = {cells[2].strip("`"): cells[1] for cells in rows if " " not in cells[2].strip("`")}
    assert set(own) == {"tinad_vicuna_lora8", "tinad_table7_affirmative", "tinad_table7_negated", "tinad_figure2_pattern01"}
    for name, shown in own.items():
        recipe = load_recipe(name).recipe
        (train,) = recipe.data.train
        expected = None if shown == "(none)" else yaml.safe_load(shown.strip("`"))
        assert (train.benchmark, train.split, train.select) == ("tinad", "train", expected), name
        assert recipe.selection.metric == "tinad/validation/accuracy", name  # never on test
    for cells in rows:
        if cells[1] != "(none)":
            raw = {"description": "d", "model": {"name": "m", "family": "causal_lm"},
                   "data": {"train": [{"benchmark": "tinad", "split": "train", "select": yaml.safe_load(cells[1].strip("`"))}]}}
            check_select(get_benchmark("tinad"), validate_recipe(raw, "docs/training.md").data.train[0].select, "data.train[0]")


def test_a_run_trains_on_the_selection_and_names_it(tinad, tmp_path, one_thread):
    from tiny_models import save_tiny_llama

    from negtrain.recipes import LoadedRecipe
    from negtrain.training.run import fit

    write_split(tmp_path / "data", "validation", easy_rows(2, offset=4))
    model = save_tiny_llama(tmp_path / "llama", None)
    raw = {
        "description": "tiny select run",
        "model": {"name": str(model), "family": "causal_lm", "max_length": 64},
        "data": {"train": [{"benchmark": "tinad", "split": "train", "select": [{"polarity": "affirmation"}, {"negation_type": "synthetic"}]}],
                 "eval": [{"benchmark": "tinad", "split": "validation"}], "batch_size": 4, "eval_batch_size": 8},
        "trainer": {"max_epochs": 1, "enable_progress_bar": False, "accelerator": "cpu", "torch_threads": 1},
        "selection": {"metric": "tinad/validation/accuracy"},
        "evaluation": {"bootstrap": 0},
        "logger": "none",
    }
    run = fit(LoadedRecipe("tiny", tmp_path / "r.yaml", validate_recipe(raw, "test")), tmp_path / "run")
    train = next(json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if json.loads(x)["benchmark"] == "train")
    assert train["sources"] == {"tinad/train[polarity=affirmation|negation_type=synthetic]": {"size": 12, "share": 1.0, "examples": 12}}
    assert train["train_examples"] == 12
    saved = yaml.safe_load((run / "recipe.yaml").read_text().split("\n", 1)[1])
    assert saved["data"]["train"][0]["select"] == [{"polarity": "affirmation"}, {"negation_type": "synthetic"}]
