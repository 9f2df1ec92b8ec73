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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import torch

from negtrain.benchmarks.base import AnswerKind, Benchmark, Example
from negtrain.benchmarks.negated_probes import MASK
from negtrain.models.chat_template import chat_text
from negtrain.models.continuation import continuation_logprobs, score_batch
from negtrain.config import LanguageModelConfig, Recipe
from negtrain.data.collate import IGNORE
from negtrain.data.encoded import EncodedSplit, cached, fingerprint, tokenizer_signature
from negtrain.data.eval_set import EvalSet
from negtrain.data.module import NegtrainData, TrainSet
from negtrain.errors import ConfigError
from negtrain.benchmarks.negated_lama import common_vocabulary
from negtrain.metrics.cloze import SKIPPED, NegatedLamaMetric, cloze_rows, skipped_rows
from negtrain.models.cloze_vocab import CommonVocab, common_vocab, gold_or_skip
from negtrain.models.adapters import add_adapter, load_base
from negtrain.models.base import NegtrainModule, close_calls
from negtrain.models.choice_inputs import encode_choices, split_pair
from negtrain.models.context import UNLIMITED, Context, cut_left, fit_split, model_context, rows_over, truncation_note
from negtrain.models.contract import Built
from negtrain.models.folder_checks import load_tokenizer
from negtrain.models.freezing import freeze
from negtrain.models.sources import attention_kwargs, resolve_model_name
from negtrain.models.generation import Generated, Limits, greedy
from negtrain.serving.requests import Answer, cache_key
from negtrain.prompts.strategies import Answering, Prompt
# Moved to prompting.py (text only, so a served card needs no Lightning); imported here where
# lm.py uses them, and for the code that imports them from here.
from negtrain.models.prompting import (  # noqa: F401
    STOP_STRINGS,
    PromptSettings,
    answer_outcome,
    answer_text,
    causal_answering,
    prompt_text,
    prompts_with_shots,
    target_text,
    verbalizer_text,
    zero_shot_text,
)


ANSWER_CONTEXT = "Answer:"


def continuation_ids(tokenizer, text: str, causal: bool) -> list[int]:
    """The tokens a verbalizer adds after the prompt.

    Causal: ``" " + text`` tokenized in context ("Answer: yes" minus "Answer:"), so every tokenizer
    family gives its word-initial pieces (byte-level BPE's "G-dot" pieces, SentencePiece's "_"
    pieces), never a bare space piece; falls back to ``" " + text`` on its own. Seq2seq: the text
    as a decoder target, ending in EOS as the training targets do.
    """
    if not causal:
        return list(tokenizer(text_target=text)["input_ids"])
    head = tokenizer.encode(ANSWER_CONTEXT, add_special_tokens=False)
    full = tokenizer.encode(f"{ANSWER_CONTEXT} {text}", add_special_tokens=False)
    if full[: len(head)] == head and len(full) > len(head) and tokenizer.decode(full[len(head) : len(head) + 1]).strip():
        return full[len(head) :]
    ids = tokenizer.encode(" " + text, add_special_tokens=False)
    if not ids:
        raise ConfigError(f"the tokenizer gives no tokens for the verbalizer {text!r}")
    return ids


def label_continuations(tokenizer, bench: Benchmark, verbalizer: dict[str, str], cfg: LanguageModelConfig, causal: bool) -> list[list[int]]:
    """Per label of ``bench`` (in label order), its verbalizer's continuation ids."""
    conts = [continuation_ids(tokenizer, verbalizer_text(verbalizer[label], cfg), causal) for label in bench.labels]
    seen: dict[tuple[int, ...], str] = {}
    for label, ids in zip(bench.labels, conts, strict=False):
        if tuple(ids) in seen:
            raise ConfigError(
                f"benchmark '{bench.name}': the verbalizers of '{seen[tuple(ids)]}' and '{label}' are the same "
                f"tokens ({tokenizer.decode(ids)!r}), so they cannot be told apart"
            )
        seen[tuple(ids)] = label
    return conts


