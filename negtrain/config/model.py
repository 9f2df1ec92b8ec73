"""The ``model:`` and ``adapter:`` sections, and the one table of model families.

The model section is typed per family: ``family`` picks one of the classes below, each with the
shared fields of :class:`ModelSection` and only its own family's settings, so a setting of another
family is an error that names the family it belongs to. A family *is* its section: the class
declares what the family can do (prompts, head, export, serving, auto class, peft task, answer
kinds) and names its builder on the models floor (``builder``), so the command line and the
scoring matrix read a family without importing torch. :data:`FAMILY_SECTIONS` is the table; it is
read when a recipe is validated, not when this module is imported, so a family added with
:func:`register_family` (a plugin's, or a test's) is validated, suggested and scored like the
four that ship.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BeforeValidator, Field, SerializeAsAny, TypeAdapter, model_validator

from negtrain.config.section import MAX_LENGTH, PickedSection, Section
from negtrain.core.card_settings import CARD_SETTINGS
from negtrain.core.errors import ConfigError
from negtrain.core.plugins import PluginTable


#: The family a model section without ``family:`` has.
DEFAULT_FAMILY = "nli"


class ModelSection(Section):
    """What every family's model section has: the weights to load and how to optimise them."""

    # What the family is, declared with its settings so that every floor (and the command line,
    # which imports no torch) reads it here.
    #: The family's builder: ``"module:function"`` on the models floor (recipe and loaded data in,
    #: ``negtrain.models.contract.Built`` out), named rather than imported so that this floor stays
    #: free of torch; ``negtrain.models.families`` imports it when a run is built. A family
    #: registered at run time may give the function itself.
    builder: ClassVar[str | Callable[..., Any]] = ""
    #: Whether the family trains a recipe ``objective:`` (and needs one).
    trains_objective: ClassVar[bool] = False
    #: Whether benchmarks reach the model through a prompt (prompt, verbalizer, shots, chat apply).
    reads_prompts: ClassVar[bool] = False
    #: Whether the model ends in a classification head that is fitted to the labels (replaced
    #: when it does not match; its labels decide the prediction space).
    has_head: ClassVar[bool] = False
    #: Whether ``negtrain export`` writes its runs as from_pretrained folders.
    exports: ClassVar[bool] = False
    #: Whether a served model (``evaluate --backend openai``) can stand in for it.
    served: ClassVar[bool] = False
    #: The transformers auto class its weights load with, and peft's task type for its adapters.
    auto_class: ClassVar[str] = ""
    peft_task_type: ClassVar[str | None] = None
    #: The answer kinds (``AnswerKind`` values: label, text, choice, cloze) the family can score;
    #: with the benchmark's own refusals, this decides the scoring matrix
    #: (``negtrain.benchmarks.matrix.unsupported_reason``).
    answer_kinds: ClassVar[tuple[str, ...]] = ()
    #: Why the family cannot score a benchmark of another kind (unset: a generic sentence).
    cannot_score: ClassVar[str] = ""

    name: str = Field(
        description="What to load with from_pretrained: a Hub id, a local path, or "
        "'pkg:<python package>/<subdir>' for a model shipped inside an installed package."
    )
    family: str = Field(
        DEFAULT_FAMILY,
        description="Model family: 'nli' = sequence classification on premise/hypothesis pairs; "
        "'seq2seq' = AutoModelForSeq2SeqLM (T5, UnifiedQA, Flan-T5) that generates answers, or scores "
        "label words at its first decoder step; 'causal_lm' = AutoModelForCausalLM (Llama-style) "
        "that generates answers, or scores label words at the answer position; 'mlm' = masked "
        "language modelling (AutoModelForMaskedLM) with an `objective:` section. Each family takes "
        "the settings below and its own (see its class).",
    )
    init_from: str | None = Field(
        None,
        description="Start from a previous negtrain run: its run directory (the best checkpoint, else "
        "last.ckpt, with the tokenizer and config in <run>/model/) or a .ckpt file inside one. The "
        "encoder weights load into this family's model (an MLM run's encoder into a sequence "
        "classifier), and the run's tokenizer, with any added [CUE] token, comes along. `name` is then "
        "only recorded for provenance.",
    )
    max_length: int = Field(256, gt=8, le=MAX_LENGTH, description="Truncate encoded inputs to this many tokens.")
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
    optimizer_impl: Literal["auto", "foreach", "fused", "for-loop"] = Field(
        "auto", description="AdamW implementation; 'auto' = 'fused' (by far the fastest on CPU) where torch supports it, else 'foreach'."
    )


