"""Test rows never reach selection or training unmarked, on every path.

Which splits share rows is each benchmark's declaration (checked here against the real files:
NegNLI's val15 lies inside its test, train85 holds half of test's groups, ``all`` holds every
split, ScoNe's dev10 lies inside train, CondaQA's few-shot test splits inside test). The one rule
(negtrain.benchmarks.test_rows.choose_selection) picks the epoch on no split holding test rows,
named or defaulted, unless selection.allow_test_split; training on rows of a split the run
reports as test is refused unless data.allow_test_rows. fit, fit --resume, sweep, test and the
report card each go through it. Real tiny runs: a 2-layer BERT (tests/crash_fit.py) on the real
ScoNe, MoNLI and NegNLI files."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from negtrain.benchmarks.registry import get_benchmark
from negtrain.benchmarks.test_rows import choose_selection, shared_rows, run_test_rows, own_test_rows
from negtrain.cli import main
from negtrain.config import SelectionConfig
from negtrain.core.errors import ConfigError
from negtrain.evaluation.card_run_data import run_data_lines
from negtrain.io.records import EvalRecord

from crash_fit import tiny_model


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return tiny_model(tmp_path_factory.mktemp("tiny") / "model")


def _recipe(folder: Path, model: Path, *, train: str, eval: str, selection: str, test: str | None = None, extra: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "recipe.yaml"
    path.write_text(f"""\
