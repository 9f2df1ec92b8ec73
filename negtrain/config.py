"""The recipe schema: YAML validated into typed, documented config.

A recipe is data. Every field below is documented where it is declared, and ``negtrain recipes``
and the README point here. Unknown keys are rejected with a "did you mean" suggestion before any
work starts, so a typo never silently falls back to a default.
"""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from negtrain.errors import ConfigError, did_you_mean


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class ModelConfig(_Section):
    name: str = Field(
        description="What to load with from_pretrained: a Hub id, a local path, or "
        "'pkg:<python package>/<subdir>' for a model shipped inside an installed package."
    )
    family: Literal["nli", "mlm"] = Field(
        "nli",
        description="Model family: 'nli' = sequence classification on premise/hypothesis pairs; "
        "'mlm' = masked language modelling (AutoModelForMaskedLM) with an `objective:` section.",
    )
    init_from: str | None = Field(
        None,
        description="Start from a previous negtrain run: its run directory (the best checkpoint, else "
        "last.ckpt, with the tokenizer and config in <run>/model/) or a .ckpt file inside one. The "
        "encoder weights load into this family's model (an MLM run's encoder into a sequence "
        "classifier), and the run's tokenizer, with any added [CUE] token, comes along. `name` is then "
        "only recorded for provenance.",
    )
    head_labels: list[str] | None = Field(
        None,
        description="Label names of the classification head, in head order. Leave unset to take "
        "them from the checkpoint's id2label; a checkpoint without NLI label names gets a fresh "
        "head sized to the training data's label space.",
    )
    max_length: int = Field(256, gt=8, description="Truncate encoded inputs to this many tokens.")
    learning_rate: float = Field(2e-5, gt=0)
    weight_decay: float = Field(0.01, ge=0)
    warmup_ratio: float = Field(0.0, ge=0, lt=1, description="Fraction of optimizer steps spent in linear warmup.")
    scheduler: Literal["linear", "constant", "cosine"] = "linear"
    optimizer_impl: Literal["auto", "foreach", "fused", "for-loop"] = Field(
        "auto", description="AdamW implementation; 'fused' is the fastest where torch supports it."
    )


class SourceConfig(_Section):
    benchmark: str = Field(description="A registered benchmark name (see `negtrain evaluate --list`).")
    split: str = Field(description="One of the benchmark's splits.")
    weight: float = Field(
        1.0,
        gt=0,
        description="Relative sampling weight w_i: the source's share of an epoch is proportional to "
        "w_i * n_i (proportional mixing) or w_i * n_i^(1/T) (temperature mixing); see data.mix.",
    )


