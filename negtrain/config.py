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
    family: Literal["nli", "seq2seq", "causal_lm"] = Field(
        "nli",
        description="Model family: 'nli' = sequence classification on premise/hypothesis pairs; "
        "'seq2seq' = AutoModelForSeq2SeqLM (T5, UnifiedQA, Flan-T5) that generates answers, or scores "
        "label words at its first decoder step; 'causal_lm' = AutoModelForCausalLM (Llama-style) "
        "that generates answers, or scores label words at the answer position.",
    )
    head_labels: list[str] | None = Field(
        None,
        description="Label names of the classification head, in head order. Leave unset to take "
        "them from the checkpoint's id2label; a checkpoint without NLI label names gets a fresh "
        "head sized to the training data's label space.",
    )
    max_length: int = Field(256, gt=8, description="Truncate encoded inputs to this many tokens.")
    prompt: str | None = Field(
        None,
        description="seq2seq / causal_lm: the input template, with the benchmark's input names as "
        "placeholders ('{sentence}' for tinad, '{passage}' and '{question}' for condaqa, "
        "'{premise}' and '{hypothesis}' for NLI benchmarks). Unset: the benchmark's default "
        "(tinad: 'Is the following statement True or False? {sentence}'; condaqa: UnifiedQA's "
        "'{passage} \\n {question}', the separator being a literal backslash-n).",
    )
    normalize_input: Literal["none", "unifiedqa"] = Field(
        "none",
        description="'unifiedqa': lower-case the input and target and turn tabs and newlines into "
        "single spaces, as UnifiedQA(-v2) was trained.",
    )
    chat_template: bool = Field(
        True, description="causal_lm: wrap the prompt in the tokenizer's chat template when it has one."
    )
    prompt_loss_weight: float = Field(
        0.0,
        ge=0,
        le=1,
        description="causal_lm: loss weight of prompt tokens relative to answer tokens (0: the loss "
        "is on the answer tokens only).",
    )
    max_target_length: int = Field(32, gt=0, description="Truncate target answers to this many tokens.")
    max_new_tokens: int = Field(16, gt=0, description="Generation length limit for free-text answers (greedy, deterministic).")
    learning_rate: float = Field(2e-5, gt=0)
    weight_decay: float = Field(0.01, ge=0)
    warmup_ratio: float = Field(0.0, ge=0, lt=1, description="Fraction of optimizer steps spent in linear warmup.")
    scheduler: Literal["linear", "constant", "cosine"] = "linear"
    optimizer_impl: Literal["auto", "foreach", "fused", "for-loop"] = Field(
        "auto", description="AdamW implementation; 'fused' is the fastest where torch supports it."
    )


class AdapterConfig(_Section):
    """Parameter-efficient fine-tuning with peft, for every family."""

    type: Literal["none", "lora", "qlora"] = Field(
        "none",
        description="'none': train every weight. 'lora': LoRA adapters on a full-precision base. "
        "'qlora': LoRA on a base quantized by bitsandbytes (see `bits`), prepared with peft's "
        "prepare_model_for_kbit_training. A classification head stays fully trainable; checkpoints "
        "then hold only the trainable weights (adapter + head).",
    )
    r: int = Field(8, gt=0, description="LoRA rank.")
    alpha: float = Field(16, gt=0, description="LoRA alpha (the update is scaled by alpha / r).")
    dropout: float = Field(0.05, ge=0, lt=1, description="Dropout on the LoRA input.")
    target_modules: list[str] | Literal["all-linear"] = Field(
        "all-linear",
        description="Module names to adapt (e.g. [q_proj, v_proj]) or 'all-linear' for every linear "
        "layer except the output layer.",
    )
    bits: Literal[4, 8] = Field(4, description="qlora: quantize the base to 4-bit NF4 or to 8-bit.")


class SourceConfig(_Section):
    benchmark: str = Field(description="A registered benchmark name (see `negtrain evaluate --list`).")
    split: str = Field(description="One of the benchmark's splits.")
    weight: float = Field(1.0, gt=0, description="Relative sampling weight when training data is mixed.")


class EvalConfig(_Section):
    benchmark: str
    split: str


class DataConfig(_Section):
    train: list[SourceConfig] = Field(
        default_factory=list,
        description="Training sources. With the default weights every example is seen once per epoch.",
    )
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
    strategy: str = Field(
        "auto",
        description="Lightning strategy: auto, ddp, ddp_spawn, fsdp, deepspeed_stage_2, "
        "deepspeed_stage_3, ... (any name the installed Lightning registers). Checked against the "
        "adapter and the machine before any model is loaded.",
    )
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


class Recipe(_Section):
    description: str = Field(description="One line: what this recipe trains or reproduces.")
    seed: int = 42
    model: ModelConfig
    adapter: AdapterConfig = Field(default_factory=AdapterConfig)
    data: DataConfig = Field(default_factory=DataConfig)
    trainer: TrainerConfig = Field(default_factory=TrainerConfig)
    selection: SelectionConfig = Field(default_factory=SelectionConfig)

    @model_validator(mode="after")
    def _has_something_to_do(self) -> Recipe:
        if not self.data.train and not self.data.eval:
            raise ValueError("data: a recipe needs at least one data.train source or data.eval benchmark")
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