description: test rows test
seed: 7
model: {{name: {model}, max_length: 64, learning_rate: 1.0e-3}}
data:
  train: {train}
  mix: {{epoch: 32}}
  eval: {eval}
{f"  test: {test}" if test else ""}
  batch_size: 16
  eval_batch_size: 256
{extra}
trainer: {{max_epochs: 1, limit_val_batches: 1, precision: 32-true, deterministic: true, torch_threads: 1, enable_progress_bar: false}}
selection: {selection}
""")
    return path


# ---- what the benchmarks declare, against their files ---------------------------------------------

def test_negnli_val15_lies_inside_test_and_train85_holds_half_of_it():
    negnli = get_benchmark("negnli-rte")
    assert negnli.holds("test", "val15") and not negnli.holds("val15", "test")
    assert negnli.shares_rows("train85", "test") and not negnli.shares_rows("train", "test")
    # Counted on the real rows (matched by id): 75 of test's 150 groups are in train85.
    assert shared_rows("negnli-rte", "train85", "test") == (225, 450)
    assert shared_rows("negnli-rte", "test", "val15") == (225, 225)
    assert shared_rows("negnli-rte", "all", "all") == (1500, 1500)
    assert shared_rows("negnli-rte", "train", "test") is None and shared_rows("negnli-rte", "train85", "val15") is None
    assert shared_rows("scone", "train", "dev10") == (600, 600) and shared_rows("scone", "train90", "dev10") is None


def test_condaqa_fewshot_test_splits_lie_inside_test():
    # The few-shot files number their rows afresh: matched by inputs and label.
    assert shared_rows("condaqa", "test", "fewshot_test_1") == (1441, 1441)


@pytest.mark.parametrize("benchmark, split, reason", [
    ("scone", "test", "the test split scone/test"),
    ("condaqa", "fewshot_test_3", "the test split condaqa/fewshot_test_3"),
    ("monli", "pmonli", "monli/pmonli, an evaluation-only challenge set"),
    ("negnli-rte", "all", "negnli-rte/all, which holds every row of negnli-rte/test"),
    ("negated_lama", "all", "negated_lama/all, which holds every row of negated_lama/test"),
    ("scone", "dev10", None), ("negnli-rte", "val15", None), ("mnli", "validation_matched", None), ("cue_corpus", "heldout", None),
])
def test_which_splits_hold_test_rows_by_themselves(benchmark, split, reason):
    assert own_test_rows(benchmark, split) == reason


def test_val15_holds_test_rows_only_for_a_run_that_reports_test():
    assert run_test_rows("negnli-rte", "val15", [("nannli", "test")]) is None  # NaN-NLI's recipes
    assert run_test_rows("negnli-rte", "val15", [("negnli-rte", "test")]) == \
        "negnli-rte/val15, which lies inside negnli-rte/test (reported by the run)"
    assert run_test_rows("negnli-rte", "val15", [("negnli-snli", "test")]) is None  # another source's test


# ---- the one selection rule ------------------------------------------------------------------------

SETS = {"scone/test": ["accuracy", "consistency"], "monli/pmonli": ["accuracy"], "scone/dev10": ["accuracy"]}


def test_an_unset_metric_passes_over_test_sets_to_the_first_clean_one():
    choice = choose_selection(SelectionConfig(), SETS, [("scone", "test"), ("monli", "pmonli"), ("scone", "dev10")], "r")
    assert (choice.metric, choice.on_test, choice.passed_over) == ("scone/dev10/accuracy", None, ("scone/test", "monli/pmonli"))


def test_an_unset_metric_with_only_test_sets_is_one_line_or_allowed_and_marked():
    sets = {"scone/test": ["accuracy"], "negnli-rte/all": ["accuracy"], "monli/pmonli": ["accuracy"]}
    with pytest.raises(ConfigError) as caught:
        choose_selection(SelectionConfig(), sets, [], "r.yaml")
    [line] = str(caught.value).splitlines()
    assert line.startswith("r.yaml: selection.metric is unset and every eval set holds test rows (the test split scone/test; "
                           "negnli-rte/all, which holds every row of negnli-rte/test; monli/pmonli, an evaluation-only challenge set)")
    assert "selection.allow_test_split: true" in line
    choice = choose_selection(SelectionConfig(allow_test_split=True), sets, [], "r.yaml")
    assert (choice.metric, choice.on_test) == ("scone/test/accuracy", "the test split scone/test")


@pytest.mark.parametrize("metric, reported, words", [
    ("negnli-rte/val15/accuracy", [("negnli-rte", "test")], "picks on negnli-rte/val15, which lies inside negnli-rte/test"),
    ("negnli-rte/all/accuracy", [], "picks on negnli-rte/all, which holds every row of negnli-rte/test"),
    ("monli/pmonli/accuracy", [], "picks on monli/pmonli, an evaluation-only challenge set"),
    ("scone/test/accuracy", [], "picks on the test split scone/test, whose numbers the run then reports"),
])
def test_a_named_metric_on_test_rows_is_refused_unless_allowed(metric, reported, words):
    with pytest.raises(ConfigError, match=words):
        choose_selection(SelectionConfig(metric=metric), {}, reported, "r.yaml")
    assert choose_selection(SelectionConfig(metric=metric, allow_test_split=True), {}, reported, "r.yaml").on_test is not None
    assert choose_selection(SelectionConfig(metric="negnli-rte/val15/accuracy"), {}, [("nannli", "test")], "r").on_test is None


# ---- fit: refused before anything is written -----------------------------------------------------------

NEGNLI_EVAL = "[{benchmark: negnli-rte, split: val15}, {benchmark: negnli-rte, split: test}]"


def test_nannli_layout_is_accepted(tmp_path, tiny):
    """NaN-NLI's recipes: val15 held out of train85, selected on, NegNLI test not reported."""
    from negtrain.benchmarks.test_rows import check_recipe_selection, check_training
    from negtrain.recipes import load_recipe

    recipe = _recipe(tmp_path / "r", tiny, train="[{benchmark: negnli-rte, split: train85}]",
                     eval="[{benchmark: negnli-rte, split: val15}, {benchmark: nannli, split: test}]",
                     selection="{metric: negnli-rte/val15/accuracy}")
    loaded = load_recipe(str(recipe))
    check_recipe_selection(loaded.recipe, "r")
    assert check_training(loaded.recipe, "r") == []