def uses_chat(tokenizer, cfg: LanguageModelConfig) -> bool:
    """Whether prompts go through the tokenizer's chat template, when it has one: as the family's
    settings say (``model.chat``; for a causal LM also ``model.chat_template``, its default)."""
    has = bool(getattr(tokenizer, "chat_template", None))
    return has and cfg.wraps_in_chat_template()


def rendered_prompts(tokenizer, prompts: Sequence[Prompt], cfg: LanguageModelConfig) -> tuple[list[str], bool]:
    """The exact text each prompt is given to the model as (after the chat template, when one
    applies), and whether the chat template was applied (then the text holds its own special tokens)."""
    if not uses_chat(tokenizer, cfg):
        return [p.text() for p in prompts], False
    return [chat_text(tokenizer, p, cfg) for p in prompts], True


def check_chat(tokenizer, cfg: LanguageModelConfig) -> None:
    """``model.chat`` needs a chat template: an error before the weights are loaded."""
    if cfg.chat and not getattr(tokenizer, "chat_template", None):
        raise ConfigError(f"--chat (model.chat): the tokenizer of '{cfg.name}' has no chat template; drop --chat or use a chat model")


def _key(kind: str, tokenizer, cfg: LanguageModelConfig, *texts: Sequence[str]) -> str:
    return fingerprint(
        kind,
        tokenizer_signature(tokenizer),
        str(getattr(tokenizer, "chat_template", None) if cfg.wraps_in_chat_template() else None),
        str((cfg.chat, cfg.system, cfg.fewshot_as_multiturn)),
        str(cfg.max_length),
        str(cfg.max_target_length),
        *texts,
    )


# ---------------------------------------------------------------------------------------------
# Encoding


def causal_prompt_ids(tokenizer, prompts: Sequence[str | Prompt], cfg: LanguageModelConfig) -> list[list[int]]:
    texts, chatted = rendered_prompts(tokenizer, [p if isinstance(p, Prompt) else Prompt(query=p) for p in prompts], cfg)
    return tokenizer(texts, add_special_tokens=not chatted)["input_ids"]


def _fit(prompt: list[int], limit: int, bos: int | None) -> list[int]:
    return cut_left(prompt, limit, bos)


def causal_answer_ids(tokenizer, bench: Benchmark, examples: Sequence[Example], cfg: LanguageModelConfig, settings: PromptSettings | None = None) -> list[list[int]]:
    settings = settings or PromptSettings()
    if not bench.generative:
        conts = label_continuations(tokenizer, bench, settings.verbalizer or bench.verbalizer(), cfg, causal=True)
        return [conts[bench.labels.index(e.label)] for e in examples]
    ids = tokenizer([" " + target_text(e, cfg) for e in examples], add_special_tokens=False)["input_ids"]
    return [x[: cfg.max_target_length - 1] + [tokenizer.eos_token_id] for x in ids]


@dataclass(frozen=True)
class Fitting:
    """What holds one eval split's prompts to the model's context, and names its rows in an error."""

    context: Context
    where: str  # "benchmark/split"
    row_ids: Sequence[str]


def encode_causal_eval(tokenizer, bench: Benchmark, texts: Sequence[str], cfg: LanguageModelConfig, answer_room: int, chatted: bool,
                       fitting: Fitting) -> tuple[EncodedSplit, list[int]]:
    """Prompts (``texts`` as rendered, :func:`rendered_prompts`) as the model is given them, with
    ``answer_room`` tokens left in its context (:func:`negtrain.models.context.fit_split`), and
    the rows cut to fit (only under ``truncate: left``)."""

    def build() -> EncodedSplit:
        return EncodedSplit.from_lists(tokenizer(list(texts), add_special_tokens=not chatted)["input_ids"], None)

    whole = cached(_key("causal-eval", tokenizer, cfg, texts, [str(chatted)]), build, rows=len(texts))
    return fit_split(whole, answer_room, fitting.context, fitting.where, fitting.row_ids, tokenizer.bos_token_id)


