"""Every recipe in recipes/ loads and validates; bad keys and values are rejected with suggestions."""

from __future__ import annotations

import subprocess
import sys

import pytest

from negtrain.config import Recipe
from negtrain.core.errors import ConfigError
from negtrain.recipes import available_recipes, first_comment_line, load_recipe, parse_overrides

RECIPES = sorted(available_recipes())


def test_recipes_exist():
    assert {"scone_minilm", "scone_deberta", "scone_roberta"} <= set(RECIPES)


@pytest.mark.parametrize("name", RECIPES)
def test_every_recipe_loads_and_documents_itself(name):
    loaded = load_recipe(name)
    assert isinstance(loaded.recipe, Recipe)
    path = available_recipes()[name]
    header = path.read_text(encoding="utf-8").split("\n\n")[0]
    assert first_comment_line(path), f"{name}: the file must start with a comment saying what it reproduces"
    assert f"--recipe {name}" in path.read_text(encoding="utf-8"), f"{name}: the header must show the command to run it"
    assert header.startswith("#")


@pytest.mark.parametrize("name", RECIPES)
def test_every_recipe_reads_back_from_its_run_copy(name, tmp_path):
    """A run's recipe.yaml (what resume and evaluate --run read) gives back the same recipe."""
    from negtrain.recipes import resolved_recipe_yaml

    loaded = load_recipe(name)
    path = tmp_path / "recipe.yaml"
    path.write_text(resolved_recipe_yaml(loaded), encoding="utf-8")
    assert load_recipe(str(path)).recipe == loaded.recipe


def test_scone_deberta_is_the_papers_setup():
    r = load_recipe("scone_deberta").recipe
    assert r.model.name == "MoritzLaurer/DeBERTa-v3-base-mnli-fever-anli"
    assert r.model.learning_rate == 1e-5
    assert (r.data.batch_size, r.trainer.accumulate_grad_batches, r.trainer.max_epochs) == (4, 6, 10)
    assert {(s.benchmark, s.split) for s in r.data.train} == {("monli", "train"), ("scone", "train")}
    assert r.data.eval == "all"  # every NLI benchmark, ScoNe and MoNLI test among them


def test_overrides_apply_with_types():
    o = parse_overrides(["--trainer.max_epochs=1", "--model.learning_rate", "3e-5", "--data.bucket_by_length=false"])
    r = load_recipe("scone_minilm", o).recipe
    assert r.trainer.max_epochs == 1 and r.model.learning_rate == 3e-5 and r.data.bucket_by_length is False


def test_string_overrides_are_taken_verbatim():
    # Parsed as YAML these would become "Is it" (a comment), a mapping, and the number 2024.
    o = parse_overrides([
        "--model.prompt=Is it #1? {premise}", "--description", "Statement: {x}", "--logger.group=2024",
        "--logger.name=null", "--trainer.max_epochs=3",
    ])
    r = load_recipe("tinad_flant5", o).recipe
    assert r.model.prompt == "Is it #1? {premise}"
    assert r.description == "Statement: {x}"
    assert r.logger.group == "2024"
    assert r.logger.name is None and r.trainer.max_epochs == 3


@pytest.mark.parametrize(
    "override,message",
    [
        ("--model.learnig_rate=1e-5", "unknown key 'model.learnig_rate' (did you mean 'learning_rate'?)"),
        ("--trainr.max_epochs=1", "unknown key 'trainr' (did you mean 'trainer'?)"),
        ("--model.learning_rate=-1", "model.learning_rate: Input should be greater than 0"),
        ("--data.batch_size=0", "data.batch_size: Input should be greater than 0"),
        ("--trainer.precision=bf17", "trainer.precision"),
        ("--seed=-1", "seed: Input should be greater than or equal to 0"),
    ],
)
def test_bad_overrides_are_rejected(override, message):
    with pytest.raises(ConfigError) as err:
        load_recipe("scone_minilm", parse_overrides([override]))
    assert message in str(err.value)