class _Rechecked(ModelSection):
    """Families that score by comparing logits, and can recheck near-ties in fp32."""

    fp32_recheck_margin: float | None = Field(
        1.0,
        ge=0,
        description="Evaluation under bf16/fp16 autocast: examples whose top two logits (NLI family) "
        "or verbalizer log-likelihoods (seq2seq / causal_lm label benchmarks) are closer than this "
        "are scored again in fp32, so mixed-precision evaluation reports fp32's predictions "
        "(how far bf16 moves the gap, and how many examples 1.0 rescores: perf/results/settings.md). "
        "null: never recheck.",
    )


class NliModelConfig(_Rechecked):
    """``family: nli``: a sequence classifier on premise/hypothesis pairs."""

    family: Literal["nli"] = "nli"
    builder: ClassVar[str | Callable[..., Any]] = "negtrain.models.nli:build_nli"
    has_head: ClassVar[bool] = True
    exports: ClassVar[bool] = True
    auto_class: ClassVar[str] = "AutoModelForSequenceClassification"
    answer_kinds: ClassVar[tuple[str, ...]] = ("label",)
    peft_task_type: ClassVar[str | None] = "SEQ_CLS"  # keeps the classification head fully trainable
    head_labels: list[str] | None = Field(
        None,
        description="Label names of the classification head, in head order. Leave unset to take "
        "them from the checkpoint's id2label; a checkpoint without NLI label names gets a fresh "
        "head sized to the training data's label space.",
    )
    first_token_only: bool = Field(
        True,
        description="NLI family, evaluation: the last encoder layer computes only the position the "
        "classification head reads ([CLS] / <s>), with keys and values over every token, so the "
        "logits are the same up to float rounding. BERT/RoBERTa/XLM-R classifiers; other models run "
        "in full. Training always runs the full layer: there it gains little (perf/results/settings.md) "
        "and would change the dropout draws.",
    )


class LanguageModelConfig(_Rechecked):
    """What the seq2seq and causal_lm families share: prompts, verbalizers and generation limits."""

    reads_prompts: ClassVar[bool] = True
    answer_kinds: ClassVar[tuple[str, ...]] = ("label", "text", "choice")

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
    max_target_length: int = Field(32, gt=0, description="Truncate target answers to this many tokens.")
    max_new_tokens: int = Field(16, gt=0, description="Generation length limit for free-text answers (greedy, deterministic).")
    # The card's flags (evaluate --chat, --system, --fewshot-as-multiturn) are made from the same
    # table as these fields.
    chat: bool = CARD_SETTINGS["chat"].field()
    system: str | None = CARD_SETTINGS["system"].field()
    fewshot_as_multiturn: bool = CARD_SETTINGS["fewshot_as_multiturn"].field()

    def wraps_in_chat_template(self) -> bool:
        """Whether prompts go through the tokenizer's chat template when it has one: with ``chat``;
        a causal LM also with ``chat_template``."""
        return self.chat


class Seq2SeqModelConfig(LanguageModelConfig):
    """``family: seq2seq``: an encoder-decoder (T5, UnifiedQA, Flan-T5)."""

    family: Literal["seq2seq"] = "seq2seq"
    builder: ClassVar[str | Callable[..., Any]] = "negtrain.models.lm:build_seq2seq"
    auto_class: ClassVar[str] = "AutoModelForSeq2SeqLM"
    peft_task_type: ClassVar[str | None] = "SEQ_2_SEQ_LM"


