"""A model family defined here alone, one module and one row, is scored on a label benchmark with no
file of the package changed.

The family, ``negation_word``, is a rule rather than a network, the annotation-artifact baseline of
NLI: a (premise, hypothesis) pair that holds a negation word is the benchmark's second label
(contradiction, not_entailment), otherwise its first (entailment). A rule, so
that the expected accuracy can be counted by hand below, independently of the evaluation path the
family goes through (recipe validation, the scoring matrix, the report card, the Lightning
Trainer, the metric, the predictions file). This module is the family's one module; the
``negation_word`` fixture adds its one row (:func:`negtrain.config.register_family`) and takes it out
after the test.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, Literal

import pytest
import torch
from pydantic import Field
from transformers import AutoTokenizer

from negtrain.benchmarks.matrix import unsupported_reason
from negtrain.benchmarks.registry import get_benchmark
from negtrain.cli import main
from negtrain.config import FAMILY_SECTIONS, ModelSection, families, register_family, unregister_family, validate_recipe
from negtrain.data.eval_set import EvalSet
from negtrain.data.module import NegtrainData
from negtrain.core.errors import ConfigError
from negtrain.models.base import NegtrainModule
from negtrain.models.contract import Built
from negtrain.models.nli import encode_pairs
from negtrain.models.sources import resolve_model_name

CUES = ["not", "no", "never", "nobody", "nothing"]


class NegationWordModule(NegtrainModule):
    def __init__(self, cue_ids: list[int], config, eval_sets, recipe) -> None:
        super().__init__(config, eval_sets, recipe)
        self.register_buffer("cue_ids", torch.tensor(cue_ids), persistent=False)

    def training_loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        raise ConfigError("the negation_word family is a rule: it has nothing to train")

    def predict(self, batch: dict[str, torch.Tensor], eval_set: EvalSet) -> torch.Tensor:
        ids = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -1)  # padding is no cue
        return torch.isin(ids, self.cue_ids).any(-1).long()  # id 0: the first label, id 1: the second


def build_negation_word(recipe, loaded) -> Built:
    """The family's builder: recipe and loaded benchmark data in, module and data out. It reads
    only two-label benchmarks' pairs; a test family need not be general."""
    tokenizer = AutoTokenizer.from_pretrained(resolve_model_name(recipe.model.name))
    cue_ids = tokenizer.convert_tokens_to_ids(recipe.model.cues)
    eval_sets = [
        EvalSet(bench, split, rows, encode_pairs(tokenizer, rows, recipe.model.max_length), metric=bench.scorer(rows))
        for bench, split, rows in loaded.eval
    ]
    module = NegationWordModule(cue_ids, recipe.model, eval_sets, recipe)
    return Built(module, NegtrainData(recipe.data, recipe.seed, tokenizer.pad_token_id, None, eval_sets), tokenizer)


class NegationWordSection(ModelSection):
    """``family: negation_word``: a negation word means the second label."""

    family: Literal["negation_word"] = "negation_word"
    answer_kinds: ClassVar[tuple[str, ...]] = ("label",)
    auto_class: ClassVar[str] = "AutoModel"  # the tokenizer's folder holds an encoder; no weights are used
    builder: ClassVar[Any] = build_negation_word
    cues: list[str] = Field(default_factory=lambda: list(CUES), description="The tokens that count as negation cues.")


@pytest.fixture
def negation_word():
    name = register_family(NegationWordSection)
    try:
        yield name
    finally:
        unregister_family(name)


def _hand_count(tokenizer, rows) -> list[int]:
    """The rule, by hand: per pair, 1 when a word of either sentence is a cue, else 0."""
    return [int(any(token in CUES for text in row.inputs for token in tokenizer.tokenize(text))) for row in rows]


