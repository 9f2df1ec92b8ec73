"""The whole recipe: its sections, validating a parsed mapping into it, and turning it back into data."""

from __future__ import annotations

import typing
from typing import Any

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from negtrain.config.data import DataConfig
from negtrain.config.evaluation import EvaluationConfig
from negtrain.config.model import AdapterConfig, ModelConfig
from negtrain.config.objective import ObjectiveConfig
from negtrain.config.section import Section
from negtrain.config.selection import SelectionConfig
from negtrain.config.suggestions import check_keys, model_class
from negtrain.config.tracking import LoggerConfig, SweepConfig
from negtrain.config.trainer import TrainerConfig
from negtrain.errors import ConfigError
from negtrain.secrets import redact

#: Sections a recipe may give as a single word: ``logger: wandb`` means ``logger: {backend: wandb}``.
SHORTHAND_SECTIONS = {"logger": "backend"}


class Recipe(Section):
    description: str = Field(description="One line: what this recipe trains or reproduces.")
    seed: int = Field(42, ge=0, le=2**32 - 1, description="Seeds weights, data order and masks (numpy and torch accept 0 to 2**32-1).")
    model: ModelConfig
    adapter: AdapterConfig = Field(default_factory=AdapterConfig)
    data: DataConfig = Field(default_factory=DataConfig)
    trainer: TrainerConfig = Field(default_factory=TrainerConfig)
    selection: SelectionConfig = Field(default_factory=SelectionConfig)
    evaluation: EvaluationConfig = Field(
        default_factory=EvaluationConfig, description="Standard errors and bootstrap intervals of every metric."
    )
    logger: LoggerConfig = Field(default_factory=LoggerConfig, description="Experiment tracking (W&B); 'wandb' or 'none' for short.")
    sweep: SweepConfig | None = Field(None, description="A W&B hyperparameter sweep over this recipe (`negtrain sweep`).")

    @field_validator("logger", mode="before")
    @classmethod
    def _logger_shorthand(cls, v: Any) -> Any:
        return {SHORTHAND_SECTIONS["logger"]: v} if isinstance(v, str) else v
    objective: ObjectiveConfig | None = Field(None, description="The 'mlm' family's training objective (required there when it trains; evaluation alone needs none).")

    @model_validator(mode="after")
    def _has_something_to_do(self) -> Recipe:
        corpus = self.objective is not None and self.objective.cue_masking is not None
        if not self.data.train and not self.data.eval and not corpus:
            raise ValueError("data: a recipe needs at least one data.train source or data.eval benchmark")
        if self.objective is not None and self.model.family != "mlm":
            raise ValueError("objective: only the 'mlm' family takes an objective section")
        # An evaluation-only mlm recipe (a report card) scores probes with no objective; training
        # needs one.
        if self.model.family == "mlm" and self.objective is None and self.data.train:
            raise ValueError("objective: the 'mlm' family trains with an objective section (unlikelihood or cue_masking)")
        return self


def is_text_field(dotted: str) -> bool:
    """Whether ``dotted`` (e.g. ``model.prompt``) names a string field of the recipe.

    A command-line override of such a field is taken verbatim: parsed as YAML, ``a # b`` would
    lose its end, ``Statement: {x}`` would become a mapping and ``2024`` a number.
    """
    model: type[BaseModel] | None = Recipe
    parts = dotted.split(".")
    for part in parts[:-1]:
        field = model.model_fields.get(part) if model is not None else None
        model = model_class(field.annotation) if field is not None else None
    field = model.model_fields.get(parts[-1]) if model is not None else None
    if field is None:
        return False
    annotation = field.annotation
    return annotation is str or set(typing.get_args(annotation)) == {str, type(None)}


def validate_recipe(raw: Any, where: str) -> Recipe:
    """Validate a parsed recipe mapping; ``where`` names its source in error messages."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: a recipe must be a YAML mapping, got {type(raw).__name__}")
    check_keys(raw, Recipe, where)
    try:
        return Recipe.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "(top level)"
        given = f" (got {first['input']!r})" if "input" in first and not isinstance(first["input"], dict) else ""
        raise ConfigError(f"{where}: {loc}: {first['msg']}{given}") from None


def to_dict(recipe: Recipe) -> dict[str, Any]:
    """The resolved recipe as plain data: what is saved next to the weights and sent to loggers.

    Secrets found in the environment (API keys, tokens) are masked, so they reach neither
    ``recipe.yaml`` nor the W&B config nor a model card.
    """
    # Values only: every key is a schema field, none of them a secret, and masking by name would
    # turn e.g. cue_token: cue into '***' in the recipe.yaml that resume reads back.
    return redact(recipe.model_dump(mode="json"), by_key=False)
