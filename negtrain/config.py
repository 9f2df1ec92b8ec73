"""The recipe schema: YAML validated into typed, documented config.

A recipe is data. Every field below is documented where it is declared, and ``negtrain recipes``
and the README point here. Unknown keys are rejected with a "did you mean" suggestion before any
work starts, so a typo never silently falls back to a default.
"""

from __future__ import annotations

import difflib
import typing
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from negtrain.errors import ConfigError
from negtrain.secrets import redact


class _Section(BaseModel):
    # allow_inf_nan=False: `1e999` is YAML for inf, which passes `gt=0`; no setting means inf or nan.
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)


#: Upper bounds on settings whose size turns into memory or threads: past them a run does not
#: fail, it exhausts the machine (an epoch of 10^13 examples is an index array of 80 TB).
MAX_SOURCE_WEIGHT = 1e6
MIN_TEMPERATURE, MAX_TEMPERATURE = 0.01, 1000.0
MAX_EPOCH_EXAMPLES = 100_000_000
MAX_TORCH_THREADS = 1024


class ModelConfig(_Section):
    name: str = Field(
        description="What to load with from_pretrained: a Hub id, a local path, or "
        "'pkg:<python package>/<subdir>' for a model shipped inside an installed package."
    )
    family: Literal["nli", "seq2seq", "causal_lm", "mlm"] = Field(
        "nli",
        description="Model family: 'nli' = sequence classification on premise/hypothesis pairs; "
        "'seq2seq' = AutoModelForSeq2SeqLM (T5, UnifiedQA, Flan-T5) that generates answers, or scores "
        "label words at its first decoder step; 'causal_lm' = AutoModelForCausalLM (Llama-style) "
        "that generates answers, or scores label words at the answer position; 'mlm' = masked "
        "language modelling (AutoModelForMaskedLM) with an `objective:` section.",
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
    prompt: str | None = Field(
        None,
        description="seq2seq / causal_lm: the input template, with the benchmark's input names as "
        "placeholders ('{sentence}' for tinad, '{passage}' and '{question}' for condaqa, "
        "'{premise}' and '{hypothesis}' for NLI benchmarks). Unset: the benchmark's default "
        "(see `negtrain evaluate --list`: NLI benchmarks ask 'Does this imply that \"{hypothesis}\"? "
        "Yes or no?'; tinad: 'Is the following statement True or False? {sentence}'; condaqa: "
        "UnifiedQA's '{passage} \\n {question}' for seq2seq, '{passage}\\nQuestion: {question}\\nAnswer:' "
        "for causal_lm). Applies to every benchmark; a data.train / data.eval entry's own `prompt` "
        "overrides it for that benchmark.",
    )
    verbalizer_score: Literal["sum", "mean"] = Field(
        "sum",
        description="seq2seq / causal_lm on label benchmarks: each label's score is the log-likelihood "
        "of its verbalizer's full continuation (every token, given the prompt and the earlier tokens); "
        "'sum' adds the token log-probabilities (the probability of the whole verbalizer), 'mean' "
        "divides by its number of tokens (per-token mean, so a long verbalizer is not penalised for "
        "its length). Equal for one-token verbalizers.",
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
    freeze_embeddings: bool = Field(
        False,
        description="Keep the input embeddings fixed. Benchmarks such as ScoNe test on words never seen "
        "in training; fine-tuning moves the embeddings of the training words only, which drags them "
        "away from the untouched test words.",
    )
    freeze: list[str] = Field(
        default_factory=list,
        description="Parameters kept fixed, as fnmatch globs over the model's parameter names, e.g. "
        "['*.encoder.layer.0.*', '*.encoder.layer.1.*'] for an encoder's bottom two layers. Frozen "
        "bottom layers also skip their backward pass. A pattern that matches nothing is an error.",
    )
    attn_implementation: Literal["eager", "sdpa", "flash_attention_2", "flex_attention"] | None = Field(
        None,
        description="transformers' attention kernel (from_pretrained's attn_implementation); unset: "
        "transformers' default (sdpa where the model supports it). On a CPU with short inputs, "
        "'eager' measured faster under bf16 (perf/results/settings.md).",
    )
    fp32_recheck_margin: float | None = Field(
        1.0,
        ge=0,
        description="Evaluation under bf16/fp16 autocast: examples whose top two logits (NLI family) "
        "or verbalizer log-likelihoods (seq2seq / causal_lm label benchmarks) are closer than this "
        "are scored again in fp32, so mixed-precision evaluation reports fp32's predictions "
        "(how far bf16 moves the gap, and how many examples 1.0 rescores: perf/results/settings.md). "
        "null: never recheck.",
    )
    first_token_only: bool = Field(
        True,
        description="NLI family, evaluation: the last encoder layer computes only the position the "
        "classification head reads ([CLS] / <s>), with keys and values over every token, so the "
        "logits are the same up to float rounding. BERT/RoBERTa/XLM-R classifiers; other models run "
        "in full. Training always runs the full layer: there it gains little (perf/results/settings.md) "
        "and would change the dropout draws.",
    )
    optimizer_impl: Literal["auto", "foreach", "fused", "for-loop"] = Field(
        "auto", description="AdamW implementation; 'auto' = 'fused' (by far the fastest on CPU) where torch supports it, else 'foreach'."
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
    path: str | None = Field(
        None,
        description="A trained peft adapter folder (adapter_config.json + weights) loaded onto the base "
        "instead of fresh LoRA weights, e.g. to evaluate it (`evaluate --model BASE --adapter DIR`). "
        "r, alpha, dropout and target_modules then come from the folder.",
    )


_PROMPT_HELP = (
    "seq2seq / causal_lm: this benchmark's input template (its input names as placeholders); "
    "unset: model.prompt, else the benchmark's default for the family. The resolved value is "
    "written to the run's recipe.yaml."
)
_VERBALIZER_HELP = (
    "seq2seq / causal_lm on a label benchmark: label -> the text that stands for it (every label, "
    "distinct texts), e.g. {entailment: yes, not_entailment: no}; unset: the benchmark's default. "
    "Evaluation scores each label by its text's log-likelihood; training targets the gold label's text."
)


class SourceConfig(_Section):
    benchmark: str = Field(description="A registered benchmark name (see `negtrain evaluate --list`).")
    split: str = Field(description="One of the benchmark's splits.")
    prompt: str | None = Field(None, description=_PROMPT_HELP)
    verbalizer: dict[str, str] | None = Field(None, description=_VERBALIZER_HELP)
    weight: float = Field(
        1.0,
        gt=0,
        le=MAX_SOURCE_WEIGHT,
        description="Relative sampling weight w_i: the source's share of an epoch is proportional to "
        "w_i * n_i (proportional mixing) or w_i * n_i^(1/T) (temperature mixing); see data.mix. "
        "At most 1e6 (only ratios of weights matter).",
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
        None,
        ge=MIN_TEMPERATURE,
        le=MAX_TEMPERATURE,
        description="T for sampling: temperature (required there, rejected otherwise); 0.01 to 1000 "
        "(T = 0.01 already gives a source 10x the size of another 10^100 times its share; T = 1000 "
        "is uniform to within 1%).",
    )
    epoch: Literal["all", "largest"] | int = Field(
        "all",
        description="Examples per epoch: 'all' (sum of the sources' sizes), 'largest' (one pass over "
        "the largest source) or a positive integer up to 100,000,000.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> MixConfig:
        if self.sampling == "temperature" and self.temperature is None:
            raise ValueError("mix.sampling 'temperature' needs mix.temperature (T in p_i ∝ n_i^(1/T))")
        if self.sampling != "temperature" and self.temperature is not None:
            raise ValueError("mix.temperature is only used with mix.sampling: temperature")
        if isinstance(self.epoch, int) and not 0 < self.epoch <= MAX_EPOCH_EXAMPLES:
            raise ValueError(
                f"mix.epoch must be 'all', 'largest' or a positive number of examples, at most {MAX_EPOCH_EXAMPLES:,}"
            )
        return self


class EvalConfig(_Section):
    """One benchmark split to score, with its own prompt, verbalizer and few-shot examples."""

    benchmark: str = Field(description="A registered benchmark name (see `negtrain evaluate --list`).")
    split: str = Field(description="One of the benchmark's splits.")
    prompt: str | None = Field(None, description=_PROMPT_HELP)
    verbalizer: dict[str, str] | None = Field(None, description=_VERBALIZER_HELP)
    shots: int = Field(
        0,
        ge=0,
        description="seq2seq / causal_lm: solved examples put before each prompt (in-context learning). "
        "Drawn per scored example, deterministically from the seed and the example's id, never from "
        "the scored example's contrast group; their ids are written next to each prediction.",
    )
    shots_split: str | None = Field(
        None,
        description="The split shots are drawn from; unset: the benchmark's train split, else (a "
        "benchmark with no train split, e.g. nannli) the scored split itself, minus the scored "
        "example's contrast group.",
    )


class DataConfig(_Section):
    train: list[SourceConfig] = Field(
        default_factory=list,
        description="Training sources. With the default weights and data.mix every example is seen once per epoch.",
    )
    mix: MixConfig = Field(default_factory=MixConfig, description="How training sources are mixed (see MixConfig).")
    eval: list[EvalConfig] | Literal["all"] = Field(
        default_factory=list,
        description="Benchmarks evaluated at the end of every epoch (and by `validate`). 'all': every "
        "benchmark the model family can score, on its test split(s) (`negtrain evaluate --list`); a "
        "benchmark whose data cannot be read is skipped and said so at the start; the resolved list "
        "is written to the run's recipe.yaml.",
    )
    test: list[EvalConfig] | Literal["all"] | None = Field(None, description="Benchmarks for `negtrain test`; defaults to `eval`.")
    batch_size: int = Field(
        32,
        gt=0,
        description="Training examples per device per step. Under DDP a step takes one batch per rank, "
        "so W ranks at batch_size b train exactly as one device at W*b (with bucket_by_length off): the "
        "loss is the mean over the step's examples (tokens for token-level losses) on all ranks.",
    )
    eval_batch_size: int = Field(
        128,
        gt=0,
        description="Evaluation examples per device per batch. Evaluation batches are always sorted by "
        "length; on a CPU a smaller batch can be faster (perf/results/settings.md).",
    )
    bucket_by_length: bool = Field(
        True,
        description="Group examples of similar length into batches so padding is small. Batches are still shuffled; examples within a pool of 50 batches are sorted by "
        "length. (Evaluation is always length-sorted.) Caveat: where length correlates with a subset "
        "(ScoNe's conditions), batches become nearly single-subset, which changes the training "
        "trajectory; turn it off to compare.",
    )
    num_workers: int = Field(0, ge=0, description="DataLoader workers; batches are cheap to build, so 0 is usually best.")
    num_proc: int | None = Field(
        None,
        gt=0,
        description="Processes that tokenize a split the first time it is used (it is then stored and mapped by "
        "every later run, rank and worker). null: every core this process may run on. Results are identical for "
        "any value; set 1 to keep tokenization off the other cores.",
    )


class TrainerConfig(_Section):
    """A typed subset of Lightning's Trainer arguments: what a recipe may set."""

    max_epochs: int = Field(3, gt=0)
    max_steps: int = Field(
        -1, ge=-1, description="Stop after this many optimizer steps (-1: no limit). Under DDP a step takes one batch on every rank."
    )
    accumulate_grad_batches: int = Field(1, gt=0)
    gradient_clip_val: float | None = Field(None, ge=0)
    precision: Literal["auto", "32", "32-true", "bf16-mixed", "16-mixed", "bf16-true"] = Field(
        "32-true",
        description="'bf16-mixed' autocasts matmuls to bf16: several times faster where the hardware computes "
        "bf16 (CUDA GPUs with bf16, CPUs with AVX512-BF16 or AMX, Arm CPUs with BF16), but on a CPU without "
        "bf16 units it is emulated and far slower than fp32. 'auto': bf16-mixed where bf16 is native, "
        "32-true elsewhere; the run prints which.",
    )
    accelerator: str = Field(
        "auto",
        description="Lightning accelerator: auto, cpu, gpu/cuda, mps, ... ; checked against the installed "
        "Lightning and this machine before any model is loaded.",
    )
    devices: int | Literal["auto"] = Field(1, description="Number of devices (processes, at least 1) per node, or 'auto'.")
    strategy: str = Field(
        "auto",
        description="Lightning strategy: auto, ddp, ddp_spawn, fsdp, deepspeed_stage_2, "
        "deepspeed_stage_3, ... (any name the installed Lightning registers). Checked against the "
        "adapter and the machine before any model is loaded.",
    )
    num_nodes: int = Field(
        1,
        gt=0,
        description="Machines taking part. More than 1 needs a multi-node launcher (torchrun, SLURM's "
        "srun, ...) or MASTER_ADDR, MASTER_PORT, NODE_RANK and WORLD_SIZE set on every node; "
        "without one a run would wait forever for the other nodes, so it is refused. Under a launcher "
        "each node prints where it waits and for how many nodes.",
    )
    limit_train_batches: int | float = Field(
        1.0,
        description="Fraction (float) or number (int) of training batches per epoch, counted in batches of "
        "data.batch_size as one device takes them: the same examples on any number of devices (under DDP "
        "they are dealt out to the ranks; Lightning's own limit would count per rank). 0 skips training.",
    )
    limit_val_batches: int | float = Field(
        1.0,
        description="Fraction (float) or number (int) of each evaluation set's batches (of data.eval_batch_size, "
        "longest inputs first), counted as one device takes them: the same examples on any number of devices. "
        "Also limits `test`. 0 skips evaluation.",
    )
    log_every_n_steps: int = Field(50, gt=0)
    deterministic: bool | Literal["warn"] = False
    torch_threads: int | None = Field(
        None, gt=0, le=MAX_TORCH_THREADS, description="torch.set_num_threads (1 to 1024); unset leaves torch's default."
    )
    enable_progress_bar: bool = True
    checkpoint_every_n_steps: int | None = Field(
        None,
        gt=0,
        description="Also write checkpoints/last.ckpt inside an epoch, every this many optimizer steps, so a "
        "killed run loses at most that many steps: `fit --resume` continues mid-epoch with the next batch "
        "and ends with the numbers of an uninterrupted run. Unset: at epoch ends only (and on SIGTERM/SIGUSR1, "
        "which always write one). Each write is a full checkpoint (weights and optimizer state): on a large "
        "model keep it to every few minutes.",
    )
    ema_decay: float | None = Field(
        None,
        gt=0,
        lt=1,
        description="Keep an exponential moving average of the weights (Lightning's WeightAveraging with "
        "torch's multi-tensor EMA, updated every optimizer step): evaluation, checkpoints and the final model use the average, "
        "and resume restores both. About 1/(1-decay) steps are averaged. Unset: no averaging.",
    )

    @field_validator("devices", mode="before")
    @classmethod
    def _devices(cls, v: Any) -> Any:
        if isinstance(v, bool) or not (v == "auto" or (isinstance(v, int) and v >= 1)):
            raise ValueError("must be a number of devices (1 or more) or 'auto'")
        return v

    @field_validator("limit_train_batches", "limit_val_batches")
    @classmethod
    def _limit(cls, v: int | float) -> int | float:
        if v < 0 or (isinstance(v, float) and v > 1.0):
            raise ValueError("must be a fraction in [0.0, 1.0] (float) or a number of batches >= 0 (int)")
        return v

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


def selection_split(monitor: str | None) -> str | None:
    """``scone/test/accuracy/one_scoped`` -> ``scone/test``: the split a selection metric is computed on."""
    return "/".join(monitor.split("/")[:2]) if monitor else None


def selection_bias_note(monitor: str, epochs: int) -> str:
    """Why the chosen epoch's numbers on the selection metric's own split flatter the model
    (``fit`` prints it, and report and model cards write it, when that split is reported)."""
    split = selection_split(monitor)
    return (
        f"The {split} numbers of the selected epoch are optimistic: {monitor} picked that epoch out of "
        f"{epochs} on the very split it is reported on. The last epoch's numbers are not selected; "
        f"select on a split you do not report for an unbiased figure."
    )


class LoggerConfig(_Section):
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


class SweepParameter(_Section):
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


class SweepConfig(_Section):
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


#: Sections a recipe may give as a single word: ``logger: wandb`` means ``logger: {backend: wandb}``.
SHORTHAND_SECTIONS = {"logger": "backend"}


class RetentionConfig(_Section):
    """A knowledge-retention term on plain text, added to the unlikelihood loss with its own weight.

    The text is read whole, not streamed (unlike ``cue_masking.corpus.streaming``): every batch
    draws its retention lines at random from the whole file, which needs every line at hand. It
    is a side term of a few lines per batch, so a retention file is small next to a corpus."""

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
        200,
        ge=0,
        description="Sentences held out (seeded draw) for the per-epoch MLM loss and cue recovery. With "
        "streaming: the cap on the eval set, which holds the first `held_out` held-out lines in file order.",
    )
    max_sentences: int | None = Field(None, gt=0, description="Cap on training sentences (seeded draw), for quick runs.")
    streaming: bool = Field(
        False,
        description="Read text_files as a stream, for a corpus larger than memory "
        "(negtrain/data/corpus_stream.py): one indexing pass (cached), then every epoch the lines are "
        "read in file order, shuffled inside windows of shuffle_buffer lines and tokenized batch by "
        "batch; a resumed run continues at the same line. Lines are held out by a hash of their text "
        "(held_out_rate), not by a seeded draw; duplicates are not removed. Needs text_files; "
        "from_train_benchmarks must be false and max_sentences unset (use trainer.max_steps or "
        "limit_train_batches for a short run).",
    )
    held_out_rate: float = Field(
        0.01,
        ge=0,
        lt=1,
        description="Streaming only: the share of lines held out, chosen by a keyed hash of the line's text, so the "
        "held-out set is the same for every seed, rank count and resume. Held-out lines are never trained on.",
    )
    shuffle_buffer: int = Field(
        10000,
        gt=0,
        description="Streaming only: training lines per shuffle window (each window is permuted, seeded by "
        "seed and epoch). A line moves at most one window; shuffle a topic-sorted corpus on disk first.",
    )

    @model_validator(mode="after")
    def _streaming(self) -> CorpusConfig:
        if not self.streaming:
            return self
        if not self.text_files:
            raise ValueError("streaming: true reads text_files; list at least one")
        if self.from_train_benchmarks:
            raise ValueError(
                "streaming: true reads text_files only; set from_train_benchmarks: false (or add the benchmark "
                "sentences to a text file)"
            )
        if self.max_sentences is not None:
            raise ValueError("streaming: true has no max_sentences; bound a short run with trainer.max_steps or limit_train_batches")
        return self


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
    """The training objective of the 'mlm' family: exactly one of the sections.

    Each section is named after its objective in ``negtrain/objectives/table.py``; adding an
    objective adds its settings class and one field here."""

    unlikelihood: UnlikelihoodConfig | None = None
    cue_masking: CueMaskingConfig | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> ObjectiveConfig:
        if len(self._set()) != 1:
            names = list(type(self).model_fields)
            raise ValueError(f"objective: set exactly one of {' or '.join(repr(n) for n in names)}")
        return self

    def _set(self) -> list[str]:
        return [name for name in type(self).model_fields if getattr(self, name) is not None]

    @property
    def name(self) -> str:
        """The chosen objective's name."""
        return self._set()[0]

    @property
    def settings(self) -> _Section:
        """The chosen objective's settings section."""
        return getattr(self, self.name)


class EvaluationConfig(_Section):
    """How the numbers of every evaluation are qualified (see negtrain/metrics/uncertainty.py)."""

    bootstrap: int = Field(
        1000,
        ge=0,
        description="Resamples of the percentile bootstrap that gives every metric its ci95, drawing the "
        "benchmark's independent units (ScoNe contrast sets, NaN-NLI premises, CondaQA question groups, "
        "...) with replacement. 0 turns it off: no ci95, and stderr only for per-item means. 1,000 "
        "resamples cost under 0.1 s on CondaQA test on 2 CPU cores.",
    )
    bootstrap_seed: int = Field(
        0, ge=0, le=2**32 - 1,
        description="Seed of the bootstrap draws; the same seed and outcomes give the same intervals. "
        "Independent of the recipe's `seed`, so runs with different training seeds are scored on the same resamples.",
    )


class Recipe(_Section):
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


def is_text_field(dotted: str) -> bool:
    """Whether ``dotted`` (e.g. ``model.prompt``) names a string field of the recipe.

    A command-line override of such a field is taken verbatim: parsed as YAML, ``a # b`` would
    lose its end, ``Statement: {x}`` would become a mapping and ``2024`` a number.
    """
    model: type[BaseModel] | None = Recipe
    parts = dotted.split(".")
    for part in parts[:-1]:
        field = model.model_fields.get(part) if model is not None else None
        model = _model_class(field.annotation) if field is not None else None
    field = model.model_fields.get(parts[-1]) if model is not None else None
    if field is None:
        return False
    annotation = field.annotation
    return annotation is str or set(typing.get_args(annotation)) == {str, type(None)}


def _is_mapping_of_models(annotation: Any) -> bool:
    if typing.get_origin(annotation) is dict:
        return True
    return any(_is_mapping_of_models(a) for a in typing.get_args(annotation))


def _field_paths(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every dotted key of ``model``'s sections, e.g. ``model.learning_rate`` (lists and free-form
    mappings are not entered: their items have no fixed path)."""
    paths = []
    for name, field in model.model_fields.items():
        dotted = f"{prefix}.{name}" if prefix else name
        paths.append(dotted)
        sub = _model_class(field.annotation)
        origin = typing.get_origin(field.annotation)
        inner = [typing.get_origin(a) for a in typing.get_args(field.annotation)]
        if sub is not None and not _is_mapping_of_models(field.annotation) and list not in (origin, *inner):
            paths += _field_paths(sub, dotted)
    return paths


def _suggestion(key: str, fields: typing.Iterable[str]) -> str:
    """A "did you mean" for an unknown key: the closest field of its own section, or a key of the
    same name in another section when that is closer (``--lerning_rate`` means
    ``model.learning_rate``)."""

    def best(word: str, choices: list[str], cutoff: float) -> tuple[float, str | None]:
        close = difflib.get_close_matches(word, choices, n=1, cutoff=cutoff)
        return (difflib.SequenceMatcher(None, word, close[0]).ratio(), close[0]) if close else (0.0, None)

    own_score, own = best(key, list(fields), 0.5)
    by_leaf: dict[str, str] = {}
    for path in _field_paths(Recipe):
        if "." in path:
            by_leaf.setdefault(path.rsplit(".", 1)[-1], path)
    leaf_score, leaf = best(key, list(by_leaf), 0.75)
    if leaf is not None and leaf_score > own_score:
        return f" (did you mean '{by_leaf[leaf]}'?)"
    return f" (did you mean '{own}'?)" if own is not None else ""


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
            raise ConfigError(f"{where}: unknown key '{dotted}'{_suggestion(str(key), fields)}")
        annotation = fields[key].annotation
        sub = _model_class(annotation)
        if sub is not None and _is_mapping_of_models(annotation):
            # dict[str, Model]: the keys are free (e.g. sweep parameter names), the values are checked.
            if isinstance(value, dict):
                for name, item in value.items():
                    check_keys(item, sub, where, f"{dotted}.{name}")
        elif sub is not None:
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


#: Limits on a YAML document's shape. A recipe is a few levels deep and a few hundred values;
#: past these, a document is a mistake or an attack: 20,000 nested ``[`` overflow the parser's
#: recursion, and nine aliases of nine aliases ("billion laughs") expand to 10^9 values that any
#: walk over the recipe (validation, saving, logging) takes forever to visit.
MAX_YAML_DEPTH = 100
MAX_YAML_VALUES = 100_000


class _StrictLoader(yaml.SafeLoader):
    """safe_load that refuses duplicate mapping keys (plain YAML keeps the last one silently, so a
    recipe with ``learning_rate`` twice would train with whichever came second), documents nested
    deeper than :data:`MAX_YAML_DEPTH` and documents whose aliases expand to more than
    :data:`MAX_YAML_VALUES` values."""

    def __init__(self, stream) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent, index):
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise yaml.composer.ComposerError(
                    None, None, f"nested more than {MAX_YAML_DEPTH} levels deep", self.peek_event().start_mark
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def get_single_node(self):
        node = super().get_single_node()
        if node is not None:
            _check_expanded_size(node)
        return node

    def construct_mapping(self, node, deep=False):
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key '{key}' (first at line {seen[key] + 1})", key_node.start_mark
                )
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


def _check_expanded_size(root: yaml.Node) -> None:
    """Refuse a document whose aliases expand to more than MAX_YAML_VALUES values, or that
    contains itself (``&a [*a]``).

    A node reached through several aliases is one object in memory but is visited once per path
    by everything that walks the recipe, so what counts is the expanded size. Sizes are memoised
    per node and computed bottom-up without recursion (the depth may be up to MAX_YAML_DEPTH)."""
    size: dict[int, int] = {}
    open_: set[int] = set()  # nodes whose children are being sized: meeting one again is a cycle
    stack: list[yaml.Node] = [root]
    while stack:
        node = stack[-1]
        if id(node) in size:
            stack.pop()
            continue
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        else:
            size[id(node)] = 1
            stack.pop()
            continue
        pending = [c for c in children if id(c) not in size]
        if pending and id(node) not in open_:
            open_.add(id(node))
            for child in pending:
                if id(child) in open_:
                    raise yaml.composer.ComposerError(
                        None, None, "an alias refers to a collection that contains it (a cycle)", child.start_mark
                    )
            stack.extend(pending)
            continue
        if pending:  # a child still unsized after its turn: it is an ancestor, reached again
            raise yaml.composer.ComposerError(
                None, None, "an alias refers to a collection that contains it (a cycle)", node.start_mark
            )
        open_.discard(id(node))
        stack.pop()
        size[id(node)] = 1 + sum(size[id(c)] for c in children)
        if size[id(node)] > MAX_YAML_VALUES:
            raise yaml.composer.ComposerError(
                None, None, f"expands to more than {MAX_YAML_VALUES:,} values through aliases (&anchor / *alias)",
                node.start_mark,
            )


def parse_yaml(text: str) -> Any:
    """YAML text as data, with :class:`_StrictLoader`'s limits (raises yaml.YAMLError)."""
    return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 (a SafeLoader subclass)


def load_yaml(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"recipe file not found: {path}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the recipe ({exc.strerror or exc})") from None
    try:
        return parse_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}:{line}: invalid YAML: {getattr(exc, 'problem', exc)}") from None


def to_dict(recipe: Recipe) -> dict[str, Any]:
    """The resolved recipe as plain data: what is saved next to the weights and sent to loggers.

    Secrets found in the environment (API keys, tokens) are masked, so they reach neither
    ``recipe.yaml`` nor the W&B config nor a model card.
    """
    # Values only: every key is a schema field, none of them a secret, and masking by name would
    # turn e.g. cue_token: cue into '***' in the recipe.yaml that resume reads back.
    return redact(recipe.model_dump(mode="json"), by_key=False)