def test_a_family_defined_in_a_test_is_scored_on_a_label_benchmark(negation_word, data_dir, minilm_path, tmp_path, capsys):
    assert negation_word in families()
    out = tmp_path / "card"
    code = main(["evaluate", "--model", minilm_path, "--family", negation_word, "--benchmarks", "scone", "--out", str(out),
                 "--bootstrap", "0", "--trainer.enable_progress_bar=false"])
    assert code == 0, capsys.readouterr().err

    bench = get_benchmark("scone")
    rows = bench.load("test")
    expected = _hand_count(AutoTokenizer.from_pretrained(minilm_path), rows)
    gold = [bench.labels.index(row.label) for row in rows]
    written = [json.loads(line) for line in (out / "predictions" / "scone-test-validate.jsonl").read_text().splitlines()]
    assert [bench.labels.index(line["prediction"]) for line in written] == expected
    assert 0 < sum(expected) < len(expected)  # the rule says both labels: the check above can fail
    record = next(json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines())
    hand_accuracy = sum(p == g for p, g in zip(expected, gold, strict=True)) / len(rows)
    assert record["metrics"]["accuracy"] == pytest.approx(hand_accuracy, abs=1e-6)
    assert (out / "card.md").read_text().count("negation_word") >= 1


def test_the_registered_family_is_in_every_table_and_gone_after(negation_word):
    scone, condaqa = get_benchmark("scone"), get_benchmark("condaqa")
    assert unsupported_reason(scone, negation_word) is None  # label benchmark: its answer kind is declared
    assert "does not score" in unsupported_reason(condaqa, negation_word)  # text answers: not declared
    recipe = {"description": "x", "model": {"name": "m", "family": negation_word, "cues": ["not"]},
              "data": {"eval": [{"benchmark": "scone", "split": "test"}]}}
    assert type(validate_recipe(recipe, "r.yaml").model) is NegationWordSection
    # Its setting on another family's recipe names it, as a shipped family's would.
    nli = {**recipe, "model": {"name": "m", "cues": ["not"]}}
    with pytest.raises(ConfigError, match=r"'model.cues' is a setting of model.family negation_word, not of model.family 'nli'"):
        validate_recipe(nli, "r.yaml")
    with pytest.raises(ConfigError, match="already has a family 'negation_word'"):
        register_family(NegationWordSection)


def test_unregistered_the_family_is_unknown_again(negation_word):
    unregister_family(negation_word)
    try:
        assert negation_word not in FAMILY_SECTIONS
        recipe = {"description": "x", "model": {"name": "m", "family": negation_word}, "data": {"eval": [{"benchmark": "scone", "split": "test"}]}}
        with pytest.raises(ConfigError, match=r"model.family: Input should be 'nli', 'seq2seq', 'causal_lm' or 'mlm' \(got 'negation_word'\)"):
            validate_recipe(recipe, "r.yaml")
        with pytest.raises(ConfigError, match="ships with negtrain"):
            unregister_family("nli")
    finally:
        register_family(NegationWordSection)  # the fixture takes it out


def test_a_section_that_is_not_a_family_is_refused():
    class Loose(ModelSection):
        answer_kinds: ClassVar[tuple[str, ...]] = ("label",)
        builder: ClassVar[Any] = build_negation_word

    with pytest.raises(ConfigError, match=r"family must be declared as Literal\['<name>'\]"):
        register_family(Loose)

    class Mute(ModelSection):
        family: Literal["mute"] = "mute"
        builder: ClassVar[Any] = build_negation_word

    with pytest.raises(ConfigError, match="declares no answer_kinds"):
        register_family(Mute)
    assert "mute" not in families()


def test_a_misspelt_answer_kind_or_builder_is_named():
    from negtrain.models.families import get_family

    class Typo(ModelSection):
        family: Literal["typo"] = "typo"
        answer_kinds: ClassVar[tuple[str, ...]] = ("labels",)
        builder: ClassVar[Any] = "negtrain.models.nli:build_nil"

    register_family(Typo)
    try:
        with pytest.raises(ConfigError, match=r"model family 'typo' declares answer kind 'labels' \(did you mean 'label'\?\)"):
            unsupported_reason(get_benchmark("scone"), "typo")
        with pytest.raises(ConfigError, match=r"Typo.builder 'negtrain.models.nli:build_nil' names no importable function"):
            _ = get_family("typo").build
    finally:
        unregister_family("typo")
