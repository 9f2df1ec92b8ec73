"""The whole recipe: its sections, validating a parsed mapping into it, and turning it back into data."""

from __future__ import annotations

import typing
from typing import Any

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from negtrain.config.data import DataConfig
from negtrain.config.evaluation import EvaluationConfig
from negtrain.config.model import FAMILY_PICK, FAMILY_SECTIONS, AdapterConfig, ModelConfig, families_where, family_names, family_of
from negtrain.config.objective import ObjectiveConfig
from negtrain.config.section import Section
from negtrain.config.selection import SelectionConfig
from negtrain.config.suggestions import check_keys, field_sections
from negtrain.config.tracking import LoggerConfig, SweepConfig
from negtrain.config.trainer import TrainerConfig
from negtrain.core.errors import ConfigError, did_you_mean
from negtrain.core.secrets import redact, redact_text

#: Sections a recipe may give as a single word: ``logger: wandb`` means ``logger: {backend: wandb}``.
SHORTHAND_SECTIONS = {"logger": "backend"}


class Recipe(Section):
    description: str = Field(description="One line: what this recipe trains or reproduces.")
    seed: int = Field(42, ge=0, le=2**32 - 1, description="Seeds weights, data order and masks (numpy and torch accept 0 to 2**32-1).")
    seeds: list[int] | None = Field(
        None,
        description="`fit` without --seeds or --seed trains the recipe once per seed, as `fit --seeds` does (for a "
        "paper that averages seeds, e.g. CondaQA's five, Appendix C.1); `seed` is then each run's own.",
    )
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
    objective: ObjectiveConfig | None = Field(None, description="The 'mlm' family's training objective (required there when it trains; evaluation alone needs none).")

    @field_validator("logger", mode="before")
    @classmethod
    def _logger_shorthand(cls, v: Any) -> Any:
        return {SHORTHAND_SECTIONS["logger"]: v} if isinstance(v, str) else v

    @field_validator("seeds")
    @classmethod
    def _distinct_seeds(cls, v: list[int] | None) -> list[int] | None:
        if v is None:
            return v
        if not v or len(set(v)) != len(v) or any(not 0 <= s <= 2**32 - 1 for s in v):
            raise ValueError("seeds: one or more distinct seeds from 0 to 2**32-1")
        return v

    @model_validator(mode="after")
    def _has_something_to_do(self) -> Recipe:
        corpus = self.objective is not None and self.objective.cue_masking is not None
        if not self.data.train and not self.data.eval and not corpus:
            raise ValueError("data: a recipe needs at least one data.train source or data.eval benchmark")
        takers = family_names(families_where("trains_objective"))
        if self.objective is not None and not self.model.trains_objective:
            raise ValueError(f"objective: only the {takers} family takes an objective section")
        # An evaluation-only mlm recipe (a report card) scores probes with no objective; training
        # needs one.
        if self.model.trains_objective and self.objective is None and self.data.train:
            raise ValueError(f"objective: the {takers} family trains with an objective section ({' or '.join(ObjectiveConfig.model_fields)})")
        return self


def is_text_field(dotted: str) -> bool:
    """Whether ``dotted`` (e.g. ``model.prompt``) names a string field of the recipe.

    A command-line override of such a field is taken verbatim: parsed as YAML, ``a # b`` would
    lose its end, ``Statement: {x}`` would become a mapping and ``2024`` a number.
    """
    sections: list[type[BaseModel]] = [Recipe]
    parts = dotted.split(".")
    for part in parts[:-1]:
        fields = [s.model_fields[part] for s in sections if part in s.model_fields]
        sections = [sub for f in fields for sub in field_sections(f)]
    annotations = [s.model_fields[parts[-1]].annotation for s in sections if parts[-1] in s.model_fields]
    # A setting of several families' sections (model.prompt) has the same type in each.
    return any(a is str or set(typing.get_args(a)) == {str, type(None)} for a in annotations)