@pytest.mark.parametrize("train, eval, selection, words", [
    ("[{benchmark: negnli-rte, split: train}]", NEGNLI_EVAL, "{metric: negnli-rte/val15/accuracy}",
     "selection.metric: 'negnli-rte/val15/accuracy' picks on negnli-rte/val15, which lies inside negnli-rte/test (reported by the run)"),
    ("[{benchmark: negnli-rte, split: train85}]", "[{benchmark: negnli-rte, split: test}]", "{epoch: last}",
     "data.train: negnli-rte/train85 shares rows with negnli-rte/test, which the run reports as test"),
    ("[{benchmark: negnli-rte, split: all}]", "[{benchmark: negnli-rte, split: all}]", "{epoch: last}",
     "data.train: negnli-rte/all shares rows with negnli-rte/all, which the run reports as test"),
    ("[{benchmark: scone, split: train}]", "[{benchmark: scone, split: dev10}]", "{metric: monli/pmonli/accuracy}",
     "picks on monli/pmonli, an evaluation-only challenge set"),
])
def test_fit_refuses_test_rows_in_selection_or_training_in_one_line(tmp_path, tiny, capsys, train, eval, selection, words):
    recipe = _recipe(tmp_path / "r", tiny, train=train, eval=eval, selection=selection)
    out = tmp_path / "run"
    assert main(["fit", "--recipe", str(recipe), "--output-dir", str(out)]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"error: {recipe}") and words in line
    assert not out.exists()
    # The same in-process (fit() is what seeds and sweeps' trials call), before the run directory exists.
    from negtrain.recipes import load_recipe
    from negtrain.training.run import fit

    with pytest.raises(ConfigError, match=re.escape(words)):
        fit(load_recipe(str(recipe)), out)
    assert not out.exists()


