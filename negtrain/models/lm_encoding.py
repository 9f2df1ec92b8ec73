"""Language-model inputs: a benchmark example's prompt as token ids, for both LM families.

Prompt text (:mod:`negtrain.models.prompting`) becomes ids here: the verbalizers' continuations,
chat-formatted prompts, causal and seq2seq evaluation and training encodings held to the model's
context (:mod:`negtrain.models.context`), multiple-choice inputs, and the prefixes of a cloze probe.
Split from :mod:`negtrain.models.lm`, which imports these names from here (and keeps them
importable from there).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
import torch

from negtrain.benchmarks.base import Benchmark, ChoiceQuestions, Example
from negtrain.benchmarks.negated_probes import MASK
from negtrain.models.chat_template import chat_text
from negtrain.config import LanguageModelConfig
from negtrain.data.collate import IGNORE
from negtrain.data.encoded import EncodedSplit, cached
from negtrain.data.store_keys import fingerprint, tokenizer_signature
from negtrain.core.errors import ConfigError
from negtrain.metrics.cloze import SKIPPED, NegatedLamaMetric
from negtrain.models.cloze_vocab import CommonVocab, gold_or_skip
from negtrain.models.choice_inputs import encode_choices, split_pair
from negtrain.models.context import UNLIMITED, Context, cut_left, fit_split, rows_over, truncation_note
from negtrain.prompts.strategies import Prompt
from negtrain.models.prompting import (
    PromptSettings,
    prompt_text,
    target_text,
    verbalizer_text,
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
        verbalizer = settings.verbalizer or bench.verbalizer()
        assert verbalizer is not None  # resolving the recipe filled it, or refused the benchmark (benchmarks.matrix)
        conts = label_continuations(tokenizer, bench, verbalizer, cfg, causal=True)
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
    # Choice inputs are built only for an AnswerKind.CHOICE benchmark, which provides these.
    assert isinstance(bench, ChoiceQuestions)
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
    primes: list[list[int]] = []
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
    # Every negated-LAMA probe names its source (subset) and relation (group).
    metric = NegatedLamaMetric(
        [g if g >= 0 else SKIPPED for g in gold_ids], primes, cast(list[str], [e.subset for e in examples]), cast(list[str], [e.group for e in examples]),
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
