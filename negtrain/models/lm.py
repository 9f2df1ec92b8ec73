"""The language-model families: ``seq2seq`` (AutoModelForSeq2SeqLM: T5, UnifiedQA, Flan-T5) and
``causal_lm`` (AutoModelForCausalLM: Llama-style decoders).

Both read any benchmark through a prompt with the benchmark's input names as placeholders: the
benchmark entry's ``prompt``, else ``model.prompt``, else the benchmark's default for the family
(resolved before loading by :mod:`negtrain.benchmarks.matrix` and written to ``recipe.yaml``).
An eval entry's ``shots`` puts that many solved examples first (:mod:`negtrain.models.fewshot`).
What a benchmark's answers are decides how it is trained and predicted:

- **Generative benchmarks** (free-text answers, e.g. CondaQA). Training: cross-entropy on the
  answer tokens (+ EOS). Prediction: greedy ``generate`` (no sampling, one beam), batched; the
  text is compared with the gold answer by the benchmark (:meth:`Benchmark.is_correct`), the
  metric receives 1/0, and the prediction files hold the generated text. A causal LM stops
  at the first newline or EOS (or ``model.max_new_tokens``).
- **Label benchmarks** (NLI benchmarks, TINAD's True/False). Each label has a verbalizer text
  ("yes" / "maybe" / "no"). Prediction: the log-likelihood of each verbalizer's *full*
  continuation (:mod:`negtrain.models.continuation`, the prompt run once for all labels), summed
  or per-token mean (``model.verbalizer_score``); the highest wins. A causal LM's continuation is
  the text after a space, tokenized as it is split after other text (see :func:`continuation_ids`);
  a seq2seq model's is the text as a decoder target, with EOS. Training: cross-entropy on the
  gold label's continuation (causal: prompt tokens may get a small weight,
  ``model.prompt_loss_weight``).
- **Multiple-choice benchmarks** (``answer_type: choice``, e.g. NeQA). Every choice is scored by
  the summed log-likelihood of its tokens as the continuation of the benchmark's context
  (:func:`negtrain.models.continuation.continuation_logprobs`, token ids split as
  lm-evaluation-harness splits them, :mod:`negtrain.models.choice_inputs`); the prediction is the
  best choice, both raw and per character (``accuracy`` / ``accuracy_norm``). Evaluation only;
  the context is the benchmark's own (prompts, shots and chat templates do not apply).
- **Cloze probes** (``answer_type: cloze``: negated LAMA). A causal LM can only fill a blank that
  ends the sentence (nothing but ``.``, ``!`` or ``?`` after ``[MASK]``, in the affirmative, negated
  and misprimed cloze alike): its prediction is the next token after the text before the blank,
  and the gold object is the first token of " " + object there (split as
  :mod:`negtrain.models.choice_inputs` does). Other probes are reported as skipped
  (``n_skipped``), not scored. Evaluation only.

Evaluation prompts are held to the model's own context (:mod:`negtrain.models.context`): one that
does not fit with its answer room is an error before scoring, or, under ``evaluation.truncate:
left``, is cut from the start (BOS kept) and counted (``n_truncated``). Training inputs are cut at
``model.max_length`` (seq2seq: truncated, T5 appends EOS; causal: the prompt keeps its BOS and its
end, where the question is). Seq2seq inputs are right-padded. Causal inputs are left-padded with
explicit position ids, so left padding changes nothing. A causal tokenizer without a pad token
(Llama) pads with EOS; padding is masked out everywhere.

This module holds the LightningModules and the builders; a prompt's ids and encodings are
:mod:`negtrain.models.lm_encoding`, the multiple-choice and cloze eval sets
:mod:`negtrain.models.lm_eval_sets`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from negtrain.models.continuation import score_batch
from negtrain.config import CausalLmModelConfig, LanguageModelConfig, Recipe
from negtrain.data.collate import IGNORE
from negtrain.data.encoded import EncodedSplit
from negtrain.data.eval_set import EvalSet
from negtrain.data.module import NegtrainData, TrainSet
from negtrain.data.sources import source_name
from negtrain.models.adapters import add_adapter, load_base
from negtrain.models.base import NegtrainModule, close_calls
from negtrain.models.context import model_context
from negtrain.models.contract import Built
from negtrain.models.folder_checks import load_lm_tokenizer
from negtrain.models.freezing import freeze
from negtrain.models.sources import attention_kwargs, resolve_model_name
from negtrain.models.generation import Generated, Limits, greedy
from negtrain.serving.cache import ResponseCache
from negtrain.engine.requests import Answer, cache_key
from negtrain.prompts.strategies import Answering
# Moved to prompting.py (text only, so a served card needs no Lightning); imported here where
# lm.py uses them, and for the code that imports them from here.
from negtrain.models.prompting import (  # noqa: F401
    STOP_STRINGS,
    AnswerMode,
    PromptSettings,
    answer_mode,
    answer_outcome,
    answer_text,
    causal_answering,
    prompt_text,
    prompts_with_shots,
    target_text,
    verbalizer_text,
    zero_shot_text,
)
# Prompt ids and encodings, and the eval sets other than a prompt scored by the family's default,
# are their own modules; imported here where this module uses them, and for the code that imports
# them from here.
from negtrain.models.lm_encoding import (  # noqa: F401
    ANSWER_CONTEXT,
    CLOZE_ENDINGS,
    Fitting,
    causal_answer_ids,
    causal_prompt_ids,
    check_chat,
    choice_inputs,
    cloze_metric,
    cloze_prefix,
    cloze_prefixes,
    continuation_ids,
    encode_causal_eval,
    encode_causal_train,
    encode_seq2seq_eval,
    encode_seq2seq_prompts,
    fitted_choice_inputs,
    label_continuations,
    mark_cut,
    padded,
    prompts_fitted,
    rendered_prompts,
    seen_prompts,
    seq2seq_targets,
    uses_chat,
)
from negtrain.models.lm_eval_sets import (  # noqa: F401
    choice_eval_set,
    cloze_eval_set,
    fitting_of,
    predict_choices,
    predict_cloze,
    strategy_choice_eval_set,
)




# ---------------------------------------------------------------------------------------------
# Modules


class LMModule(NegtrainModule):
    """What both LM families share: per eval set, generate text or score each label's verbalizer."""

    encoder_decoder: bool
    config: LanguageModelConfig

    def __init__(
        self,
        model,
        tokenizer,
        config: LanguageModelConfig,
        eval_sets: Sequence[EvalSet],
        recipe: Recipe | None = None,
    ) -> None:
        super().__init__(config, eval_sets, recipe)
        self.model = model.train()
        self.pad_id = tokenizer.pad_token_id
        self.tokenizer = tokenizer  # generation decodes and matches stop strings through it

    #: Answers kept on disk (:class:`negtrain.serving.cache.ResponseCache`), so a report card
    #: killed inside a benchmark recomputes only the rows it had not answered; and what decides an
    #: answer besides the input: the weights by content, tokenizer, dtype and precision
    #: (:func:`negtrain.training.run.response_cache_settings`). None: every row is computed.
    response_cache: ResponseCache | None = None
    cache_settings: dict[str, Any] = {}

    def use_response_cache(self, cache, settings: dict[str, Any]) -> None:
        self.response_cache, self.cache_settings = cache, settings

    def _cached(self, kind: str, batch: dict[str, torch.Tensor], extra: dict[str, Any], compute):
        """Per row of ``batch``: its cached answer, or ``compute`` run on the rows without one
        (as a smaller batch of the same padding) and stored. ``compute(sub_batch) -> list[Answer]``."""
        assert self.response_cache is not None  # label_scores and generate come here only with a cache
        ids, mask = batch["input_ids"], batch["attention_mask"]
        keys = [
            cache_key("hf", self.cache_settings, {"kind": kind, "ids": ids[i][mask[i].bool()].tolist(), **extra})
            for i in range(len(ids))
        ]
        answers = [self.response_cache.get(k) for k in keys]
        todo = [i for i, a in enumerate(answers) if a is None]
        if todo:
            rows = torch.tensor(todo, device=ids.device)
            for i, answer in zip(todo, compute({"input_ids": ids[rows], "attention_mask": mask[rows]}), strict=False):
                self.response_cache.put(keys[i], answer)
                answers[i] = answer
        return answers

    def label_scores(self, batch: dict[str, torch.Tensor], eval_set: EvalSet) -> torch.Tensor:
        """(B, labels): each label's verbalizer log-likelihood, normalised as the config says
        (from the response cache for rows already answered)."""
        if self.response_cache is None:
            return self._label_scores(batch, eval_set)
        extra = {"choices": eval_set.choices, "score": self.config.verbalizer_score}
        answers = self._cached("label_scores", batch, extra,
                               lambda sub: [Answer(scores=row) for row in self._label_scores(sub, eval_set).float().tolist()])
        return torch.tensor([a.scores for a in answers], dtype=torch.float32, device=batch["input_ids"].device)

    def _label_scores(self, batch: dict[str, torch.Tensor], eval_set: EvalSet) -> torch.Tensor:
        choices = eval_set.choices
        ids, mask = batch["input_ids"], batch["attention_mask"]

        def score(ids, mask):
            out = score_batch(self.model, ids, mask, [choices] * len(ids), encoder_decoder=self.encoder_decoder, pad_id=self.pad_id)
            return out.normalized(self.config.verbalizer_score)

        scores = score(ids, mask)
        close = close_calls(scores.to(ids.device), self.config.fp32_recheck_margin)
        if close is not None:
            # Near-ties under bf16 autocast are scored again in fp32 (as the NLI family does).
            with torch.autocast(device_type=ids.device.type, enabled=False):
                scores[close] = score(ids[close.to(ids.device)], mask[close.to(ids.device)])
        return scores

    def default_answering(self) -> Answering:
        """How a free-text benchmark is answered without a strategy: greedy, ``model.max_new_tokens``;
        a causal LM's answer is its first line (it stops at a newline)."""
        raise NotImplementedError

    def generate(self, batch: dict[str, torch.Tensor], answering: Answering):
        """The batch's greedy responses (:func:`negtrain.models.generation.greedy`; from the
        response cache for rows already answered)."""
        limits = Limits(answering.max_new_tokens, answering.stop)
        if self.response_cache is None:
            return greedy(self.model, self.tokenizer, batch["input_ids"], batch["attention_mask"], limits, self.encoder_decoder)
        def compute(sub):
            done = greedy(self.model, self.tokenizer, sub["input_ids"], sub["attention_mask"], limits, self.encoder_decoder)
            return [Answer(text=g.text, tokens_out=g.tokens) for g in done]

        extra = {"max_new_tokens": limits.max_new_tokens, "stop": list(limits.stop)}
        return [Generated(a.text, a.tokens_out) for a in self._cached("generation", batch, extra, compute)]

    def generate_texts(self, batch: dict[str, torch.Tensor], answering: Answering | None = None) -> list[str]:
        """The answers the default rule reads in the batch's responses (free-text benchmarks)."""
        answering = answering or self.default_answering()
        return [answering.read(g.text) or "" for g in self.generate(batch, answering)]

    def predict(self, batch: dict[str, torch.Tensor], eval_set: EvalSet) -> torch.Tensor:
        bench, examples = eval_set.benchmark, eval_set.examples
        answering = eval_set.answering  # a generating strategy's, or None (see lm_eval_sets and _build_lm)
        mode = answer_mode(bench, answering)
        if mode in (AnswerMode.CHOICES, AnswerMode.CLOZE):  # the set's evaluator; fp32 under precision auto
            assert eval_set.evaluator is not None, f"{eval_set.name}: a {mode.value} eval set without its evaluator"
            with self.fp32_scoring(batch["index"].device.type):
                return eval_set.evaluator(self, batch)
        index = batch["index"].tolist()
        if mode is AnswerMode.VERBALIZERS:
            scores = self.label_scores(batch, eval_set)
            if eval_set.log_samples:
                store = self.eval_responses.setdefault(eval_set.name, {})
                for idx, row in zip(index, scores.float().tolist(), strict=False):
                    store[idx] = {label: round(v, 4) for label, v in zip(bench.labels, row, strict=False)}
            return scores.argmax(-1).to(batch["index"].device)
        answering = answering or self.default_answering()
        generated = self.generate(batch, answering)
        responses = self.eval_responses.setdefault(eval_set.name, {})
        tokens = self.eval_tokens.setdefault(eval_set.name, {})
        texts = self.eval_texts.setdefault(eval_set.name, {}) if bench.generative or eval_set.completions else {}
        out = []
        for idx, g in zip(index, generated, strict=False):
            if eval_set.log_samples:
                responses[idx] = g.text
            tokens[idx] = g.tokens
            assert eval_set.predicted_labels is not None  # EvalSet.__post_init__ fills it
            outcome, text = answer_outcome(bench, examples[idx], answering.read(g.text), eval_set.completions, eval_set.predicted_labels)
            if text is not None:
                texts[idx] = text
            out.append(outcome)
        return torch.tensor(out, dtype=torch.long, device=batch["index"].device)


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

    def default_answering(self) -> Answering:
        return Answering(method="generate", rule=None, max_new_tokens=self.config.max_new_tokens)


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

    def default_answering(self) -> Answering:
        return causal_answering(self.config)