#: Every key of the model section before it was typed per family. A run's recipe.yaml written by
#: a release before that lists all of them, the settings of other families included (at values
#: that release ignored); such a file still loads, without those settings. A recipe written by
#: hand never lists them all, so there a setting of another family stays an error.
OLD_MODEL_KEYS = frozenset({
    "name", "family", "init_from", "head_labels", "max_length", "prompt", "verbalizer_score", "normalize_input",
    "chat_template", "prompt_loss_weight", "max_target_length", "max_new_tokens", "learning_rate", "weight_decay",
    "warmup_ratio", "scheduler", "freeze_embeddings", "freeze", "attn_implementation", "fp32_recheck_margin",
    "first_token_only", "optimizer_impl",
})


def without_other_families(raw: dict[str, Any]) -> dict[str, Any]:
    """An old run's recipe (see OLD_MODEL_KEYS) with its model section cut to its own family's settings."""
    model = raw.get("model")
    if not (isinstance(model, dict) and OLD_MODEL_KEYS <= set(model) and family_of(model) in FAMILY_SECTIONS):
        return raw
    own = FAMILY_SECTIONS[family_of(model)].model_fields
    return {**raw, "model": {key: value for key, value in model.items() if key in own}}


def validate_recipe(raw: Any, where: str) -> Recipe:
    """Validate a parsed recipe mapping; ``where`` names its source in error messages."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: a recipe must be a YAML mapping, got {type(raw).__name__}")
    raw = without_other_families(raw)
    check_keys(raw, Recipe, where)
    model = raw.get("model")
    if isinstance(model, dict) and family_of(model) not in FAMILY_SECTIONS:
        given = family_of(model)
        hint = (did_you_mean(given, FAMILY_SECTIONS) or REGISTER_HINT) if isinstance(given, str) else ""
        raise ConfigError(f"{where}: model.family: Input should be {FAMILY_PICK.expected()} (got {given!r}){hint}")
    try:
        return Recipe.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "(top level)"
        given = f" (got {redact_text(repr(first['input']))})" if "input" in first and not isinstance(first["input"], dict) else ""
        raise ConfigError(f"{where}: {loc}: {first['msg']}{given}") from exc


#: What an unknown family's error says when no shipped family's name is close: a family kept
#: outside the package is known only once registered, in the process that reads the recipe.
REGISTER_HINT = "; a family defined outside negtrain must be registered first: negtrain.config.register_family(YourSection)"


def validate_section(raw: Any, name: str, where: str) -> Section:
    """One top-level section of a parsed recipe (``trainer``, ``selection``, ...), validated alone,
    with its defaults where the recipe leaves it out. For a reader that needs no model (``report``
    of a run): the run of a family not registered in this process is read all the same."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: a recipe must be a YAML mapping, got {type(raw).__name__}")
    section = Recipe.model_fields[name].annotation
    assert isinstance(section, type) and issubclass(section, Section), f"{name} is not a section of its own"
    value = raw.get(name)
    value = {} if value is None else value
    check_keys(value, section, where, prefix=name, root=Recipe)
    try:
        return section.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in (name, *first["loc"]))
        given = f" (got {redact_text(repr(first['input']))})" if "input" in first and not isinstance(first["input"], dict) else ""
        raise ConfigError(f"{where}: {loc}: {first['msg']}{given}") from exc


def to_dict(recipe: Recipe) -> dict[str, Any]:
    """The resolved recipe as plain data: what is saved next to the weights and sent to loggers.

    Secrets found in the environment (API keys, tokens) are masked, so they reach neither
    ``recipe.yaml`` nor the W&B config nor a model card.
    """
    # Values only: every key is a schema field, none of them a secret, and masking by name would
    # turn e.g. cue_token: cue into '***' in the recipe.yaml that resume reads back.
    return redact(recipe.model_dump(mode="json"), by_key=False)
