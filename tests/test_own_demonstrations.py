"""protocol.md marks a row whose few-shot demonstrations are partly negtrain's choice with †, with
a legend line: ScoNe's ``reasoning`` strategy (She et al. 2023, Appendix E.12 prints demonstration
sets for No Negation and One Scoped only; the sets the other four conditions get are chosen here)."""

from __future__ import annotations

import pytest

from negtrain.core.errors import ConfigError
from negtrain.evaluation.protocol import protocol_markdown
from negtrain.io.records import EvalRecord
from negtrain.prompts.protocols import get_protocol
from negtrain.prompts.strategies import get_strategy, parse_strategies

OWN = ("one_not_scoped", "two_not_scoped", "two_scoped", "one_scoped_one_not_scoped")


def _records(protocol) -> list[EvalRecord]:
    return [EvalRecord({"epoch": 0, "benchmark": "scone", "split": "test", "variant": v.name,
                        "metrics": {"accuracy": 0.5, "n": 1200.0}}) for v in protocol.variants]


def test_scone_reasoning_few_shot_is_marked_and_explained():
    assert get_strategy("scone", "reasoning").fewshot.chosen_by_negtrain == OWN
    protocol = get_protocol("scone-icl")
    text = protocol_markdown(protocol, _records(protocol), "m", 0, 0)
    rows = [line.split(" | ")[0].lstrip("| ") for line in text.splitlines() if line.startswith("| ") and "/" in line.split(" | ")[0]]
    marked = [r for r in rows if r.endswith(" †")]
    assert marked == ["reasoning/few †"]  # the zero-shot row and every other strategy's paper shots are the paper's
    legend = [line for line in text.splitlines() if line.startswith("† after reasoning/few:")]
    assert len(legend) == 1
    assert ("the demonstrations shown to one_not_scoped, two_not_scoped, two_scoped, one_scoped_one_not_scoped examples are "
            "negtrain's choice (one_not_scoped -> no_negation, two_not_scoped -> no_negation, two_scoped -> no_negation, "
            "one_scoped_one_not_scoped -> one_scoped); the paper prints demonstrations for no_negation, one_scoped only") in legend[0]
    # a run without the reasoning/few variant has no such legend
    without = [r for r in _records(protocol) if r["variant"] != "reasoning/few"]
    assert "† after" not in protocol_markdown(protocol, without, "m", 0, 0)


def test_chosen_by_negtrain_names_subsets_of_demonstrations_for():
    raw = {"benchmark": "scone", "strategies": {"r": {"template": "{premise}", "fewshot": {
        "template": "{premise}", "demonstrations_for": {"no_negation": "a"}, "demonstration_sets": {"a": [["q", "a"]]},
        "chosen_by_negtrain": ["no_negaton"]}}}}
    with pytest.raises(ConfigError, match="chosen_by_negtrain: 'no_negaton' is not a subset of demonstrations_for.*did you mean 'no_negation'"):
        parse_strategies(raw, "scone.yaml")