def encode_causal_train(tokenizer, bench, examples, cfg, settings: PromptSettings | None = None) -> tuple[EncodedSplit, torch.Tensor]:
    settings = settings or PromptSettings()
    prompts = [prompt_text(bench, e, cfg, settings.prompt) for e in examples]
    answers = causal_answer_ids(tokenizer, bench, examples, cfg, settings)
    answer_len = torch.tensor([len(a) for a in answers], dtype=torch.long)

    def build() -> EncodedSplit:
        ids = causal_prompt_ids(tokenizer, prompts, cfg)
        seqs = [_fit(p, max(cfg.max_length - len(a), 2), tokenizer.bos_token_id) + a for p, a in zip(ids, answers, strict=False)]
        return EncodedSplit.from_lists(seqs, None)

    key = _key("causal-train", tokenizer, cfg, prompts, [" ".join(map(str, a)) for a in answers])
    return cached(key, build, rows=len(prompts)), answer_len


def encode_seq2seq_eval(tokenizer, bench, prompts: Sequence[str], cfg, chatted: bool = False) -> EncodedSplit:
    def build() -> EncodedSplit:
        ids = tokenizer(list(prompts), truncation=True, max_length=cfg.max_length, add_special_tokens=not chatted)["input_ids"]
        return EncodedSplit.from_lists(ids, None)

    return cached(_key("seq2seq-eval", tokenizer, cfg, prompts, [str(chatted)]), build, rows=len(prompts))


def encode_seq2seq_prompts(tokenizer, texts: Sequence[str], cfg, chatted: bool, fitting: Fitting) -> tuple[EncodedSplit, list[int]]:
    """An eval split's encoder inputs held to the model's context (no answer room: the answer is
    the decoder's); a cut keeps each prompt's end (and T5's EOS)."""

    def build() -> EncodedSplit:
        return EncodedSplit.from_lists(tokenizer(list(texts), add_special_tokens=not chatted)["input_ids"], None)

    whole = cached(_key("seq2seq-eval-whole", tokenizer, cfg, texts, [str(chatted)]), build, rows=len(texts))
    return fit_split(whole, 0, fitting.context, fitting.where, fitting.row_ids, None)


def seen_prompts(tokenizer, texts: Sequence[str], encoded: EncodedSplit, cut: Sequence[int], chatted: bool) -> list[str]:
    """The prompt text each row's model saw: as rendered, or for a row cut to fit, its kept tokens
    decoded; without the special tokens the tokenizer adds to plain text (BOS, T5's EOS), which the
    rendered texts lack, and with those a chat template wrote."""
    seen = list(texts)
    offsets = encoded.offsets.tolist()
    for i in cut:
        seen[i] = tokenizer.decode(encoded.input_ids[offsets[i]:offsets[i + 1]].tolist(), skip_special_tokens=not chatted)
    return seen


def mark_cut(metric, cut: Sequence[int], context: Context) -> None:
    """Under ``truncate: left`` the metric counts the scored rows cut (``n_truncated``, 0 when none
    was), and its note says how they were cut."""
    if context.truncate != "left":
        return
    flags = np.zeros(metric.num_examples, dtype=bool)
    flags[list(cut)] = True
    metric.truncated = flags
    if cut:
        metric.note = "; ".join(n for n in (metric.note, truncation_note(context)) if n)


def seq2seq_targets(tokenizer, bench, examples, cfg, settings: PromptSettings | None = None) -> list[list[int]]:
    settings = settings or PromptSettings()
    if not bench.generative:
        conts = label_continuations(tokenizer, bench, settings.verbalizer or bench.verbalizer(), cfg, causal=False)
        return [conts[bench.labels.index(e.label)] for e in examples]
    return tokenizer(text_target=[target_text(e, cfg) for e in examples], truncation=True, max_length=cfg.max_target_length)["input_ids"]


