"""Scoring an eval entry through a backend (a row of the backends table,
:mod:`negtrain.config.backends`: the model in this process, ``hf`` or ``transformers``; a model
behind an OpenAI-compatible server, ``openai``; or a registered one) into a card's files.

The entry becomes requests and its answers the metric's updates through the engine
(:mod:`negtrain.engine.entry_requests`: generation, verbalizers, choices and cloze, each as its
module says); the metric, the bootstrap intervals, the metrics line and the predictions file come
from the one scoring path every evaluation takes (:mod:`negtrain.data.scoring`). Here: the
records a card keeps of it (requests sent and answered from the cache, rows a failed request left
out under ``--allow-missing``, the rows cut to fit, responses whose last character the token limit
cut in two).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from negtrain.benchmarks.base import AnswerKind, Benchmark
from negtrain.data.eval_set import ScoredSplit
from negtrain.data.row_limit import limited_rows
from negtrain.data.scoring import record_scored, scored_result
from negtrain.engine.entry_requests import EntryRequests, entry_requests
from negtrain.engine.prompts import Prepared, prepare_entry
from negtrain.engine.requests import Counts, Generation, Loglikelihood
from negtrain.io.records import CardRecord
from negtrain.models.precision_note import precision_note
from negtrain.models.prompting import AnswerMode, PromptSettings
from negtrain.serving.backend import Backend


def served_unsupported(bench: Benchmark) -> str | None:
    """Why ``bench`` cannot be scored through a server (None: it can)."""
    if bench.answer_type is AnswerKind.CLOZE:
        return "its metrics need the whole next-token distribution, which a server does not return"
    return None


def needs_logprobs(bench: Benchmark, entry=None) -> bool:
    """Whether scoring ``bench`` (as ``entry`` asks) needs prompt log-probabilities."""
    if entry is None:
        return not bench.generative
    return not PromptSettings.of(entry).answer_mode(bench).generates


def how_asked(built: EntryRequests, read) -> dict[str, Any]:
    """How the model was asked, for the card to say: the answer mode, the strategy and shots, and
    per mode what decided the answer: the verbalizers as scored (the continuations sent, with
    their leading space), or the answer rule, the generation budget and how many answers used all
    of it (an answer cut off before it said anything readable)."""
    settings = built.settings
    asked: dict[str, Any] = {"mode": built.mode.value, "strategy": settings.strategy, "shots": settings.shots}
    if settings.shots_rule is not None:
        asked["min_shots"] = settings.min_shots
    if built.mode is AnswerMode.VERBALIZERS and built.per_example:
        first = built.per_example[0]
        asked["verbalizers"] = {label: r.continuation for label, r in zip(built.bench.labels, first, strict=False)
                                if isinstance(r, Loglikelihood)}
    if built.mode.generates and built.rule is not None:
        budget = next((r.max_tokens for reqs in built.per_example for r in reqs if isinstance(r, Generation)), None)
        asked["answer_rule"] = built.rule.rule or "the family's default (the answer text as generated)"
        asked["max_new_tokens"] = budget
        asked["at_token_limit"] = sum(1 for t in read.tokens.values() if budget is not None and t >= budget)
    return asked


@dataclass
class ServedResult:
    record: CardRecord
    counts: Counts


def score_served(recipe, entry, backend: Backend, out: Path, allow_missing: bool = False, prepared: Prepared | None = None,
                 built: EntryRequests | None = None) -> ServedResult:
    """Score one eval entry through ``backend``; write its predictions file into ``out`` and
    return its metrics line (with the requests it took under ``"requests"``). ``prepared``: its
    prompts as :func:`negtrain.engine.prompts.prepare_all` built and checked them before the
    card's first request, and ``built`` its requests (each built here when not given)."""
    if prepared is None:
        prepared = prepare_entry(recipe, entry, backend)
    if built is None:
        built = entry_requests(recipe, entry, backend, prepared)
    examples = built.examples
    counts = Counts()
    start = time.perf_counter()
    limit = recipe.trainer.limit_val_batches
    # A row limit keeps whole contrast groups drawn with the seed, as fit's evaluation does.
    limited = limited_rows(examples, limit, recipe.data.eval_batch_size, recipe.seed, built.name)
    rows = list(range(len(examples))) if limited is None else limited
    answers = built.answer_in_parts(backend, rows, counts, allow_missing, recipe.data.eval_batch_size)
    read = built.read(rows, answers)
    built.update(read)
    built.mark_cut(read.cut)
    log = recipe.evaluation.log_samples
    rendered = built.rendered
    if rendered is not None and read.seen:  # the log holds what the model saw: a cut prompt's kept text
        rendered = [read.seen.get(i, text) for i, text in enumerate(rendered)]
    texts: list[str | None] | None = None
    if built.mode.generates and (built.bench.generative or built.completions):
        texts = [read.texts.get(i) for i in range(len(examples))]
    scored = ScoredSplit(built.bench, entry.split, examples, metric=built.metric, shot_ids=built.shot_ids, answering=built.answering,
                         shots_rule=built.settings.shots_rule, prompts=rendered if log else None, variant=built.settings.variant,
                         log_samples=log, completions=built.completions, predicted_labels=built.predicted_labels,
                         cut_by=None if len(rows) == len(examples) else f"trainer.limit_val_batches={limit}", offered=len(rows))
    # A model here under an explicit lower precision says so, as a family's per-epoch record does.
    precision_words = precision_note(recipe.trainer.precision) if backend.loads_here else None
    also = "; ".join(n for n in (built.note, precision_words) if n) or None
    scored.result = scored_result(built.metric, built.name, texts, also_note=also)
    if log and built.mode is not AnswerMode.CHOICES and built.mode is not AnswerMode.CLOZE:
        scored.result.responses = [read.responses.get(i) for i in range(len(examples))]
    scored.result.tokens_generated = sum(read.tokens.values()) if built.mode.generates else None
    evaluation = recipe.evaluation
    record = record_scored(scored, 0, "validate", time.perf_counter() - start, bootstrap=(evaluation.bootstrap, evaluation.bootstrap_seed),
                           predictions_dir=out, suffix="validate")
    record["requests"] = counts.as_json()
    record["asked"] = how_asked(built, read)
    if counts.missing:
        note = (f"--allow-missing: {len(counts.missing)} request(s) failed, so {len(examples) - len(read.index)} of {len(examples)} "
                "examples have no prediction and these numbers are not comparable with full-split results")
        record["note"] = f"{record['note']}; {note}" if record.get("note") else note
        record["missing"] = counts.missing
    if read.incomplete_utf8:
        # Kept as the server sent it (the text is never altered); said, because servers differ here:
        # one keeps U+FFFD for the cut character, another drops it, and hf decodes it as U+FFFD.
        note = (f"{len(read.incomplete_utf8)} response(s) end in an incomplete UTF-8 character (U+FFFD: the token limit cut it), "
                "kept as the server sent them")
        record["note"] = f"{record['note']}; {note}" if record.get("note") else note
        record["incomplete_utf8"] = read.incomplete_utf8
    return ServedResult(CardRecord(record), counts)

