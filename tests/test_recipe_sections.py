"""The logger: and sweep: recipe sections, and secret masking."""

from __future__ import annotations

import pytest

from negtrain.config import to_dict
from negtrain.errors import ConfigError
from negtrain.recipes import load_recipe, parse_overrides
from negtrain.secrets import redact


def test_logger_shorthand_and_override():
    assert load_recipe("scone_deberta").recipe.logger.backend == "wandb"
    assert load_recipe("scone_roberta").recipe.logger.backend == "wandb"
    off = load_recipe("scone_deberta", parse_overrides(["--logger=none"])).recipe
    assert off.logger.backend == "none"
    on = load_recipe("scone_minilm", parse_overrides(["--logger", "wandb"])).recipe
    assert on.logger.backend == "wandb"


def test_logger_typos_are_caught():
    with pytest.raises(ConfigError, match="did you mean 'project'"):
        load_recipe("scone_deberta", {"logger.projekt": "x"})
    with pytest.raises(ConfigError, match="logger.backend"):
        load_recipe("scone_deberta", {"logger": "wandbb"})


def test_sweep_parameter_fields_are_checked():
    with pytest.raises(ConfigError, match="sweep.parameters.model.learning_rate.valuez"):
        load_recipe("scone_minilm", {"sweep": {"method": "grid", "parameters": {"model.learning_rate": {"valuez": [1]}}}})
    with pytest.raises(ConfigError, match="exactly one of"):
        load_recipe("scone_minilm", {"sweep": {"method": "grid", "parameters": {"seed": {}}}})


def test_secrets_are_masked_in_the_resolved_recipe(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_supersecretvalue123")
    monkeypatch.setenv("WANDB_API_KEY", "0123456789abcdef0123")
    recipe = load_recipe("scone_deberta", {"logger.name": "run-hf_supersecretvalue123", "logger.tags": ["0123456789abcdef0123"]}).recipe
    resolved = to_dict(recipe)
    text = repr(resolved)
    assert "hf_supersecretvalue123" not in text and "0123456789abcdef0123" not in text
    assert resolved["logger"]["name"] == "run-***"
    assert redact({"api_key": "abc", "token": "", "x": 1}) == {"api_key": "***", "token": "", "x": 1}
    # Not secrets: tokenizer settings, short values.
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false-but-long-enough")
    assert redact("false-but-long-enough") == "false-but-long-enough"


def test_shorthand_section_takes_dotted_overrides():
    recipe = load_recipe("scone_minilm", parse_overrides(["--logger=wandb", "--logger.project=p", "--logger.tags=[a]"])).recipe
    assert (recipe.logger.backend, recipe.logger.project, recipe.logger.tags) == ("wandb", "p", ["a"])
    recipe = load_recipe("scone_minilm", parse_overrides(["--logger.backend=wandb"])).recipe  # recipe says `logger: none`
    assert recipe.logger.backend == "wandb"