def test_unknown_key_in_a_list_item(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text(
        "description: x\nmodel: {name: m}\ndata:\n  train:\n    - {benchmark: scone, split: train, wieght: 2}\n"
    )
    with pytest.raises(ConfigError, match=r"unknown key 'data.train\[0\].wieght' \(did you mean 'weight'\?\)"):
        load_recipe(str(path))


def test_yaml_syntax_error_names_line(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("description: x\nmodel: {name: m\n")
    with pytest.raises(ConfigError, match=r"r.yaml: line \d+: invalid YAML"):
        load_recipe(str(path))


@pytest.mark.parametrize(
    "text, line, first",
    [
        ("description: x\nmodel:\n  name: m\n  learning_rate: 1e-5\n  learning_rate: 2e-5\n", 5, 4),
        ("description: x\nmodel: {name: m}\ndescription: y\n", 3, 1),
        ("description: x\nmodel: {name: m}\ndata:\n  train:\n    - {benchmark: scone, split: train, split: test}\n", 5, 5),
    ],
)
def test_duplicate_keys_are_refused_with_both_lines(tmp_path, text, line, first):
    # Plain YAML keeps the last value silently; a recipe must not train on whichever came second.
    path = tmp_path / "r.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=rf"r.yaml: line {line}: invalid YAML: duplicate key '\w+' \(first at line {first}\)"):
        load_recipe(str(path))


def test_unknown_recipe_suggests():
    with pytest.raises(ConfigError, match="did you mean 'scone_minilm'"):
        load_recipe("scone_minlm")


def test_cli_rejects_before_any_work(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "negtrain", "fit", "--recipe", "scone_minilm", "--model.lerning_rate=1", "--output-dir", str(tmp_path / "run")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"error: {available_recipes()['scone_minilm']} (with overrides): unknown key 'model.lerning_rate' (did you mean 'learning_rate'?)"
    ]
    assert not (tmp_path / "run").exists()


def test_cli_lists_recipes():
    proc = subprocess.run([sys.executable, "-m", "negtrain", "recipes"], capture_output=True, text=True, check=True)
    assert "scone_minilm" in proc.stdout and "ScoNe" in proc.stdout


@pytest.mark.parametrize("name", available_recipes())
def test_every_recipe_passes_the_pre_work_benchmark_check(name):
    # `data.eval: all` is a string, not a list of entries; the early check used to crash on it
    # (AttributeError) before validate/test of scone_deberta could start.
    from negtrain.commands.train import check_benchmarks

    check_benchmarks(load_recipe(name))


def test_the_pre_work_check_still_refuses_a_bad_split_beside_eval_all():
    from negtrain.commands.train import check_benchmarks

    loaded = load_recipe("scone_deberta", {"data.test": [{"benchmark": "monli", "split": "dev"}]})
    assert loaded.recipe.data.eval == "all"
    with pytest.raises(ConfigError, match=r"data\.test: .*dev"):
        check_benchmarks(loaded)


def test_a_bare_recipe_name_is_the_shipped_recipe_beside_a_folder_of_that_name(tmp_path, monkeypatch):
    """A run's output folder is often named after its recipe; `--recipe scone_minilm` run from the
    folder holding it still means the shipped recipe (a folder is never a recipe), while a folder
    named by a path is refused, pointing at the recipe.yaml it holds."""
    from negtrain.recipes import find_recipe

    monkeypatch.chdir(tmp_path)
    (tmp_path / "scone_minilm").mkdir()
    (tmp_path / "scone_minilm" / "recipe.yaml").write_text("seed: 1\n", encoding="utf-8")
    name, path = find_recipe("scone_minilm")
    assert (name, path) == ("scone_minilm", available_recipes()["scone_minilm"])
    with pytest.raises(ConfigError, match=r"--recipe scone_minilm: .*its recipe is scone_minilm/recipe.yaml") as info:
        find_recipe("scone_minilm/")
    assert "not a regular file" in str(info.value)
