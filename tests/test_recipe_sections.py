"""The logger: and sweep: recipe sections, and secret masking."""

from __future__ import annotations

import pytest

from negtrain.config import to_dict
from negtrain.core.errors import ConfigError
from negtrain.recipes import load_recipe, parse_overrides
from negtrain.core.secrets import redact


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
    # A flag or number under a secret-looking name cannot hold a key, and must read back as written.
    assert redact({"first_token_only": True, "hf_token": "hf_abcdefgh", "token_limit": 5}) == {
        "first_token_only": True, "hf_token": "***", "token_limit": 5}
    # Not secrets: tokenizer settings, short values.
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false-but-long-enough")
    assert redact("false-but-long-enough") == "false-but-long-enough"


def test_shorthand_section_takes_dotted_overrides():
    recipe = load_recipe("scone_minilm", parse_overrides(["--logger=wandb", "--logger.project=p", "--logger.tags=[a]"])).recipe
    assert (recipe.logger.backend, recipe.logger.project, recipe.logger.tags) == ("wandb", "p", ["a"])
    recipe = load_recipe("scone_minilm", parse_overrides(["--logger.backend=wandb"])).recipe  # recipe says `logger: none`
    assert recipe.logger.backend == "wandb"


def test_every_recipe_reads_back_unmasked(monkeypatch):
    """recipe.yaml is the redacted recipe, and resume loads it: no field may come back masked."""
    from pathlib import Path

    for var in [k for k in __import__("os").environ if "TOKEN" in k.upper() or "KEY" in k.upper()]:
        monkeypatch.delenv(var)
    names = sorted(p.stem for p in (Path(__file__).resolve().parents[1] / "recipes").glob("*.yaml"))
    assert names
    for name in names:
        recipe = load_recipe(name).recipe
        assert to_dict(recipe) == recipe.model_dump(mode="json"), name


# Recipe fields whose names look like secrets to negtrain.core.secrets, each checked to hold none.
NOT_SECRETS = {
    "first_token_only": "a flag",
    "cue_token": "the word a cue is masked with",
    "multi_token_objects": "a policy name (reject, first_subtoken)",
}


def test_no_recipe_field_is_a_secret():
    """Recipes are value-masked only (to_dict), which is safe while no field holds a credential:
    a new field named like one must be reviewed and listed above, or kept out of recipes."""
    from pydantic import BaseModel

    from negtrain.config import Recipe
    from negtrain.core.secrets import is_secret_name

    def fields(model: type[BaseModel], prefix: str = ""):
        for name, info in model.model_fields.items():
            yield prefix + name, name
            for arg in [info.annotation, *getattr(info.annotation, "__args__", ())]:
                if isinstance(arg, type) and issubclass(arg, BaseModel):
                    yield from fields(arg, f"{prefix}{name}.")

    named = {path: name for path, name in fields(Recipe) if is_secret_name(name)}
    assert named and set(named.values()) <= set(NOT_SECRETS), named
