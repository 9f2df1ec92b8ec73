"""The card's recipe flags (evaluate --bootstrap, --chat, ...) and the recipe fields they set are
made from one table (negtrain/core/card_settings.py): the flag's help is the field's description,
its type and choices are the field's, its bounds are the ones the field enforces, and a flag not
given leaves the recipe's value."""

from __future__ import annotations

import argparse
import typing

import pytest

from negtrain.commands import check_bootstrap
from negtrain.commands.evaluate import add_arguments
from negtrain.config import EvaluationConfig
from negtrain.config.model import LanguageModelConfig
from negtrain.core.card_settings import CARD_SETTINGS
from negtrain.core.errors import NegtrainError

SECTIONS = {"evaluation": EvaluationConfig, "model": LanguageModelConfig}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser


def _action(parser: argparse.ArgumentParser, option: str) -> argparse.Action:
    return next(a for a in parser._actions if option in a.option_strings)


def _bounds(field) -> dict:
    return {k: getattr(m, k) for m in field.metadata for k in ("ge", "le", "gt", "lt") if hasattr(m, k)}


def test_the_table_is_the_cards_recipe_flags():
    assert {(s.section, s.name) for s in CARD_SETTINGS.values()} == {
        ("evaluation", "bootstrap"), ("evaluation", "bootstrap_seed"), ("evaluation", "log_samples"),
        ("evaluation", "truncate"), ("model", "chat"), ("model", "system"), ("model", "fewshot_as_multiturn")}


@pytest.mark.parametrize("name", list(CARD_SETTINGS))
def test_flag_and_field_are_one_definition(name):
    setting = CARD_SETTINGS[name]
    field = SECTIONS[setting.section].model_fields[name]
    action = _action(_parser(), setting.option)
    assert action.dest == name
    assert field.default == setting.default and _bounds(field) == setting.bounds
    suffix = f" (default {field.default})" if setting.switch == "value" and field.default is not None else ""
    # An off switch's flag says what giving it does (not what the setting does when on).
    expected = setting.off_help if setting.switch == "off" and setting.off_help else field.description + suffix
    assert action.help is not None and action.help.replace("%%", "%") == expected
    if setting.switch == "value":
        assert action.default is None  # not given: the recipe's value
        types = [a for a in typing.get_args(field.annotation) or (field.annotation,) if a is not type(None)]
        if typing.get_origin(field.annotation) is typing.Literal:
            assert tuple(typing.get_args(field.annotation)) == tuple(action.choices)
        else:
            assert types == [action.type]
    else:
        assert field.annotation is bool
        # --chat turns a setting on, --no-log-samples turns one off; not given, the recipe's value stands.
        assert (action.const, action.default) == ((True, False) if setting.switch == "on" else (False, True))
        assert action.default == field.default


def test_flags_not_given_leave_the_recipe_alone():
    args = _parser().parse_args([])
    assert (args.bootstrap, args.bootstrap_seed, args.truncate, args.system) == (None, None, None, None)
    assert (args.chat, args.fewshot_as_multiturn, args.log_samples) == (False, False, True)
    given = _parser().parse_args(["--no-log-samples", "--chat", "--truncate", "left", "--bootstrap", "7"])
    assert (given.log_samples, given.chat, given.truncate, given.bootstrap) == (False, True, "left", 7)


@pytest.mark.parametrize("name", ["bootstrap", "bootstrap_seed"])
def test_the_command_lines_bounds_are_the_fields(name):
    top = _bounds(EvaluationConfig.model_fields[name])["le"]
    EvaluationConfig(**{name: top})
    check_bootstrap(argparse.Namespace(**{"bootstrap": None, "bootstrap_seed": None, name: top}))
    with pytest.raises(ValueError):
        EvaluationConfig(**{name: top + 1})
    with pytest.raises(NegtrainError, match="--bootstrap must be between"):
        check_bootstrap(argparse.Namespace(**{"bootstrap": None, "bootstrap_seed": None, name: top + 1}))


def test_an_off_switch_says_what_giving_it_does():
    # --no-log-samples once read "Write next to every prediction the exact prompt ...": the opposite.
    action = _action(_parser(), "--no-log-samples")
    assert action.help is not None and action.help.startswith("Do not write")
