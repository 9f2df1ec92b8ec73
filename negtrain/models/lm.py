"""The language-model families: ``seq2seq`` (AutoModelForSeq2SeqLM: T5, UnifiedQA, Flan-T5) and
``causal_lm`` (AutoModelForCausalLM: Llama-style decoders).

Both read any benchmark through a prompt with the benchmark's input names as placeholders: the
benchmark entry's ``prompt``, else ``model.prompt``, else the benchmark's default for the family
(resolved before loading by :mod:`negtrain.benchmarks.matrix` and written to ``recipe.yaml``).
An eval entry's ``shots`` puts that many solved examples first (:mod:`negtrain.models.fewshot`).
What a benchmark's answers are decides how it is trained and evaluated. Evaluation, in every
answer mode, is the engine's (:mod:`negtrain.engine.entry_requests`, the same for a report card):

- **Generative benchmarks** (free-text answers, e.g. CondaQA). Training: cross-entropy on the
  answer tokens (+ EOS). Evaluation: one greedy ``Generation`` request per example (no sampling,
  one beam), batched; the text is compared with the gold answer by the benchmark
  (:meth:`Benchmark.is_correct`), the metric receives 1/0, and the prediction files hold the
  generated text. A causal LM stops at the first newline or EOS (or ``model.max_new_tokens``).
- **Label benchmarks** (NLI benchmarks, TINAD's True/False). Each label has a verbalizer text
  ("yes" / "maybe" / "no"). Evaluation: one ``Loglikelihood`` request per label, the verbalizer's
  *full* continuation after the prompt (run once for all labels), summed or per-token mean
  (``model.verbalizer_score``); the highest wins. A causal LM's continuation is the text after a
  space; a seq2seq model's is the text as a decoder target, with EOS. Training: cross-entropy on
  the gold label's continuation (causal: prompt tokens may get a small weight,
  ``model.prompt_loss_weight``).
- **Multiple-choice benchmarks** (``answer_type: choice``, e.g. NeQA). Every choice is scored by
  the summed log-likelihood of its tokens as the continuation of the benchmark's context (split
  as lm-evaluation-harness splits them); the prediction is the best choice, both raw and per
  character (``accuracy`` / ``accuracy_norm``). Evaluation only; the context is the benchmark's
  own (prompts, shots and chat templates do not apply).
- **Cloze probes** (``answer_type: cloze``: negated LAMA). A causal LM can only fill a blank that
  ends the sentence (nothing but ``.``, ``!`` or ``?`` after ``[MASK]``, in the affirmative, negated
  and misprimed cloze alike): its prediction is the next token after the text before the blank
  (a ``NextToken`` request), and the gold object is the first token of " " + object there. Other
  probes are reported as skipped (``n_skipped``), not scored. Evaluation only.

Evaluation prompts are held to the model's own context (:mod:`negtrain.models.context`): one that
does not fit with its answer room is an error before scoring, or, under ``evaluation.truncate:
left``, is cut from the start (BOS kept) and counted (``n_truncated``). Training inputs are cut at
``model.max_length`` (seq2seq: truncated, T5 appends EOS; causal: the prompt keeps its BOS and its
end, where the question is). Seq2seq inputs are right-padded. Causal inputs are left-padded with
explicit position ids, so left padding changes nothing. A causal tokenizer without a pad token
(Llama) pads with EOS; padding is masked out everywhere.

Evaluation, in every answer mode, is the engine's (:mod:`negtrain.engine.entry_requests`): each
eval set's rows are requests, answered by the in-process backend (:mod:`negtrain.serving.in_process`)
wrapped round this module's model, exactly as a report card's ``--backend hf`` answers them.

This module holds the LightningModules and the builders; a prompt's ids and training encodings
are :mod:`negtrain.models.lm_encoding`, the eval sets (one per entry, with its requests)
:mod:`negtrain.models.lm_eval_sets`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from contextlib import nullcontext

from negtrain.config import CausalLmModelConfig, LanguageModelConfig, Recipe
from negtrain.data.collate import IGNORE
from negtrain.data.encoded import EncodedSplit
from negtrain.data.eval_set import EvalSet
from negtrain.data.module import NegtrainData, TrainSet
from negtrain.data.sources import source_name
from negtrain.models.adapters import add_adapter, load_base
from negtrain.models.base import NegtrainModule
from negtrain.models.contract import Built
from negtrain.models.folder_checks import load_lm_tokenizer
from negtrain.models.freezing import freeze
from negtrain.models.sources import attention_kwargs, resolve_model_name
from negtrain.engine.requests import Counts
from negtrain.serving.in_process import module_backend
from negtrain.models.prompting import (
    AnswerMode,
    PromptSettings,
    prompt_text,
)
from negtrain.models.lm_encoding import (
    check_chat,
    encode_causal_train,
    encode_seq2seq_eval,
    padded,
    seq2seq_targets,
)
from negtrain.models.lm_eval_sets import engine_eval_sets




# ---------------------------------------------------------------------------------------------
# Modules


class LMModule(NegtrainModule):
    """What both LM families share: every eval set's rows put to the model as the engine's requests
    (:mod:`negtrain.engine.entry_requests`), answered by the in-process backend wrapped round this
    module's model, whatever the answer mode."""

    encoder_decoder: bool
    config: LanguageModelConfig

    def __init__(
        self,
        model,
        tokenizer,
        config: LanguageModelConfig,
        eval_sets: Sequence[EvalSet],
        recipe: Recipe | None = None,
        backend: Any = None,
    ) -> None:
        super().__init__(config, eval_sets, recipe)
        self.model = model.train()
        self.pad_id = tokenizer.pad_token_id
        self.tokenizer = tokenizer  # generation decodes and matches stop strings through it
        #: The in-process backend (negtrain.serving.in_process) that built the eval sets' requests
        #: and answers them with this module's model; not a submodule (the model is).
        self.__dict__["backend"] = backend

    def predict(self, batch: dict[str, torch.Tensor], eval_set: EvalSet) -> torch.Tensor:
        """The batch's rows answered through the engine: their requests, the backend's answers, and
        what the metric is updated with (label ids, outcomes, choice log-likelihoods or cloze rows);
        texts, responses, tokens and the prompts seen are kept for the records."""
        built = eval_set.requests
        assert built is not None, f"{eval_set.name}: a language model's eval set without its requests"
        backend = self.__dict__["backend"]
        backend.model = self.model
        rows = batch["index"].tolist()
        mode = built.mode
        with torch.no_grad(), self.fp32_scoring(batch["index"].device.type) if mode in (AnswerMode.CHOICES, AnswerMode.CLOZE) else nullcontext():
            answers = backend.answer(built.requests(rows), Counts())
        read = built.read(rows, answers)
        if read.empty:  # counted by the metric (n_empty), as a card counts them
            eval_set.metric.mark_empty(torch.tensor(read.empty, dtype=torch.long))
        name = eval_set.name
        if eval_set.log_samples and mode not in (AnswerMode.CHOICES, AnswerMode.CLOZE):
            self.eval_responses.setdefault(name, {}).update(read.responses)
        if mode.generates:
            self.eval_tokens.setdefault(name, {}).update(read.tokens)
            if built.bench.generative or built.completions:
                self.eval_texts.setdefault(name, {}).update(read.texts)
        if eval_set.prompts is not None:
            for i, seen in read.seen.items():  # the log holds what the model saw: a cut prompt's kept text
                eval_set.prompts[i] = seen
        assert read.predictions is not None and read.index == rows
        return read.predictions.to(batch["index"].device)