def test_fit_with_only_test_sets_and_no_metric_is_refused(tmp_path, tiny, capsys):
    """On main the first eval set decided: the epoch was picked on scone/test, exit 0."""
    recipe = _recipe(tmp_path / "r", tiny, train="[{benchmark: scone, split: train}]",
                     eval="[{benchmark: scone, split: test}, {benchmark: monli, split: pmonli}]", selection="{}")
    out = tmp_path / "run"
    assert main(["fit", "--recipe", str(recipe), "--output-dir", str(out)]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "selection.metric is unset and every eval set holds test rows (the test split scone/test; monli/pmonli" in line
    assert not out.exists()


# ---- fit with the default, then report, test, resume -------------------------------------------------------

@pytest.fixture(scope="module")
def default_run(tmp_path_factory, tiny):
    """One epoch whose eval list starts with scone/test and names no selection metric; data.test
    is MoNLI, which does not report the selection metric."""
    root = tmp_path_factory.mktemp("default")
    recipe = _recipe(root / "recipe", tiny, train="[{benchmark: scone, split: train90}]",
                     eval="[{benchmark: scone, split: test}, {benchmark: scone, split: dev10}]",
                     test="[{benchmark: monli, split: test}]", selection="{}")
    run = root / "run"
    assert main(["fit", "--recipe", str(recipe), "--output-dir", str(run)]) == 0
    return run


def test_the_default_selection_skips_scone_test_and_every_record_names_it(default_run, capsys):
    run = default_run
    assert yaml.safe_load((run / "recipe.yaml").read_text())["selection"]["metric"] == "scone/dev10/accuracy"
    record = json.loads((run / "provenance.json").read_text())
    assert record["selection"] == {"epoch": "best", "metric": "scone/dev10/accuracy", "on_test_split": False}
    assert "trained_on_test" not in record
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert not any("selected_on_test" in x for x in lines)
    assert main(["report", "--run", str(run)]) == 0
    summary = (run / "report" / "summary.md").read_text()
    assert "selection `scone/dev10/accuracy`" in summary and "first eval metric" not in summary
    assert "made on the test split" not in summary
    assert main(["export", "--run", str(run), "--out", str(run.parent / "export")]) == 0
    model_card = (run.parent / "export" / "README.md").read_text()
    assert "the best epoch by `scone/dev10/accuracy`" in model_card and "Selected on test" not in model_card


def test_test_runs_a_recipe_whose_data_test_lacks_the_selection_metric(default_run, tmp_path, capsys):
    """The command the TINAD and CondaQA recipes document; on main: "selection.metric
    'scone/dev10/accuracy' is not reported"."""
    [best] = (default_run / "checkpoints").glob("best-epoch*.ckpt")
    out = tmp_path / "test"
    assert main(["test", "--recipe", str(default_run / "recipe.yaml"), "--checkpoint", str(best), "--output-dir", str(out)]) == 0
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [(x["stage"], x["benchmark"], x["split"]) for x in lines] == [("test", "monli", "test")]
    # validate scores data.eval, with the selection's split among them: no selection either.
    assert main(["validate", "--recipe", str(default_run / "recipe.yaml"), "--checkpoint", str(best),
                 "--output-dir", str(tmp_path / "validate")]) == 0


def test_test_refuses_a_recipe_edited_to_select_on_test(default_run, tmp_path, capsys):
    recipe = yaml.safe_load((default_run / "recipe.yaml").read_text())
    recipe["selection"]["metric"] = "scone/test/accuracy"
    edited = tmp_path / "recipe.yaml"
    edited.write_text(yaml.safe_dump(recipe))
    assert main(["test", "--recipe", str(edited), "--output-dir", str(tmp_path / "test")]) == 2
    assert "picks on the test split scone/test" in capsys.readouterr().err
    assert not (tmp_path / "test").exists()


def test_resume_of_a_recipe_edited_to_select_on_test_is_refused_and_touches_nothing(default_run, tmp_path, capsys):
    """On main, fit --resume skipped the check: the edited run went on selecting on scone/test."""
    run = tmp_path / "run"
    shutil.copytree(default_run, run)
    recipe = yaml.safe_load((run / "recipe.yaml").read_text())
    recipe["trainer"]["max_epochs"] += 1  # so that there is an epoch left to resume
    recipe["selection"]["metric"] = "scone/test/accuracy"
    (run / "recipe.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
    before = {p.relative_to(run): p.read_bytes() for p in run.rglob("*") if p.is_file()}
    assert main(["fit", "--resume", str(run)]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "selection.metric: 'scone/test/accuracy' picks on the test split scone/test" in line
    assert {p.relative_to(run): p.read_bytes() for p in run.rglob("*") if p.is_file()} == before


# ---- sweep ----------------------------------------------------------------------------------------------

def _sweep(tmp_path: Path, capsys, *args: str) -> tuple[int, dict | None, str]:
    out = tmp_path / "sweep.yaml"
    code = main(["sweep", *args, "--out", str(out)])
    captured = capsys.readouterr()
    return code, (yaml.safe_load(out.read_text()) if out.exists() else None), captured.out + captured.err


def test_a_sweeps_selection_metric_on_test_is_refused_not_replaced(tmp_path, capsys):
    """On main the sweep YAML silently replaced --selection.metric=scone/test/accuracy by the
    recipe's sweep.metric, scone/dev10/accuracy."""
    code, config, output = _sweep(tmp_path, capsys, "--recipe", "scone_minilm", "--selection.metric=scone/test/accuracy")
    assert code == 2 and config is None
    [line] = output.strip().splitlines()
    assert "selection.metric: 'scone/test/accuracy' picks on the test split scone/test" in line
    # Allowed, it still differs from the metric every trial selects by: said, not replaced.
    code, config, output = _sweep(tmp_path, capsys, "--recipe", "scone_minilm", "--selection.metric=scone/test/accuracy",
                                  "--selection.allow_test_split=true")
    assert code == 2 and config is None
    assert "--selection.metric=scone/test/accuracy differs from the sweep's metric scone/dev10/accuracy" in output
    assert "--sweep.metric=scone/test/accuracy instead" in output


# ---- a NegNLI run allowed both, its records and its cards ------------------------------------------------

@pytest.fixture(scope="module")
def negnli_run(tmp_path_factory, tiny):
    """Trains on negnli-rte/train85 and reports negnli-rte/test (half its groups trained on),
    selecting on val15 (inside test): both allowed explicitly."""
    root = tmp_path_factory.mktemp("negnli")
    recipe = _recipe(root / "recipe", tiny, train="[{benchmark: negnli-rte, split: train85}]", eval=NEGNLI_EVAL,
                     selection="{metric: negnli-rte/val15/accuracy, allow_test_split: true}", extra="  allow_test_rows: true")
    run = root / "run"
    assert main(["fit", "--recipe", str(recipe), "--output-dir", str(run)]) == 0
    return run


def test_an_allowed_negnli_run_marks_every_record(negnli_run):
    record = json.loads((negnli_run / "provenance.json").read_text())
    assert record["selection"] == {"epoch": "best", "metric": "negnli-rte/val15/accuracy", "on_test_split": True}
    assert record["trained_on_test"] == [{"train": "negnli-rte/train85", "reported": "negnli-rte/test"}]
    lines = [json.loads(x) for x in (negnli_run / "metrics.jsonl").read_text().splitlines()]
    marks = {(x["benchmark"], x["split"]): (x.get("selected_on_test"), x.get("trained_on_test")) for x in lines}
    assert marks == {("train", "train"): ("negnli-rte/val15/accuracy", None),
                     ("negnli-rte", "val15"): ("negnli-rte/val15/accuracy", None),
                     ("negnli-rte", "test"): (None, "negnli-rte/train85")}
    assert main(["report", "--run", str(negnli_run)]) == 0
    assert "selection `negnli-rte/val15/accuracy` **made on the test split**" in (negnli_run / "report" / "summary.md").read_text()


def test_the_card_of_a_run_says_it_was_scored_on_its_selection_split(negnli_run, tmp_path):
    card = tmp_path / "card"
    assert main(["evaluate", "--model", str(negnli_run), "--benchmarks", "negnli-rte", "--out", str(card),
                 "--evaluation.bootstrap=0"]) == 0
    text = (card / "card.md").read_text()
    assert "| negnli-rte | val15 |" in text  # the split held out of train85
    assert "**Selected on test.** These weights are the epoch that `negnli-rte/val15/accuracy` picked" in text
    assert ("- negnli-rte/val15: the split the run picked these weights on (selection.metric `negnli-rte/val15/accuracy`)"
            in text)
    assert "Scored on pairs it trained on" not in text


def test_the_card_of_a_run_trained_on_all_says_in_bold_it_scored_its_training_pairs(negnli_run, tmp_path):
    """On main: a run trained on NegNLI all was scored on all, its own training pairs, unsaid."""
    run = tmp_path / "run"
    shutil.copytree(negnli_run, run)
    recipe = yaml.safe_load((run / "recipe.yaml").read_text())
    recipe["data"]["train"] = [{"benchmark": "negnli-rte", "split": "all"}]
    (run / "recipe.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
    card = tmp_path / "card"
    assert main(["evaluate", "--model", str(run), "--benchmarks", "negnli-rte", "--out", str(card), "--evaluation.bootstrap=0"]) == 0
    text = (card / "card.md").read_text()
    assert "| negnli-rte | all |" in text
    assert ("**Scored on pairs it trained on.** 1,500 of the 1,500 examples of negnli-rte/all are rows of negnli-rte/all, "
            "which the run behind these weights trained on") in text


def test_run_data_lines_count_the_trained_pairs_a_card_scores(negnli_run):
    """A card of the train85 run that scores test: half of test's pairs were trained on."""
    [best] = (negnli_run / "checkpoints").glob("best-epoch*.ckpt")
    scored = [EvalRecord({"stage": "validate", "benchmark": "negnli-rte", "split": "test", "epoch": 0, "metrics": {}})]
    lines = run_data_lines(best, scored)
    assert lines.warnings[1] == ("**Scored on pairs it trained on.** 225 of the 450 examples of negnli-rte/test are rows of "
                                 "negnli-rte/train85, which the run behind these weights trained on: its negnli-rte/test numbers "
                                 "are not held-out scores.")
    assert lines.notes == []  # test is not the selection split


def test_no_shipped_recipe_selects_or_trains_on_test_rows():
    """Every shipped recipe passes the one rule as shipped, without allowing anything."""
    from negtrain.benchmarks.test_rows import check_recipe_selection, check_training, recipe_selection_reason
    from negtrain.recipes import available_recipes, load_recipe

    for name in available_recipes():
        recipe = load_recipe(name).recipe
        check_recipe_selection(recipe, name)
        assert check_training(recipe, name) == [] and recipe_selection_reason(recipe) is None, name
        assert not recipe.selection.allow_test_split and not recipe.data.allow_test_rows, name


def test_a_sweep_names_an_eval_set_with_its_variant_as_the_run_does(tmp_path):
    """One spelling of an eval set's name (config.eval_set_name): on main the sweep dropped the
    variant, so a swept metric of a variant entry was never found in the run's keys."""
    from negtrain.recipes import load_recipe
    from negtrain.runs.sweeps import available_metrics, resolve_metric

    raw = yaml.safe_load(Path(load_recipe("scone_minilm").path).read_text())
    raw["data"]["eval"] = [{"benchmark": "scone", "split": "dev10", "variant": "plain"}]
    raw["sweep"]["metric"] = raw["selection"]["metric"] = "scone/dev10/plain/accuracy"
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump(raw))
    loaded = load_recipe(str(recipe)).recipe
    assert "scone/dev10/plain/accuracy" in available_metrics(loaded) and "scone/dev10/accuracy" not in available_metrics(loaded)
    assert resolve_metric(loaded).name == "scone/dev10/plain/accuracy"
