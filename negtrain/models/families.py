"""The one table of model families: ``model.family`` in a recipe names a row here.

A family is an object: its settings section, which also declares what the family is and can do
(``negtrain/config/model.py``: whether benchmarks reach it through prompts, whether it has a
classification head, exports, can be served, its auto class and peft task type; declared there
because the command line and the scoring matrix read them without importing torch), and its
builder, which takes the validated recipe and its loaded benchmark data and returns the
family's LightningModule and DataModule (:class:`negtrain.models.contract.Built`).

No code outside this table and the settings sections compares a family's name: it asks the
family (tests/test_layers.py checks). Adding a family: its module (settings section and
builder) and one row here; ARCHITECTURE.md, "How to add", says where.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from negtrain.config import CausalLmModelConfig, MlmModelConfig, ModelSection, NliModelConfig, Seq2SeqModelConfig
from negtrain.errors import unknown_name
from negtrain.models.contract import Built
from negtrain.models.lm import build_causal_lm, build_seq2seq
from negtrain.models.mlm import build_mlm
from negtrain.models.nli import build_nli


@dataclass(frozen=True)
class Family:
    #: The family's settings section; its ``family`` default is the family's name.
    settings: type[ModelSection]
    #: (recipe, loaded data) -> Built.
    build: Callable[..., Built]

    @property
    def name(self) -> str:
        return self.settings.model_fields["family"].default


FAMILIES: dict[str, Family] = {
    family.name: family
    for family in (
        Family(NliModelConfig, build_nli),
        Family(Seq2SeqModelConfig, build_seq2seq),
        Family(CausalLmModelConfig, build_causal_lm),
        Family(MlmModelConfig, build_mlm),
    )
}


def get_family(name: str) -> Family:
    try:
        return FAMILIES[name]
    except KeyError:
        raise unknown_name("model family", name, FAMILIES) from None
