"""The model section is typed per family: a setting of another family is an error that names the
family it belongs to, each family's recipes load, and the shared settings sit in one base."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import REPO
from negtrain.config import (
    FAMILY_SECTIONS,
    LanguageModelConfig,
    ModelSection,
    families,
    families_with,
    is_text_field,
    model_config,
    validate_recipe,
)
from negtrain.core.errors import ConfigError
from negtrain.recipes import available_recipes, load_recipe


def _recipe(**model):
    return {"description": "x", "model": {"name": "m", **model}, "data": {"eval": [{"benchmark": "scone", "split": "test"}]}}


def test_every_family_has_a_shipped_recipe_that_loads_into_its_own_section():
    seen = set()
    for name in available_recipes():
        recipe = load_recipe(name).recipe
        assert type(recipe.model) is FAMILY_SECTIONS[recipe.model.family], name
        seen.add(recipe.model.family)
    assert seen == set(families())


@pytest.mark.parametrize(
    "family,setting,value,owners",
    [
        ("nli", "verbalizer_score", "mean", "seq2seq and causal_lm"),
        ("nli", "prompt", "{premise}", "seq2seq and causal_lm"),
        ("seq2seq", "chat_template", False, "causal_lm"),
        ("causal_lm", "first_token_only", False, "nli"),
        ("mlm", "head_labels", ["entailment"], "nli"),
        ("mlm", "fp32_recheck_margin", 0.5, "nli and seq2seq and causal_lm"),
    ],
)
def test_a_setting_of_another_family_is_rejected_naming_the_family_that_has_it(family, setting, value, owners):
    with pytest.raises(ConfigError) as err:
        validate_recipe(_recipe(family=family, **{setting: value}), "r.yaml")
    assert str(err.value) == f"r.yaml: 'model.{setting}' is a setting of model.family {owners}, not of model.family '{family}'"


def test_the_command_line_names_the_family_in_one_line_and_exits_2():
    done = subprocess.run(
        [sys.executable, "-m", "negtrain", "fit", "--recipe", "scone_minilm", "--model.verbalizer_score=mean"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "seq2seq and causal_lm" in lines[0], done.stderr


def test_unset_family_is_nli_and_a_wrong_family_lists_the_families():
    assert model_config(name="m").family == "nli"
    with pytest.raises(ConfigError, match=r"model.family: Input should be 'nli', 'seq2seq', 'causal_lm' or 'mlm' \(got 'gpt'\)"):
        validate_recipe(_recipe(family="gpt"), "r.yaml")


def test_typos_in_a_family_section_still_get_a_suggestion():
    with pytest.raises(ConfigError, match=r"unknown key 'model.verbalizer_scor' \(did you mean 'verbalizer_score'\?\)"):
        validate_recipe(_recipe(family="causal_lm", verbalizer_scor="sum"), "r.yaml")


def test_shared_settings_are_declared_once_in_the_base():
    shared = set(ModelSection.model_fields)
    for cls in FAMILY_SECTIONS.values():
        assert shared <= set(cls.model_fields)
    assert families_with("prompt") == ["seq2seq", "causal_lm"]
    assert all(issubclass(FAMILY_SECTIONS[f], LanguageModelConfig) for f in families_with("prompt"))
    assert families_with("head_labels") == ["nli"]


def test_text_fields_of_one_family_are_taken_verbatim():
    assert is_text_field("model.prompt") and is_text_field("model.name")
    assert not is_text_field("model.max_length") and not is_text_field("model.chat_template")
