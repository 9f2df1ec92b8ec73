"""The ``model:`` and ``adapter:`` sections: what to load, how to fine-tune it, and peft."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from negtrain.config.section import MAX_LENGTH, Section


class ModelConfig(Section):
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
    max_length: int = Field(256, gt=8, le=MAX_LENGTH, description="Truncate encoded inputs to this many tokens.")
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