class CausalLmModelConfig(LanguageModelConfig):
    """``family: causal_lm``: a decoder-only language model (Llama-style)."""

    family: Literal["causal_lm"] = "causal_lm"
    builder: ClassVar[str | Callable[..., Any]] = "negtrain.models.lm:build_causal_lm"
    served: ClassVar[bool] = True
    auto_class: ClassVar[str] = "AutoModelForCausalLM"
    # The next token after the text before a blank that ends the sentence (negated LAMA).
    answer_kinds: ClassVar[tuple[str, ...]] = ("label", "text", "choice", "cloze")
    peft_task_type: ClassVar[str | None] = "CAUSAL_LM"
    chat_template: bool = Field(
        False,
        description="causal_lm: wrap the prompt in the tokenizer's chat template when it has one (training "
        "and evaluation). Off by default: a prompt reaches the model as written unless this or `chat` "
        "(`evaluate --chat`) says otherwise.",
    )
    prompt_loss_weight: float = Field(
        0.0,
        ge=0,
        le=1,
        description="causal_lm: loss weight of prompt tokens relative to answer tokens (0: the loss "
        "is on the answer tokens only).",
    )
    prompt_loss: Literal["per_token", "share"] = Field(
        "per_token",
        description="causal_lm: how prompt_loss_weight weighs the prompt. 'per_token': each prompt token's "
        "weight, an answer token's being 1. 'share': the prompt tokens of an example together carry this "
        "share of its loss (each weighs answer_tokens * w / ((1 - w) * prompt_tokens)), as the TINAD "
        "authors' training code does.",
    )

    def wraps_in_chat_template(self) -> bool:
        return self.chat or self.chat_template

    @model_validator(mode="after")
    def _share_below_one(self) -> CausalLmModelConfig:
        if self.prompt_loss == "share" and self.prompt_loss_weight >= 1:
            raise ValueError("prompt_loss_weight: a share of the loss below 1 with prompt_loss: share (1 leaves the answer no weight)")
        return self


class MlmModelConfig(ModelSection):
    """``family: mlm``: masked language modelling, trained by the recipe's ``objective:``."""

    family: Literal["mlm"] = "mlm"
    builder: ClassVar[str | Callable[..., Any]] = "negtrain.models.mlm:build_mlm"
    trains_objective: ClassVar[bool] = True
    auto_class: ClassVar[str] = "AutoModelForMaskedLM"
    answer_kinds: ClassVar[tuple[str, ...]] = ("cloze",)
    cannot_score: ClassVar[str] = (
        "the mlm family trains negation objectives and scores only the [MASK] cloze probes (negated_probes, negated_lama)"
    )


#: The table of model families: name -> settings section, in the order they are listed everywhere.
#: Read when used, never copied at import: :func:`register_family` may add a row (its first read
#: loads the installed plugins, which may: negtrain.core.plugins).
FAMILY_SECTIONS: PluginTable[str, type[ModelSection]] = PluginTable("family", {
    "nli": NliModelConfig,
    "seq2seq": Seq2SeqModelConfig,
    "causal_lm": CausalLmModelConfig,
    "mlm": MlmModelConfig,
})
#: The families that ship; :func:`unregister_family` removes only those added at run time.
SHIPPED_FAMILIES = FAMILY_SECTIONS.shipped


def families() -> tuple[str, ...]:
    """The model families a recipe can name (``model.family``), as the table has them now."""
    return tuple(FAMILY_SECTIONS)


#: How the model section is picked: by ``family``, from :data:`FAMILY_SECTIONS`, read at validation.
FAMILY_PICK = PickedSection(FAMILY_SECTIONS, key="family", default=DEFAULT_FAMILY)


def family_of(raw: Any) -> str:
    """The family a model section (a mapping or a section) names; unset: :data:`DEFAULT_FAMILY`."""
    return FAMILY_PICK.tag(raw)

