"""The ``logger:`` and ``sweep:`` sections: experiment tracking and W&B hyperparameter sweeps."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from negtrain.config.section import Section


#: Characters W&B does not allow in a project or entity name.
WANDB_NAME_FORBIDDEN = "/\\#?%:"


class LoggerConfig(Section):
    """Experiment tracking. The file outputs (metrics.jsonl, predictions/) are written either way.

    In a recipe, ``logger: wandb`` / ``logger: none`` is short for ``logger: {backend: ...}``, and
    ``--logger=none`` on the command line turns tracking off. Without a W&B API key, or with
    ``WANDB_MODE=offline``, the W&B run is written offline inside the run directory and the
    ``wandb sync`` command that uploads it is printed.
    """

    backend: Literal["wandb", "none"] = Field("none", description="'wandb': Weights & Biases through Lightning's WandbLogger; 'none': no tracking.")
    project: str = Field("negtrain", description="W&B project.")
    entity: str | None = Field(None, description="W&B entity (user or team); unset: the account's default.")
    name: str | None = Field(None, description="W&B run name; unset: the run directory's name.")
    group: str | None = Field(None, description="W&B run group, e.g. to gather seeds of one setup.")
    tags: list[str] = Field(default_factory=list, description="W&B run tags.")
    log_predictions: bool = Field(
        False, description="Also log every epoch's predictions per benchmark as a wandb.Table (id, prediction, label, correct)."
    )

    @field_validator("project", "entity")
    @classmethod
    def _wandb_name(cls, v: str | None) -> str | None:
        # W&B refuses these names only when the run starts (with an error of its own); say it here.
        if v is None:
            return v
        bad = sorted({c for c in v if c in WANDB_NAME_FORBIDDEN})
        if bad or not v.strip() or len(v) > 128:
            why = f"it may not contain {' '.join(repr(c) for c in bad)}" if bad else "it must be 1 to 128 characters"
            raise ValueError(f"{v!r} is not a W&B name: {why} (a project or entity name, not a path)")
        return v


class SweepParameter(Section):
    """One swept recipe key, in W&B's parameter syntax."""

    values: list[Any] | None = Field(None, description="The values to try (grid, random, bayes).")
    value: Any = Field(None, description="A single fixed value.")
    min: float | None = Field(None, description="Lower bound of a range (random, bayes).")
    max: float | None = Field(None, description="Upper bound of a range (random, bayes).")
    distribution: Literal[
        "constant", "categorical", "int_uniform", "uniform", "q_uniform", "log_uniform_values",
        "q_log_uniform_values", "normal", "q_normal", "log_normal", "q_log_normal",
    ] | None = Field(None, description="W&B distribution for a range; unset lets W&B infer it from min/max.")
    q: float | None = Field(None, gt=0, description="Quantization step of q_* distributions.")
    mu: float | None = None
    sigma: float | None = None

    @model_validator(mode="after")
    def _one_form(self) -> SweepParameter:
        given = [self.values is not None, self.value is not None, self.min is not None or self.max is not None]
        if sum(given) != 1:
            raise ValueError("a sweep parameter needs exactly one of: values, value, or min + max")
        if (self.min is None) != (self.max is None):
            raise ValueError("a sweep range needs both min and max")
        if self.values is not None and not self.values:
            raise ValueError("values: give at least one value")
        return self


class SweepConfig(Section):
    """A W&B sweep over recipe keys; see `negtrain sweep`. Trials run `negtrain fit` with this recipe."""

    method: Literal["grid", "random", "bayes"] = Field(description="W&B search method.")
    metric: str | None = Field(
        None,
        description="'<benchmark>/<split>/<metric>' to optimise; unset: selection.metric. Whether to "
        "maximize or minimize comes from the metric's declaration.",
    )
    parameters: dict[str, SweepParameter] = Field(
        description="Swept recipe keys in the dotted form of command-line overrides, e.g. model.learning_rate."
    )
    run_cap: int | None = Field(None, gt=0, description="Stop the sweep after this many trials (random/bayes).")

    @field_validator("parameters")
    @classmethod
    def _some(cls, v: dict[str, SweepParameter]) -> dict[str, SweepParameter]:
        if not v:
            raise ValueError("give at least one parameter")
        return v
