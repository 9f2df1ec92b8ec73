"""The ``model:`` and ``adapter:`` sections: what to load, how to fine-tune it, and peft.

The model section is typed per family: ``family`` picks one of the classes below (a discriminated
union), each with the shared fields of :class:`ModelSection` and only its own family's settings, so
a setting of another family is an error that names the family it belongs to. The one table of
families is :data:`FAMILY_SECTIONS`; ``negtrain/models/families.py`` gives each its builder and
capabilities."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import Discriminator, Field, Tag, TypeAdapter

from negtrain.config.section import MAX_LENGTH, Section


#: The family a model section without ``family:`` has.
DEFAULT_FAMILY = "nli"


class ModelSection(Section):
    """What every family's model section has: the weights to load and how to optimise them."""

    # What the family is, declared with its settings so that every floor (and the command line,
    # which imports no torch) reads it here; negtrain/models/families.py adds the builder.
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
    chat: bool = Field(
        False,
        description="seq2seq / causal_lm: apply the tokenizer's chat template to every prompt of every "
        "benchmark (`evaluate --chat`); a tokenizer without one is an error before the weights load.",
    )
    system: str | None = Field(None, description="With `chat`: the system message put before every prompt (`evaluate --system`).")
    fewshot_as_multiturn: bool = Field(
        False,
        description="With `chat`: few-shot demonstrations as alternating user/assistant turns; off: the "
        "whole few-shot prompt is one user turn (`evaluate --fewshot-as-multiturn`).",
    )

    def wraps_in_chat_template(self) -> bool:
        """Whether prompts go through the tokenizer's chat template when it has one: with ``chat``;
        a causal LM also with ``chat_template``."""
        return self.chat


class Seq2SeqModelConfig(LanguageModelConfig):
    """``family: seq2seq``: an encoder-decoder (T5, UnifiedQA, Flan-T5)."""

    family: Literal["seq2seq"] = "seq2seq"
    auto_class: ClassVar[str] = "AutoModelForSeq2SeqLM"
    peft_task_type: ClassVar[str | None] = "SEQ_2_SEQ_LM"


class CausalLmModelConfig(LanguageModelConfig):
    """``family: causal_lm``: a decoder-only language model (Llama-style)."""

    family: Literal["causal_lm"] = "causal_lm"
    served: ClassVar[bool] = True
    auto_class: ClassVar[str] = "AutoModelForCausalLM"
    # The next token after the text before a blank that ends the sentence (negated LAMA).
    answer_kinds: ClassVar[tuple[str, ...]] = ("label", "text", "choice", "cloze")
    peft_task_type: ClassVar[str | None] = "CAUSAL_LM"
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

    def wraps_in_chat_template(self) -> bool:
        return self.chat or self.chat_template


class MlmModelConfig(ModelSection):
    """``family: mlm``: masked language modelling, trained by the recipe's ``objective:``."""

    family: Literal["mlm"] = "mlm"
    trains_objective: ClassVar[bool] = True
    auto_class: ClassVar[str] = "AutoModelForMaskedLM"
    answer_kinds: ClassVar[tuple[str, ...]] = ("cloze",)
    cannot_score: ClassVar[str] = (
        "the mlm family trains negation objectives and scores only the [MASK] cloze probes (negated_probes, negated_lama)"
    )


#: The model families and their settings sections, in the order they are listed everywhere.
FAMILY_SECTIONS: dict[str, type[ModelSection]] = {
    "nli": NliModelConfig,
    "seq2seq": Seq2SeqModelConfig,
    "causal_lm": CausalLmModelConfig,
    "mlm": MlmModelConfig,
}
FAMILIES: tuple[str, ...] = tuple(FAMILY_SECTIONS)


def family_of(raw: Any) -> str:
    """The family a model section (a mapping or a section) names; unset: :data:`DEFAULT_FAMILY`."""
    if isinstance(raw, dict):
        return raw.get("family", DEFAULT_FAMILY)
    return getattr(raw, "family", DEFAULT_FAMILY)


class _PickByFamily:
    """The model union's discriminator: picks the section by ``family`` (``key`` names the field,
    for the error that names the families a setting belongs to)."""

    key = "family"
    __name__ = "family_of"  # pydantic names a callable discriminator in its messages

    def __call__(self, raw: Any) -> str:
        return family_of(raw)


#: The ``model:`` section: one class per family, picked by ``family``.
ModelConfig = Annotated[
    Union[tuple(Annotated[cls, Tag(name)] for name, cls in FAMILY_SECTIONS.items())],  # noqa: UP007
    Discriminator(_PickByFamily()),
]

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