# ---------------------------------------------------------------------------------------------
# Multiple choice (NeQA) and cloze probes (negated LAMA): the benchmark builds the context itself


def choice_inputs(tokenizer, bench: Benchmark, examples: Sequence[Example], cfg: LanguageModelConfig, causal: bool,
                  contexts: Sequence[str] | None = None, fitting: Fitting | None = None):
    """Context ids, per-choice continuation ids and choice lengths (characters) of a multiple-choice
    split. ``contexts``: the text the choices follow (default: the benchmark's own context).
    ``fitting``: the model's context, which a context and its longest choice must fit (see
    :func:`fitted_choice_inputs`); None: contexts cut at ``model.max_length``."""
    return fitted_choice_inputs(tokenizer, bench, examples, cfg, causal, contexts, fitting)[0]


def fitted_choice_inputs(tokenizer, bench: Benchmark, examples: Sequence[Example], cfg: LanguageModelConfig, causal: bool,
                         contexts: Sequence[str] | None, fitting: Fitting | None):
    """:func:`choice_inputs`, and the rows whose context was cut to fit (``truncate: left``; a
    row that does not fit is an error under ``truncate: none``)."""
    contexts = [bench.context(e) for e in examples] if contexts is None else contexts
    options = [bench.choices(e) for e in examples]
    limit = cfg.max_length if fitting is None else UNLIMITED  # checked and cut below
    ctx, conts = encode_choices(tokenizer, contexts, options, bench.target_delimiter, causal, limit)
    cut: list[int] = []
    if fitting is not None:
        # A seq2seq model reads the context in its encoder and the choice in its decoder.
        rooms = [max(len(c) for c in row) if causal else 0 for row in conts]
        cut = rows_over([len(c) for c in ctx], rooms, fitting.context, fitting.where, fitting.row_ids)
        for i in cut:
            ctx[i] = cut_left(ctx[i], max(fitting.context.limit - rooms[i], 2), tokenizer.bos_token_id if causal else None)
    chars = torch.tensor([[len(o) for o in opts] for opts in options], dtype=torch.float64)
    return (ctx, conts, chars), cut


CLOZE_ENDINGS = ("", ".", "!", "?")


def cloze_prefix(text: str) -> str | None:
    """The text before a cloze's blank when the blank ends the sentence, else None."""
    before, after = text.split(MASK, 1)
    return before.rstrip() if after.strip() in CLOZE_ENDINGS and before.strip() else None


def cloze_prefixes(tokenizer, examples: Sequence[Example]) -> list[list[list[int]] | None]:
    out = []
    for e in examples:
        texts = [cloze_prefix(t) for t in e.inputs]
        out.append(None if any(t is None for t in texts) else [tokenizer(t)["input_ids"] for t in texts])
    return out


def cloze_metric(tokenizer, examples: Sequence[Example], common: CommonVocab) -> tuple[NegatedLamaMetric, list[int]]:
    """The negated-LAMA metric with gold objects and primes as next-token vocabulary ids (the
    vocabulary is its own token space here), and each probe's gold id (-1: skipped). A probe is
    skipped where its blank does not end the sentence or its object is not a one-token word of
    LAMA's common vocabulary."""
    gold_ids, reasons = gold_or_skip(common, [e.label for e in examples])
    primes = []
    for i, e in enumerate(examples):
        aff, mis = cloze_prefix(e.inputs[0]), cloze_prefix(e.inputs[2])
        if aff is None or mis is None:
            gold_ids[i] = -1
            reasons[i] = "a causal LM fills only a blank that ends the sentence"
            primes.append([])
            continue
        words = {e.meta["prime"], e.meta["prime"].lower()} - {""}
        conts = [split_pair(tokenizer, mis, " " + w, causal=True)[1] for w in words]
        primes.append(sorted({c[0] for c in conts if len(c) == 1}))
    note = "causal LM: only probes whose blank ends the sentence are scored (next token)"
    space = tuple(tokenizer.convert_ids_to_tokens(list(range(len(tokenizer)))))
    metric = NegatedLamaMetric(
        [g if g >= 0 else SKIPPED for g in gold_ids], primes, [e.subset for e in examples], [e.group for e in examples],
        files=[e.meta["relation_file"] for e in examples], note=note, space=[t if t is not None else "" for t in space],
        common_vocab_left_out=common.left_out, skip_reasons=reasons,
    )
    return metric, gold_ids