class MixConfig(_Section):
    """How the training sources are mixed into epochs.

    Source i has n_i examples and weight w_i. Its share of an epoch is

    - ``sampling: proportional``: p_i = w_i * n_i / sum_j w_j * n_j;
    - ``sampling: temperature``:  p_i = w_i * n_i^(1/T) / sum_j w_j * n_j^(1/T) (T = 1 is
      proportional; a larger T flattens the mix towards small sources; T -> inf is uniform).

    An epoch has E examples, ``epoch``:

    - ``all`` (default): E = sum_i n_i, the size of all sources together;
    - ``largest``: one pass over the largest source: it contributes exactly its n_max examples,
      each once, and E = n_max / p_max;
    - an integer N: E = N examples.

    Source i contributes c_i = p_i * E examples, rounded so the counts sum to E (largest
    remainders). A source with c_i > n_i is oversampled: it contributes floor(c_i / n_i) full passes
    plus c_i mod n_i distinct examples; one with c_i < n_i contributes c_i distinct examples. Which
    examples is drawn from the seed and the epoch number: the same seed gives the same epochs,
    and every epoch draws afresh. With the defaults (all weights 1, proportional, ``all``) every
    example is seen exactly once per epoch, in the same order as unmixed training. The realised
    per-source counts of each epoch are logged in metrics.jsonl (the ``sources`` field of the
    ``train`` line).
    """

    sampling: Literal["proportional", "temperature"] = Field(
        "proportional", description="'proportional': p_i ∝ w_i·n_i; 'temperature': p_i ∝ w_i·n_i^(1/T)."
    )
    temperature: float | None = Field(
        None, gt=0, description="T for sampling: temperature (required there, rejected otherwise)."
    )
    epoch: Literal["all", "largest"] | int = Field(
        "all",
        description="Examples per epoch: 'all' (sum of the sources' sizes), 'largest' (one pass over "
        "the largest source) or a positive integer.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> MixConfig:
        if self.sampling == "temperature" and self.temperature is None:
            raise ValueError("mix.sampling 'temperature' needs mix.temperature (T in p_i ∝ n_i^(1/T))")
        if self.sampling != "temperature" and self.temperature is not None:
            raise ValueError("mix.temperature is only used with mix.sampling: temperature")
        if isinstance(self.epoch, int) and self.epoch <= 0:
            raise ValueError("mix.epoch must be 'all', 'largest' or a positive number of examples")
        return self


class EvalConfig(_Section):
    benchmark: str
    split: str


class DataConfig(_Section):
    train: list[SourceConfig] = Field(
        default_factory=list,
        description="Training sources. With the default weights and data.mix every example is seen once per epoch.",
    )
    mix: MixConfig = Field(default_factory=MixConfig, description="How training sources are mixed (see MixConfig).")
    eval: list[EvalConfig] = Field(
        default_factory=list, description="Benchmarks evaluated at the end of every epoch (and by `validate`)."
    )
    test: list[EvalConfig] | None = Field(None, description="Benchmarks for `negtrain test`; defaults to `eval`.")
    batch_size: int = Field(32, gt=0, description="Training examples per device per step.")
    eval_batch_size: int = Field(128, gt=0)
    bucket_by_length: bool = Field(
        True,
        description="Group examples of similar length into batches so padding is small. Batches are "
        "still shuffled; examples within a pool of 50 batches are sorted by length.",
    )
    num_workers: int = Field(0, ge=0, description="DataLoader workers; batches are cheap to build, so 0 is usually best.")


class TrainerConfig(_Section):
    """A typed subset of Lightning's Trainer arguments: what a recipe may set."""

    max_epochs: int = Field(3, gt=0)
    max_steps: int = Field(-1, description="Stop after this many optimizer steps (-1: no limit).")
    accumulate_grad_batches: int = Field(1, gt=0)
    gradient_clip_val: float | None = Field(None, ge=0)
    precision: Literal["32", "32-true", "bf16-mixed", "16-mixed", "bf16-true"] = Field(
        "32-true", description="'bf16-mixed' autocasts matmuls to bf16; on CPUs with bf16 units it is several times faster."
    )
    accelerator: str = "auto"
    devices: int | str = Field(1, description="Number of devices (processes), or 'auto'.")
    strategy: str = Field("auto", description="Lightning strategy: auto, ddp, ddp_spawn, fsdp, ...")
    num_nodes: int = Field(1, gt=0)
    limit_train_batches: int | float = Field(1.0, description="Fraction (float) or number (int) of training batches per epoch.")
    limit_val_batches: int | float = Field(1.0, description="Fraction (float) or number (int) of evaluation batches.")
    log_every_n_steps: int = Field(50, gt=0)
    deterministic: bool | Literal["warn"] = False
    torch_threads: int | None = Field(None, gt=0, description="torch.set_num_threads; unset leaves torch's default.")
    enable_progress_bar: bool = True

    @field_validator("precision", mode="before")
    @classmethod
    def _precision_as_str(cls, v: Any) -> Any:
        return str(v) if isinstance(v, int) else v


class SelectionConfig(_Section):
    metric: str | None = Field(
        None,
        description="'<benchmark>/<split>/<metric>' that picks the best checkpoint. Whether higher is "
        "better comes from the metric's declaration. Unset: the first eval benchmark's first metric.",
    )


class RetentionConfig(_Section):
    """A knowledge-retention term on plain text, added to the unlikelihood loss with its own weight."""

    text_files: list[str] = Field(description="Line-delimited UTF-8 text files (one passage a line).")
    weight: float = Field(gt=0, description="The term's weight: loss = γ·UL + (1−γ)·LL + weight·retention.")
    loss: Literal["mlm", "kl"] = Field(
        "mlm",
        description="'mlm': cross-entropy on randomly masked tokens; 'kl': KL(frozen start model ‖ model) at "
        "those masked positions.",
    )
    mlm_probability: float = Field(0.15, gt=0, le=1)
    batch_size: int = Field(8, gt=0, description="Retention lines drawn (with a seeded generator) per training batch.")


class UnlikelihoodConfig(_Section):
    """Unlikelihood training on negated-LAMA probes (Hosseini et al. 2021).

    Per probe, with m the mask position and o the object token:
    UL = −log(1 − p(o | negated sentence)); LL = −log p(o | affirmative sentence) ('ce') or
    KL(p_start ‖ p_model) over the vocabulary at m of the affirmative sentence ('kl', the paper's code);
    loss = γ·UL + (1−γ)·LL, averaged over the batch, plus the optional retention term.
    """

    gamma: float = Field(0.5, ge=0, le=1, description="γ: the weight of the unlikelihood term.")
    likelihood: Literal["kl", "ce"] = Field("kl", description="The affirmative term: 'kl' to the frozen start model, or 'ce' on obj_label.")
    multi_token_objects: Literal["reject", "first_subtoken"] = Field(
        "reject",
        description="An obj_label that is several tokens: 'reject' (a DataError naming the probe) or "
        "'first_subtoken' (train and score on its first sub-token).",
    )
    retention: RetentionConfig | None = Field(None, description="Optional retention term on plain text.")


class CorpusConfig(_Section):
    """The cue-masking corpus: text files and/or the text of the recipe's data.train benchmark splits."""

    text_files: list[str] = Field(default_factory=list, description="Line-delimited UTF-8 text files.")
    from_train_benchmarks: bool = Field(
        True, description="Add the sentences of every data.train benchmark split's input texts (deduplicated)."
    )
    keep: Literal["cue_sentences", "all"] = Field(
        "cue_sentences", description="'cue_sentences': keep only sentences with a negation cue (CueNB's corpus)."
    )
    held_out: int = Field(
        200, ge=0, description="Sentences held out (seeded draw) for the per-epoch MLM loss and cue recovery."
    )
    max_sentences: int | None = Field(None, gt=0, description="Cap on training sentences (seeded draw), for quick runs.")


class CueMaskingConfig(_Section):
    """Negation-cue masking (CueNB, Truong et al. 2022)."""

    cue_mask_prob: float = Field(1.0, ge=0, le=1, description="Probability of masking each negation-cue token.")
    cue_token: Literal["cue", "mask"] = Field(
        "cue",
        description="What a masked cue becomes: 'cue' = a new special token [CUE] (added, embeddings "
        "resized), 'mask' = the tokenizer's mask token.",
    )
    mlm_probability: float = Field(0.15, ge=0, le=1, description="Masking rate of the other (non-cue) tokens.")
    mask_replace_prob: float = Field(0.8, ge=0, le=1, description="Of the masked non-cue tokens: share replaced by the mask token.")
    random_replace_prob: float = Field(0.1, ge=0, le=1, description="... share replaced by a random token (the rest stay).")
    corpus: CorpusConfig = Field(default_factory=CorpusConfig)

    @model_validator(mode="after")
    def _shares(self) -> CueMaskingConfig:
        if self.mask_replace_prob + self.random_replace_prob > 1 + 1e-9:
            raise ValueError("mask_replace_prob + random_replace_prob must be at most 1")
        return self


class ObjectiveConfig(_Section):
    """The training objective of the 'mlm' family: exactly one of the sections."""

    unlikelihood: UnlikelihoodConfig | None = None
    cue_masking: CueMaskingConfig | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> ObjectiveConfig:
        if (self.unlikelihood is None) == (self.cue_masking is None):
            raise ValueError("objective: set exactly one of 'unlikelihood' or 'cue_masking'")
        return self


class Recipe(_Section):
    description: str = Field(description="One line: what this recipe trains or reproduces.")
    seed: int = 42
    model: ModelConfig
    data: DataConfig = Field(default_factory=DataConfig)
    trainer: TrainerConfig = Field(default_factory=TrainerConfig)
    selection: SelectionConfig = Field(default_factory=SelectionConfig)
    objective: ObjectiveConfig | None = Field(None, description="The 'mlm' family's objective (required there).")

    @model_validator(mode="after")
    def _has_something_to_do(self) -> Recipe:
        corpus = self.objective is not None and self.objective.cue_masking is not None
        if not self.data.train and not self.data.eval and not corpus:
            raise ValueError("data: a recipe needs at least one data.train source or data.eval benchmark")
        if (self.model.family == "mlm") != (self.objective is not None):
            raise ValueError("objective: the 'mlm' family needs an objective section, and only it takes one")
        return self


# --------------------------------------------------------------------------------------------
# Unknown-key checking with suggestions. Pydantic would reject the key too, but could not say
# which known key was meant, and a typo in a 10-epoch recipe deserves a precise answer.


def _model_class(annotation: Any) -> type[BaseModel] | None:
    """The BaseModel inside an annotation such as ``X``, ``list[X]`` or ``X | None``."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_class(arg)
        if found is not None:
            return found
    return None


def check_keys(raw: Any, model: type[BaseModel], where: str, prefix: str = "") -> None:
    if isinstance(raw, list):
        for i, item in enumerate(raw):
            check_keys(item, model, where, f"{prefix}[{i}]")
        return
    if not isinstance(raw, dict):
        return
    fields = model.model_fields
    for key, value in raw.items():
        dotted = f"{prefix}.{key}" if prefix else str(key)
        if key not in fields:
            raise ConfigError(f"{where}: unknown key '{dotted}'{did_you_mean(str(key), fields)}")
        sub = _model_class(fields[key].annotation)
        if sub is not None:
            check_keys(value, sub, where, dotted)


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


def load_yaml(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"recipe file not found: {path}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}:{line}: invalid YAML: {getattr(exc, 'problem', exc)}") from None


def to_dict(recipe: Recipe) -> dict[str, Any]:
    """The resolved recipe as plain data: what is saved next to the weights and sent to loggers."""
    return recipe.model_dump(mode="json")
