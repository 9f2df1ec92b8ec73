"""The recipe settings a report card's flags set, defined once: each one's section, type on the
command line, default, bounds or choices and description. The recipe's fields
(``evaluation.bootstrap``, ``model.chat``, ...) are made from this table, and so are the flags of
``evaluate`` (``--bootstrap``, ``--chat``, ...), with the descriptions as their help, so the two
cannot drift (tests/test_card_settings.py).

A flag not given means "the recipe's value": a flag that takes a value is None unless given, and
a switch (``--chat``, ``--no-log-samples``) is off unless given; the card puts only what was given
into its recipe (negtrain/evaluation/card_plan.py).

It imports no pydantic, as ``server_settings`` does not: ``negtrain --help`` builds every flag
without loading the recipe schema (tests/test_cli_arguments.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

#: The most bootstrap resamples anything draws: intervals settle long before (1,000 are the
#: default); 100,000 take seconds per benchmark split, a billion would take hours.
MAX_BOOTSTRAP = 100_000

#: The largest bootstrap seed: numpy's seeds are 32-bit.
MAX_SEED = 2**32 - 1


@dataclass(frozen=True)
class CardSetting:
    #: The recipe section the setting is a field of.
    section: Literal["evaluation", "model"]
    name: str
    description: str
    default: Any
    #: value: the flag takes the setting's value (``--bootstrap N``); on: the flag alone turns it
    #: on (``--chat``); off: ``--no-<name>`` turns it off (``--no-log-samples``).
    switch: Literal["value", "on", "off"] = "value"
    #: The flag's value type on the command line.
    cli_type: Callable[[str], Any] = str
    #: Pydantic bounds (``ge``, ``le``).
    bounds: dict[str, Any] = field(default_factory=dict)
    #: The values the setting takes (the field's Literal, the flag's choices).
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    #: An off switch's own help: the description says what the setting does when on (the
    #: recipe's field), the flag ``--no-<name>`` what giving it does.
    off_help: str | None = None

    @property
    def option(self) -> str:
        return ("--no-" if self.switch == "off" else "--") + self.name.replace("_", "-")

    def field(self) -> Any:
        """The pydantic field of the recipe section."""
        from pydantic import Field  # the config floor's; only when the schema is built

        return Field(self.default, description=self.description, **self.bounds)

    def help(self) -> str:
        # A switch says its effect by being given; a value flag names the recipe's default.
        if self.switch == "off" and self.off_help:
            return self.off_help.replace("%", "%%")
        default = f" (default {self.default})" if self.switch == "value" and self.default is not None else ""
        return (self.description + default).replace("%", "%%")

    def argument(self) -> dict[str, Any]:
        """``add_argument``'s keywords for the flag (its option string is ``option``)."""
        if self.switch == "value":
            return {"dest": self.name, "type": self.cli_type, "choices": self.choices, "metavar": self.metavar,
                    "help": self.help()}
        return {"dest": self.name, "action": "store_true" if self.switch == "on" else "store_false", "help": self.help()}


CARD_SETTINGS: dict[str, CardSetting] = {s.name: s for s in (
    CardSetting(
        "evaluation", "bootstrap",
        "Resamples of the percentile bootstrap that gives every metric its ci95, drawing the "
        "benchmark's independent units (ScoNe contrast sets, NaN-NLI premises, CondaQA question groups, "
        "...) with replacement. 0 turns it off: no ci95, and stderr only for per-item means. 1,000 "
        "resamples cost under 0.1 s on CondaQA test on 2 CPU cores; at most 100,000.",
        1000, cli_type=int, bounds={"ge": 0, "le": MAX_BOOTSTRAP}, metavar="N",
    ),
    CardSetting(
        "evaluation", "bootstrap_seed",
        "Seed of the bootstrap draws; the same seed and outcomes give the same intervals. "
        "Independent of the recipe's `seed`, so runs with different training seeds are scored on the same resamples.",
        0, cli_type=int, bounds={"ge": 0, "le": MAX_SEED}, metavar="SEED",
    ),
    CardSetting(
        "evaluation", "log_samples",
        "Write next to every prediction the exact prompt the model saw (after the chat "
        "template) and its response (the generated text, or each label's score). `evaluate --no-log-samples` "
        "turns it off for very large runs.",
        True, switch="off",
        off_help="Do not write the prompts and responses next to the predictions (they are written by "
        "default: the exact prompt the model saw, after the chat template, and its response), for very large runs.",
    ),
    CardSetting(
        "evaluation", "truncate",
        "What a language model's evaluation does with a prompt that, with the room its answer needs, does "
        "not fit the model's context (its max_position_embeddings, or its tokenizer's model_max_length): 'none': "
        "an error before scoring, naming the row; 'left': cut from the start (BOS kept), the rows cut counted as "
        "n_truncated in the metrics and the logged prompt the text the model saw (`evaluate --truncate left`).",
        "none", choices=("none", "left"),
    ),
    CardSetting(
        "model", "chat",
        "seq2seq / causal_lm: apply the tokenizer's chat template to every prompt of every "
        "benchmark (`evaluate --chat`); a tokenizer without one is an error before the weights load.",
        False, switch="on",
    ),
    CardSetting("model", "system", "With `chat`: the system message put before every prompt (`evaluate --system`).",
                None, metavar="TEXT"),
    CardSetting(
        "model", "fewshot_as_multiturn",
        "With `chat`: few-shot demonstrations as alternating user/assistant turns; off: the "
        "whole few-shot prompt is one user turn (`evaluate --fewshot-as-multiturn`).",
        False, switch="on",
    ),
)}