def padded(rows: Sequence[Sequence[int]], value: int = IGNORE) -> torch.Tensor:
    width = max((len(r) for r in rows), default=1)
    out = torch.full((len(rows), width), value, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r, dtype=torch.long)
    return out


# ---------------------------------------------------------------------------------------------
# Modules


class LMModule(NegtrainModule):
    """What both LM families share: per eval set, generate text or score each label's verbalizer."""

    encoder_decoder: bool

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
    response_cache = None
    cache_settings: dict[str, Any] = {}

    def use_response_cache(self, cache, settings: dict[str, Any]) -> None:
        self.response_cache, self.cache_settings = cache, settings

    def _cached(self, kind: str, batch: dict[str, torch.Tensor], extra: dict[str, Any], compute):
        """Per row of ``batch``: its cached answer, or ``compute`` run on the rows without one
        (as a smaller batch of the same padding) and stored. ``compute(sub_batch) -> list[Answer]``."""
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
        if eval_set.evaluator is not None:  # multiple choice, cloze probes: fp32 under precision auto
            with self.fp32_scoring(batch["index"].device.type):
                return eval_set.evaluator(self, batch)
        bench, examples = eval_set.benchmark, eval_set.examples
        index = batch["index"].tolist()
        answering = eval_set.answering
        if not bench.generative and (answering is None or not answering.generates):
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


def predict_choices(module: LMModule, batch: dict[str, torch.Tensor], inputs) -> torch.Tensor:
    """A multiple-choice set's evaluator: (B, choices) float64, every choice's summed
    log-likelihood; the metric picks the acc and acc_norm choices from them and the prediction
    lines carry them. ``inputs``: (context ids, choice ids, choice lengths in characters)."""
    contexts, choices, _ = inputs
    index = batch["index"]
    rows = index.tolist()
    with torch.no_grad():
        scores = continuation_logprobs(
            module.model, [contexts[i] for i in rows], [choices[i] for i in rows],
            encoder_decoder=module.encoder_decoder, pad_id=module.pad_id,
        )
    return scores.logprob.to(device=index.device, dtype=torch.float64)