# ---------------------------------------------------------------------------------------------
# Builders (see negtrain.models.families)


def _build_lm(recipe, loaded, causal: bool):
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM

    cfg = recipe.model
    path = resolve_model_name(cfg.name)
    tokenizer = load_lm_tokenizer(path, cfg.name)
    check_chat(tokenizer, cfg)  # before any weights are loaded
    # Evaluation prompts are held to the model's own context, not to the training max_length.
    context = model_context(AutoConfig.from_pretrained(path), tokenizer, recipe.evaluation.truncate)

    # What the family can score and train on was decided by the scoring matrix (resolve_benchmarks).
    eval_sets = []
    eval_specs = loaded.eval_specs or [None] * len(loaded.eval)
    for (b, split, ex), spec in zip(loaded.eval, eval_specs, strict=False):
        settings = PromptSettings.of(spec)
        mode = settings.answer_mode(b)
        if mode is AnswerMode.COMPLETIONS or (mode is AnswerMode.CHOICES and settings.strategy):
            eval_sets.append(strategy_choice_eval_set(
                tokenizer, b, split, ex, settings, cfg, causal, recipe.seed, recipe.evaluation.log_samples, context,
            ))
            continue
        if mode in (AnswerMode.CHOICES, AnswerMode.CLOZE):
            # The benchmark builds the context itself: no prompt, verbalizer or shots.
            eval_sets.append(cloze_eval_set(tokenizer, b, split, ex) if mode is AnswerMode.CLOZE
                             else choice_eval_set(tokenizer, b, split, ex, cfg, causal, context))
            continue
        answering = settings.generating_answer(b)
        prompts, shot_ids = prompts_with_shots(b, split, ex, settings, cfg, recipe.seed)
        conts = None if b.generative else label_continuations(tokenizer, b, settings.verbalizer or b.verbalizer(), cfg, causal)
        fitting = fitting_of(context, b, split, ex)
        room = 0  # a seq2seq model's answer is its decoder's
        if causal:
            if answering is not None:
                room = answering.max_new_tokens
            else:
                room = cfg.max_new_tokens if conts is None else max(len(c) for c in conts)  # None: b.generative
        # CondaQA's rule (min_shots): as many shots as fit, checked for every row before any weights load
        prompts, shot_ids = prompts_fitted(tokenizer, prompts, shot_ids, settings, cfg, room, fitting)
        texts, chatted = rendered_prompts(tokenizer, prompts, cfg)
        if causal:
            encoded, cut = encode_causal_eval(tokenizer, b, texts, cfg, room, chatted, fitting)
        else:
            encoded, cut = encode_seq2seq_prompts(tokenizer, texts, cfg, chatted, fitting)
        metric = b.metric(ex)
        metric.counts_unparsed = answering is not None
        mark_cut(metric, cut, context)
        log = recipe.evaluation.log_samples
        eval_sets.append(EvalSet(
            b, split, ex, encoded, metric=metric, choices=conts, shot_ids=shot_ids, answering=answering, shots_rule=settings.shots_rule,
            prompts=seen_prompts(tokenizer, texts, encoded, cut, chatted) if log else None, variant=settings.variant, log_samples=log,
        ))

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
        module: LMModule = CausalLMModule(model, tokenizer, cfg, eval_sets, recipe=recipe)
    else:
        start = AutoConfig.from_pretrained(path).decoder_start_token_id
        if start is None:
            start = tokenizer.pad_token_id
        module = Seq2SeqModule(model, tokenizer, cfg, eval_sets, recipe=recipe, decoder_start_token_id=start)
    data = NegtrainData(recipe.data, recipe.seed, tokenizer.pad_token_id, train, eval_sets, pad_left=causal)
    return Built(module, data, tokenizer)


def build_seq2seq(recipe, loaded):
    return _build_lm(recipe, loaded, causal=False)


def build_causal_lm(recipe, loaded):
    return _build_lm(recipe, loaded, causal=True)