#: The ``model:`` section: the class of its ``family``. Serialized as that class (SerializeAsAny),
#: so ``recipe.yaml`` keeps the family's own settings.
ModelConfig = Annotated[SerializeAsAny[ModelSection], FAMILY_PICK, BeforeValidator(FAMILY_PICK.validate)]

_MODEL_ADAPTER: TypeAdapter = TypeAdapter(ModelConfig)


def model_config(**settings: Any) -> ModelSection:
    """A model section from keyword settings, typed by its ``family`` (``nli`` when unset)."""
    return _MODEL_ADAPTER.validate_python(settings)


def families_where(declared: str) -> list[str]:
    """The families whose declaration ``declared`` (e.g. ``reads_prompts``) is true."""
    return [name for name, cls in FAMILY_SECTIONS.items() if getattr(cls, declared)]


def family_names(names: list[str]) -> str:
    """``'seq2seq' and 'causal_lm'``: families as an error message lists them."""
    return " and ".join(f"'{n}'" for n in names)


def families_with(setting: str) -> list[str]:
    """The families whose model section has ``setting``."""
    return [name for name, cls in FAMILY_SECTIONS.items() if setting in cls.model_fields]


def register_family(section: type[ModelSection]) -> str:
    """Add a model family to the table, at run time, and return its name.

    ``section`` is the family: a :class:`ModelSection` subclass whose ``family`` field is
    ``Literal["<name>"] = "<name>"``, with its own settings, its declarations (``answer_kinds``
    decides which benchmarks it scores) and its ``builder``. From then on recipes, ``evaluate
    --family`` and the scoring matrix take it like a shipped family. Called explicitly (nothing
    registers on import); :func:`unregister_family` takes it out again.
    """
    if not (isinstance(section, type) and issubclass(section, ModelSection)):
        raise ConfigError(f"register_family: expected a ModelSection subclass, got {section!r}")
    field = section.model_fields["family"]
    name = field.default
    if not isinstance(name, str) or not name or typing.get_args(field.annotation) != (name,):
        raise ConfigError(
            f"register_family: {section.__name__}.family must be declared as Literal['<name>'] = '<name>' "
            f"(got {field.annotation} = {name!r}), so that a section validates only its own family"
        )
    if not name.isidentifier():
        raise ConfigError(f"register_family: a family's name is a word (letters, digits, _; paths and files are named "
                          f"after it), got {name!r}")
    if name in FAMILY_SECTIONS:
        held = "ships with negtrain" if name in SHIPPED_FAMILIES else f"added by {FAMILY_SECTIONS.origin(name) or 'a register_family call'}"
        raise ConfigError(f"register_family: the table already has a family '{name}' ({FAMILY_SECTIONS[name].__name__}, {held})")
    if not section.builder:
        raise ConfigError(f"register_family: {section.__name__} names no builder ('module:function' or the function)")
    if not section.answer_kinds:
        raise ConfigError(f"register_family: {section.__name__} declares no answer_kinds, so it could score no benchmark")
    FAMILY_SECTIONS[name] = section
    return name


def family_section(name: str, where: str) -> type[ModelSection]:
    """The settings section of family ``name``; one not in this process's table (registered by
    another process, a plugin not loaded here) is an error naming it and how to register it."""
    section = FAMILY_SECTIONS.get(name)
    if section is None:
        raise ConfigError(
            f"{where}: family '{name}' is not in this process's table of families ({', '.join(FAMILY_SECTIONS)}); "
            "a family registered in another process must be registered here too: call "
            "negtrain.config.register_family(<its section>) before the command runs, or install it as a plugin (docs: Extending)"
        )
    return section


def unregister_family(name: str) -> None:
    """Take a family added by :func:`register_family` out of the table (the shipped ones stay)."""
    if name in SHIPPED_FAMILIES:
        raise ConfigError(f"unregister_family: '{name}' ships with negtrain and stays in the table")
    if name not in FAMILY_SECTIONS:
        raise ConfigError(f"unregister_family: no family '{name}' was registered")
    del FAMILY_SECTIONS[name]


class AdapterConfig(Section):
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