@torch.no_grad()
def predict_cloze(module: LMModule, batch: dict[str, torch.Tensor], prefixes, common: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
    """A causal LM's cloze evaluator: rows of :func:`negtrain.metrics.cloze.cloze_rows` from the
    next-token scores after the affirmative, negated and misprimed prefix (the vocabulary is the
    token space); skipped rows where the blank is not final. ``prefixes``: per example, the three
    prefixes' ids or None."""
    index = batch["index"]
    rows = index.tolist()
    out = skipped_rows(len(rows))
    scored = [r for r, i in enumerate(rows) if prefixes[i] is not None]
    if scored:
        seqs = [p for r in scored for p in prefixes[rows[r]]]
        ids = padded(seqs, module.pad_id).to(index.device)
        mask = padded([[1] * len(x) for x in seqs], 0).to(index.device)
        logits = module.model(input_ids=ids, attention_mask=mask).logits
        last = logits[torch.arange(len(seqs), device=ids.device), mask.sum(1) - 1].float().view(len(scored), 3, -1)
        identity = torch.arange(last.shape[-1], device=last.device)
        picked = torch.tensor([rows[r] for r in scored], dtype=torch.long)
        out[scored] = cloze_rows(last[:, 0], last[:, 1], last[:, 2], identity, common, gold[picked]).cpu()
    return out.to(index.device)


def cloze_eval_set(tokenizer, bench: Benchmark, split: str, examples: Sequence[Example]) -> EvalSet:
    """A causal LM's negated-LAMA eval set: scored by :func:`predict_cloze` (the batch's encoding
    is the affirmative prefix, or one BOS/EOS token for a skipped probe; it is not read)."""
    prefixes = cloze_prefixes(tokenizer, examples)
    fallback = [tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id]
    encoded = EncodedSplit.from_lists([p[0] if p is not None else fallback for p in prefixes], None)
    common = common_vocab(tokenizer, common_vocabulary(), causal=True)
    metric, gold = cloze_metric(tokenizer, examples, common)
    return EvalSet(
        bench, split, list(examples), encoded, predicted_labels=metric.space, metric=metric,
        evaluator=partial(predict_cloze, prefixes=prefixes, common=common.ids, gold=torch.tensor(gold, dtype=torch.long)),
    )


def choice_eval_set(tokenizer, bench: Benchmark, split: str, examples: Sequence[Example], cfg: LanguageModelConfig, causal: bool,
                    context: Context) -> EvalSet:
    """A multiple-choice eval set (NeQA), scored by :func:`predict_choices`."""
    inputs, cut = fitted_choice_inputs(tokenizer, bench, examples, cfg, causal, None, _fitting(context, bench, split, examples))
    metric = bench.metric(examples)
    mark_cut(metric, cut, context)
    return EvalSet(
        bench, split, list(examples), EncodedSplit.from_lists(inputs[0], None),
        metric=metric, evaluator=partial(predict_choices, inputs=inputs),
    )


def _fitting(context: Context, bench: Benchmark, split: str, examples: Sequence[Example]) -> Fitting:
    return Fitting(context, f"{bench.name}/{split}", [e.id for e in examples])


def strategy_choice_eval_set(tokenizer, bench: Benchmark, split: str, examples: Sequence[Example], settings: PromptSettings,
                            cfg: LanguageModelConfig, causal: bool, seed: int, log: bool, context: Context) -> EvalSet:
    """A multiple-choice benchmark put through one of its prompt strategies (ScoNe-NLG): with a
    generating strategy the model completes each prompt and the completions are written as the
    predictions, for people to judge (``EvalSet.completions``); with a log-likelihood strategy its
    choices are scored after the strategy's prompt (zero-shot, or after the paper's
    demonstrations) as :func:`predict_choices` scores them. The choice scorer reads the plain
    prompt text, never a chat template."""
    strategy = settings.strategy_of(bench)
    prompts, shot_ids = prompts_with_shots(bench, split, examples, settings, cfg, seed)
    fitting = _fitting(context, bench, split, examples)
    if strategy.answer.generates:
        texts, chatted = rendered_prompts(tokenizer, prompts, cfg)
        if causal:
            encoded, cut = encode_causal_eval(tokenizer, bench, texts, cfg, strategy.answer.max_new_tokens, chatted, fitting)
        else:
            encoded, cut = encode_seq2seq_prompts(tokenizer, texts, cfg, chatted, fitting)
        metric = bench.completions_metric(examples)
        metric.counts_unparsed = True
        mark_cut(metric, cut, context)
        return EvalSet(
            bench, split, list(examples), encoded, metric=metric, shot_ids=shot_ids, answering=strategy.answer,
            prompts=seen_prompts(tokenizer, texts, encoded, cut, chatted) if log else None, variant=settings.variant,
            log_samples=log, completions=True,
        )
    contexts = [p.text() for p in prompts]
    inputs, cut = fitted_choice_inputs(tokenizer, bench, examples, cfg, causal, contexts, fitting)
    metric = bench.metric(examples)
    mark_cut(metric, cut, context)
    if cut:  # the text each cut context kept (the choice scorer tokenizes contexts as plain text)
        contexts = list(contexts)
        for i in cut:
            contexts[i] = tokenizer.decode(inputs[0][i], skip_special_tokens=True)
    return EvalSet(
        bench, split, list(examples), EncodedSplit.from_lists(inputs[0], None), metric=metric,
        evaluator=partial(predict_choices, inputs=inputs), shot_ids=shot_ids,
        prompts=contexts if log else None, variant=settings.variant, log_samples=log,
    )


# ---------------------------------------------------------------------------------------------
# Builders (see negtrain.models.families)


def _build_lm(recipe, loaded, causal: bool):
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM

    cfg = recipe.model
    path = resolve_model_name(cfg.name)
    tokenizer = load_tokenizer(path, "model")
    if tokenizer.eos_token_id is None:
        raise ConfigError(f"model '{cfg.name}': the tokenizer has no EOS token")
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    check_chat(tokenizer, cfg)  # before any weights are loaded
    # Evaluation prompts are held to the model's own context, not to the training max_length.
    context = model_context(AutoConfig.from_pretrained(path), tokenizer, recipe.evaluation.truncate)

    # What the family can score and train on was decided by the scoring matrix (resolve_benchmarks).
    eval_sets = []
    eval_specs = loaded.eval_specs or [None] * len(loaded.eval)
    for (b, split, ex), spec in zip(loaded.eval, eval_specs, strict=False):
        if b.answer_type is AnswerKind.CHOICE and spec is not None and getattr(spec, "strategy", None):
            eval_sets.append(strategy_choice_eval_set(
                tokenizer, b, split, ex, PromptSettings.of(spec), cfg, causal, recipe.seed, recipe.evaluation.log_samples, context,
            ))
            continue
        if b.answer_type.builds_own_context:
            # The benchmark builds the context itself: no prompt, verbalizer or shots.
            eval_sets.append(cloze_eval_set(tokenizer, b, split, ex) if b.answer_type is AnswerKind.CLOZE
                             else choice_eval_set(tokenizer, b, split, ex, cfg, causal, context))
            continue
        settings = PromptSettings.of(spec)
        answering = settings.generating_answer(b)
        prompts, shot_ids = prompts_with_shots(b, split, ex, settings, cfg, recipe.seed)
        texts, chatted = rendered_prompts(tokenizer, prompts, cfg)
        conts = None if b.generative else label_continuations(tokenizer, b, settings.verbalizer or b.verbalizer(), cfg, causal)
        fitting = _fitting(context, b, split, ex)
        if causal:
            if answering is not None:
                room = answering.max_new_tokens
            else:
                room = cfg.max_new_tokens if b.generative else max(len(c) for c in conts)
            encoded, cut = encode_causal_eval(tokenizer, b, texts, cfg, room, chatted, fitting)
        else:
            encoded, cut = encode_seq2seq_prompts(tokenizer, texts, cfg, chatted, fitting)
        metric = b.metric(ex)
        metric.counts_unparsed = answering is not None
        mark_cut(metric, cut, context)
        log = recipe.evaluation.log_samples
        eval_sets.append(EvalSet(
            b, split, ex, encoded, metric=metric, choices=conts, shot_ids=shot_ids, answering=answering,
            prompts=seen_prompts(tokenizer, texts, encoded, cut, chatted) if log else None, variant=settings.variant, log_samples=log,
        ))

    train = None
    if loaded.train:
        parts, extras = [], []
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
            sources=[f"{b.name}/{split}" for b, split, _ in loaded.train],
            source_sizes=[len(ex) for _, _, ex in loaded.train],
        )

    auto = AutoModelForCausalLM if causal else AutoModelForSeq2SeqLM
    model = load_base(auto, path, recipe.adapter, **attention_kwargs(cfg))
    model = add_adapter(model, recipe.adapter, recipe.model.peft_task_type)
    freeze(model, cfg)
    if causal:
        module = CausalLMModule(model, tokenizer, cfg, eval_sets, recipe=recipe)
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
