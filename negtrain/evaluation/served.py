"""Scoring benchmark splits through a request backend (a row of the backends table,
:mod:`negtrain.config.backends`: a model behind an OpenAI-compatible server, or a registered
one), into the same files as the in-process ``hf`` backend.

An eval entry becomes requests (:mod:`negtrain.engine.requests`) built from the same prompts,
shots, strategies and verbalizers as the ``causal_lm`` family builds them
(:mod:`negtrain.models.lm`, :mod:`negtrain.prompts`):

- answered by generation (a free-text benchmark such as CondaQA, or a strategy whose answer
  rule reads the label out of generated text): one greedy :class:`Generation` per example with
  the same limits and stop strings as the ``hf`` backend (:class:`negtrain.prompts.strategies.Answering`),
  the response read by the same answer rule; a chat (``--chat``, ``--system``,
  ``--fewshot-as-multiturn``) goes to the chat endpoint as messages;
- a label benchmark scored by verbalizers: one :class:`Loglikelihood` per example and label, the
  verbalizer after a space as the continuation; the label with the highest summed (or per-token
  mean, ``model.verbalizer_score``) log-probability wins;
- a multiple-choice benchmark (NeQA): one per example and choice, the benchmark's own context
  and delimiter; the metric picks from the log-likelihoods as it does from the ``hf`` ones.

Cloze probes (negated LAMA) need the whole next-token distribution, which no server returns:
they are not scored through a server. The metric, the bootstrap intervals, the metrics line and
the predictions file come from the one scoring path every evaluation takes
(:mod:`negtrain.data.scoring`).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from negtrain.benchmarks.base import AnswerKind, Benchmark, ChoiceQuestions, WrittenCompletions
from negtrain.benchmarks.registry import get_benchmark
from negtrain.data.eval_set import ScoredSplit
from negtrain.data.scoring import record_scored, scored_result
from negtrain.io.records import CardRecord
from negtrain.metrics.multiple_choice import first_argmax
from negtrain.models.continuation import ContinuationScores
from negtrain.models.generation import cut_at_stop
from negtrain.models.prompting import (
    AnswerMode, PromptSettings, answer_mode, answer_outcome, causal_answering, verbalizer_text,
)
from negtrain.evaluation.served_prompts import Prepared, prepare_entry
from negtrain.serving.backend import Backend
from negtrain.engine.requests import Answer, Counts, Generation, Loglikelihood, Request

#: What a decoder gives for the bytes of a character cut off by the token limit.
INCOMPLETE_TAIL = "\ufffd"



def _row(name: str, example_id: str) -> str:
    """A request's row, ``<benchmark>/<split>/<id>``, for errors and notes: an id that already
    starts with the benchmark and split (MoNLI's) is not prefixed twice."""
    return example_id if example_id.startswith(f"{name}/") else f"{name}/{example_id}"

def served_unsupported(bench: Benchmark) -> str | None:
    """Why ``bench`` cannot be scored through a server (None: it can)."""
    if bench.answer_type is AnswerKind.CLOZE:
        return "its metrics need the whole next-token distribution, which a server does not return"
    return None


def _generated_text(answer: Answer) -> str:
    """A :class:`Generation`'s answer text. Every backend answers a Generation with its text (a
    server's is checked to be a string, :mod:`negtrain.serving.answers`; the cache keeps what
    was answered), so it is never None here."""
    assert answer.text is not None, "a generation was answered without text"
    return answer.text


def needs_logprobs(bench: Benchmark, entry=None) -> bool:
    """Whether scoring ``bench`` (as ``entry`` asks) needs prompt log-probabilities."""
    if entry is None:
        return not bench.generative
    return not PromptSettings.of(entry).answer_mode(bench).generates


@dataclass
class ServedResult:
    record: CardRecord
    counts: Counts


def score_served(recipe, entry, backend: Backend, out: Path, allow_missing: bool = False, prepared: Prepared | None = None) -> ServedResult:
    """Score one eval entry through ``backend``; write its predictions file into ``out`` and
    return its metrics line (with the requests it took under ``"requests"``). ``prepared``: its
    prompts as :func:`negtrain.evaluation.served_prompts.prepare_all` built and checked them
    before the card's first request (built here when not given)."""
    if prepared is None:
        prepared = prepare_entry(recipe, entry, backend)
    bench = get_benchmark(entry.benchmark)
    cfg = recipe.model
    examples = list(bench.load(entry.split))
    counts = Counts()
    start = time.perf_counter()
    settings = PromptSettings.of(entry)
    name = f"{bench.name}/{entry.split}" + (f"/{settings.variant}" if settings.variant else "")
    metric = bench.metric(examples)
    log = recipe.evaluation.log_samples
    texts: list[str | None] | None = None
    responses: list[Any] | None = None
    shot_ids: list[list[str]] | None = None
    rendered: list[str] | None = None
    requests: list[Request]  # log-likelihoods or generations, by the answer mode
    tokens_generated = None
    cut_characters: list[str] = []  # generations whose last character the token limit cut in two
    answering = settings.generating_answer(bench)
    mode = answer_mode(bench, answering)
    # A multiple-choice benchmark put through a generating strategy (ScoNe-NLG): its completions
    # are the predictions, written for people to judge.
    completions = mode is AnswerMode.COMPLETIONS
    if mode is AnswerMode.CHOICES:
        # answer_mode gives CHOICES only for an AnswerKind.CHOICE benchmark, which provides these.
        assert isinstance(bench, ChoiceQuestions)
        if settings.strategy:  # the choices after the strategy's prompt, as the hf backend scores them
            assert prepared.prompts is not None
            prompts, shot_ids = prepared.prompts, prepared.shot_ids
            contexts = [p.text() for p in prompts]
            rendered = contexts
        else:
            contexts = [bench.context(e) for e in examples]
        requests, shape = [], []
        for e, context in zip(examples, contexts, strict=False):
            options = list(bench.choices(e))
            shape.append(len(options))
            requests += [Loglikelihood(context, bench.target_delimiter + o, example=f"{_row(name, e.id)} choice {j}")
                         for j, o in enumerate(options)]
        answers = backend.answer(requests, counts, allow_missing)
        index, logprob, at = [], [], 0
        for i, k in enumerate(shape):
            got = answers[at : at + k]
            at += k
            answered = [a for a in got if a is not None]
            if len(answered) == len(got):  # every choice answered
                index.append(i)
                logprob.append([a.logprob for a in answered])
        if index:
            metric.update(torch.tensor(index, dtype=torch.long), torch.tensor(logprob, dtype=torch.float64))
    else:
        assert prepared.prompts is not None
        prompts, shot_ids = prepared.prompts, prepared.shot_ids
        if cfg.chat:
            messages = [p.messages(cfg.system, cfg.fewshot_as_multiturn) for p in prompts]
            chats = [tuple((m["role"], m["content"]) for m in ms) for ms in messages]
            # The text the model is given where the backend renders the template itself (this
            # process); a server's own rendering is unknown, so its log holds the messages sent.
            render = getattr(backend, "chat_text", None)
            rendered = [render(ms) if render else json.dumps(ms, ensure_ascii=False) for ms in messages]
        else:
            chats = [()] * len(prompts)
            rendered = [p.text() for p in prompts]
        if completions:
            # COMPLETIONS: a multiple-choice benchmark under a generating strategy, which only a
            # benchmark whose completions people judge has.
            assert isinstance(bench, WrittenCompletions)
            metric = bench.completions_metric(examples)
        if mode.generates:
            metric.counts_unparsed = answering is not None
            rule = answering or causal_answering(cfg)
            requests = [Generation(p.text(), rule.max_new_tokens, tuple(rule.stop), m, example=_row(name, e.id))
                        for p, m, e in zip(prompts, chats, examples, strict=False)]
            answers = backend.answer(requests, counts, allow_missing)
            cut_characters = [r.example for r, a in zip(requests, answers, strict=False)
                              if a is not None and _generated_text(a).endswith(INCOMPLETE_TAIL)]
            responses = [None if a is None else cut_at_stop(_generated_text(a), rule.stop) for a in answers]
            tokens_generated = sum(a.tokens_out for a in answers if a is not None)
            texts = [None] * len(examples) if bench.generative or completions else None
            index, outcome = [], []
            for i, response in enumerate(responses):
                if response is None:
                    continue
                index.append(i)
                value, text = answer_outcome(bench, examples[i], rule.read(response), completions, bench.labels)
                if text is not None:
                    # answer_outcome keeps a text only for a free-text benchmark or completions,
                    # for which texts is a list.
                    assert texts is not None
                    texts[i] = text
                outcome.append(value)
            if index:
                metric.update(torch.tensor(index, dtype=torch.long), torch.tensor(outcome, dtype=torch.long))
        else:
            verbalizer = settings.verbalizer or bench.verbalizer()
            # Resolving the recipe filled the entry's verbalizer, or refused a label benchmark
            # without one (negtrain.benchmarks.matrix).
            assert verbalizer is not None
            # The continuation is the verbalizer after a space, as the causal family splits it.
            conts = [" " + verbalizer_text(verbalizer[label], cfg) for label in bench.labels]
            requests = [Loglikelihood(p.text(), c, example=f"{_row(name, e.id)} label {label!r}")
                        for p, e in zip(prompts, examples, strict=False) for c, label in zip(conts, bench.labels, strict=False)]
            answers = backend.answer(requests, counts, allow_missing)
            k = len(conts)
            index, logprob, n_tokens = [], [], []
            responses = [None] * len(examples)
            for i in range(len(examples)):
                got = answers[i * k : (i + 1) * k]
                answered = [a for a in got if a is not None]
                if len(answered) < len(got):  # a label's request failed (--allow-missing)
                    continue
                index.append(i)
                logprob.append([a.logprob for a in answered])
                n_tokens.append([a.n_tokens for a in answered])
            if index:
                # Summed or per-token (model.verbalizer_score), as the hf backend normalises its own.
                scores = ContinuationScores(torch.tensor(logprob, dtype=torch.float64), torch.tensor(n_tokens)).normalized(cfg.verbalizer_score)
                for i, row in zip(index, scores.tolist(), strict=False):
                    responses[i] = {label: round(v, 4) for label, v in zip(bench.labels, row, strict=False)}
                metric.update(torch.tensor(index, dtype=torch.long), first_argmax(scores))
    scored = ScoredSplit(bench, entry.split, examples, metric=metric, shot_ids=shot_ids, answering=answering, shots_rule=settings.shots_rule,
                         prompts=rendered if log else None, variant=settings.variant, log_samples=log, completions=completions)
    scored.result = scored_result(metric, name, texts, also_note=prepared.note)
    if log and responses is not None:
        scored.result.responses = responses
    scored.result.tokens_generated = tokens_generated
    evaluation = recipe.evaluation
    record = record_scored(scored, 0, "validate", time.perf_counter() - start, bootstrap=(evaluation.bootstrap, evaluation.bootstrap_seed),
                           predictions_dir=out, suffix="validate")
    record["requests"] = counts.as_json()
    if counts.missing:
        note = (f"--allow-missing: {len(counts.missing)} request(s) failed, so {len(examples) - len(index)} of {len(examples)} "
                "examples have no prediction and these numbers are not comparable with full-split results")
        record["note"] = f"{record['note']}; {note}" if record.get("note") else note
        record["missing"] = counts.missing
    if cut_characters:
        # Kept as the server sent it (the text is never altered); said, because servers differ here:
        # one keeps U+FFFD for the cut character, another drops it, and hf decodes it as U+FFFD.
        note = (f"{len(cut_characters)} response(s) end in an incomplete UTF-8 character (U+FFFD: the token limit cut it), "
                "kept as the server sent them")
        record["note"] = f"{record['note']}; {note}" if record.get("note") else note
        record["incomplete_utf8"] = cut_characters
    return ServedResult(CardRecord(record), counts)