class Seq2SeqModule(LMModule):
    encoder_decoder = True

    def __init__(self, *args, decoder_start_token_id: int, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.decoder_start_token_id = decoder_start_token_id

    def training_loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        labels = batch["labels"]
        labels = labels[:, : int((labels != IGNORE).sum(1).max())].contiguous()
        return self.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=labels).loss

    def loss_units(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return (batch["labels"] != IGNORE).sum()  # the model's loss is a mean over answer tokens



def _positions(mask: torch.Tensor) -> torch.Tensor:
    return (mask.cumsum(-1) - 1).clamp(min=0)


class CausalLMModule(LMModule):
    encoder_decoder = False
    config: CausalLmModelConfig

    def training_loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        ids, mask = batch["input_ids"], batch["attention_mask"]
        logits = self.model(input_ids=ids, attention_mask=mask, position_ids=_positions(mask)).logits
        logits, targets = logits[:, :-1].float(), ids[:, 1:]
        weight = self._target_weights(batch)
        ce = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="none")
        return (ce * weight.reshape(-1)).sum() / weight.sum()

    def loss_units(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self._target_weights(batch).sum()  # the loss is a weighted mean over target tokens

    def _target_weights(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """(B, T-1) loss weight of each next-token target: 1 for answer tokens, prompt_loss_weight
        for prompt tokens (with ``prompt_loss: share``, answer_tokens * w / ((1 - w) * prompt_tokens)
        per row, the TINAD authors' weighting), 0 for padding."""
        ids, mask = batch["input_ids"], batch["attention_mask"]
        # Left-padded: the answer is the last answer_len tokens of each row.
        width = ids.shape[1]
        col = torch.arange(1, width, device=ids.device).unsqueeze(0)
        is_answer = col >= (width - batch["answer_len"]).unsqueeze(1)
        real = (mask[:, 1:] * mask[:, :-1]).bool()  # a target and its context are both real tokens
        w = self.config.prompt_loss_weight
        prompt = torch.tensor(w, dtype=torch.float32, device=ids.device)
        if getattr(self.config, "prompt_loss", "per_token") == "share" and w > 0:
            # The authors count the prompt's tokens (its first included, though it is never a
            # target) and the tokens after it, per example.
            answer = batch["answer_len"].to(torch.float32)
            prompt_tokens = (mask.sum(1).to(torch.float32) - answer).clamp(min=1)
            prompt = (answer * w / ((1 - w) * prompt_tokens)).unsqueeze(1)
        return torch.where(is_answer, torch.ones_like(prompt), prompt) * real


# ---------------------------------------------------------------------------------------------
# Builders (see negtrain.models.families)


def _build_lm(recipe, loaded, causal: bool):
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM

    cfg = recipe.model
    path = resolve_model_name(cfg.name)
    tokenizer = load_lm_tokenizer(path, cfg.name)
    check_chat(tokenizer, cfg)  # before any weights are loaded
    # Evaluation prompts are held to the model's own context, not to the training max_length.
    model_config = AutoConfig.from_pretrained(path)

    # What the family can score and train on was decided by the scoring matrix (resolve_benchmarks).
    # Every eval entry's requests are built, and its prompts checked against the model's context,
    # before any weights load; the backend gets the model once it is loaded.
    backend = module_backend(tokenizer, recipe, model_config, encoder_decoder=not causal)
    eval_sets = engine_eval_sets(recipe, loaded, backend)

    train = None
    if loaded.train:
        parts: list[EncodedSplit] = []
        extras: list[Any] = []  # causal: answer_len tensors; seq2seq: target id lists
        train_specs = loaded.train_specs or [None] * len(loaded.train)
        for (b, _, ex), spec in zip(loaded.train, train_specs, strict=False):
            ex = list(ex)  # a training source is read once here: prompts and targets each walk its rows
            settings = PromptSettings.of(spec)
            if causal:
                enc, answer_len = encode_causal_train(tokenizer, b, ex, cfg, settings)
                parts.append(enc)
                extras.append(answer_len)
            else:
                parts.append(encode_seq2seq_eval(tokenizer, b, [prompt_text(b, e, cfg, settings.prompt) for e in ex], cfg))
                extras.extend(seq2seq_targets(tokenizer, b, ex, cfg, settings))
        train = TrainSet(
            encoded=EncodedSplit.concat(parts),
            extras={"answer_len": torch.cat(extras)} if causal else {"labels": padded(extras)},
            sources=[source_name(b, split, ex) for b, split, ex in loaded.train],
            source_sizes=[len(ex) for _, _, ex in loaded.train],
        )

    auto = AutoModelForCausalLM if causal else AutoModelForSeq2SeqLM
    model = load_base(auto, path, recipe.adapter, **attention_kwargs(cfg))
    model = add_adapter(model, recipe.adapter, recipe.model.peft_task_type)
    freeze(model, cfg)
    if causal:
        module: LMModule = CausalLMModule(model, tokenizer, cfg, eval_sets, recipe=recipe, backend=backend)
    else:
        start = model_config.decoder_start_token_id
        if start is None:
            start = tokenizer.pad_token_id
        module = Seq2SeqModule(model, tokenizer, cfg, eval_sets, recipe=recipe, decoder_start_token_id=start, backend=backend)
    data = NegtrainData(recipe.data, recipe.seed, tokenizer.pad_token_id, train, eval_sets, pad_left=causal)
    return Built(module, data, tokenizer)


def build_seq2seq(recipe, loaded):
    return _build_lm(recipe, loaded, causal=False)


def build_causal_lm(recipe, loaded):
    return _build_lm(recipe, loaded, causal=True)
