"""One eval entry as requests, and its answers as the metric's updates: the engine's core, the
same for a report card answered all at once and for ``fit``'s per-epoch evaluation answered a
batch of rows at a time on each DDP rank.

:func:`entry_requests` builds, per example, the requests its answer mode needs
(:class:`negtrain.models.prompting.AnswerMode`), from the prompts :mod:`negtrain.engine.prompts`
built and checked:

- **generation** (a free-text benchmark such as CondaQA, a strategy whose answer rule reads the
  label out of generated text, ScoNe-NLG completions): one greedy :class:`Generation`, read by the
  strategy's answer rule or the family's default (a causal LM's first line; a seq2seq model's
  whole answer);
- **verbalizers** (a label benchmark): one :class:`Loglikelihood` per label, the verbalizer as the
  continuation (after a space for a causal LM, as its decoder target with EOS for a seq2seq model); the
  label with the highest summed or per-token mean log-probability (``model.verbalizer_score``)
  wins;
- **choices** (NeQA; a ScoNe-NLG log-likelihood strategy): one per choice, after the benchmark's
  own context and delimiter (or the strategy's plain prompt); the metric picks from the
  log-likelihoods;
- **cloze** (negated LAMA, a causal LM): three :class:`NextToken` requests, after the affirmative,
  negated and misprimed text before the blank; a probe whose blank does not end the sentence gets
  none and is reported as skipped.

:meth:`EntryRequests.read` turns the answers of some rows into what the metric is updated with,
and what the records keep (texts, responses, tokens generated, the rows cut to fit and the text
the model saw).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from negtrain.benchmarks.base import Benchmark, ChoiceQuestions, Example, PerChoiceContexts, WrittenCompletions, choice_contexts
from negtrain.benchmarks.negated_lama import common_vocabulary
from negtrain.config import eval_set_name
from negtrain.core.errors import ConfigError
from negtrain.engine.empty_context import empty_context_text
from negtrain.engine.prompts import Prepared, chat_messages, chats, rendered_chat
from negtrain.engine.requests import Answer, Generation, Loglikelihood, NextToken, Request
from negtrain.metrics.cloze import cloze_rows, skipped_rows
from negtrain.metrics.multiple_choice import first_argmax
from negtrain.models.cloze_vocab import common_vocab
from negtrain.models.continuation import ContinuationScores
from negtrain.models.generation import cut_at_stop
from negtrain.models.lm_encoding import cloze_metric, cloze_prefix, mark_cut
from negtrain.models.prompting import AnswerMode, PromptSettings, answer_outcome, causal_answering, verbalizer_text
from negtrain.prompts.strategies import Answering

#: What a decoder gives for the bytes of a character cut off by the token limit.
INCOMPLETE_TAIL = "\ufffd"


def row_name(name: str, example_id: str) -> str:
    """A request's row, ``<benchmark>/<split>/<id>`` (``name`` is the entry's
    ``benchmark/split[/variant]``), for errors and notes: an id that already starts with the
    benchmark and split (MoNLI's, CondaQA's) is named once, as it is, also under a protocol's
    variant."""
    benchmark_split = "/".join(name.split("/")[:2])
    return example_id if example_id.startswith(f"{benchmark_split}/") else f"{name}/{example_id}"


def default_answering(cfg, encoder_decoder: bool) -> Answering:
    """How a free-text benchmark is answered without a strategy: greedy up to
    ``model.max_new_tokens``; a causal LM's answer is its first line (it stops at a newline), a
    seq2seq model's the whole of its decoder's answer."""
    if encoder_decoder:
        return Answering(method="generate", rule=None, max_new_tokens=cfg.max_new_tokens)
    return causal_answering(cfg)


@dataclass
class Read:
    """What the answers of some rows come to: the rows fully answered (``index``), what the metric
    is updated with for them (``predictions``, one per row of ``index``), and per row what the
    records keep."""

    index: list[int]
    predictions: torch.Tensor | None
    texts: dict[int, str] = field(default_factory=dict)
    responses: dict[int, Any] = field(default_factory=dict)
    tokens: dict[int, int] = field(default_factory=dict)
    cut: list[int] = field(default_factory=list)
    seen: dict[int, str] = field(default_factory=dict)
    incomplete_utf8: list[str] = field(default_factory=list)
    #: The rows whose generated response is empty (nothing, or whitespace, before the stop).
    empty: list[int] = field(default_factory=list)


@dataclass
class EntryRequests:
    """One eval entry put to a model: its examples, per example the requests to answer, the metric
    and what the records say of the prompts."""

    name: str
    bench: Benchmark
    split: str
    examples: list[Example]
    settings: PromptSettings
    mode: AnswerMode
    #: A generating strategy's answering (None: the family's default or no generation).
    answering: Answering | None
    #: What reads a generated response (generation modes), else None.
    rule: Answering | None
    per_example: list[list[Request]]
    metric: Any
    shot_ids: list[list[str]] | None = None
    #: Per example the text the model is given (a chat: its template's text, or the messages sent
    #: as JSON where a server renders them), for the sample log.
    rendered: list[str] | None = None
    note: str | None = None
    verbalizer_score: str = "sum"
    #: Cloze: LAMA's common vocabulary and each probe's gold id, as this model's token ids.
    cloze: tuple[torch.Tensor, torch.Tensor] | None = None
    context: Any = None  # the backend's models.context.Context, when it has one
    #: Every row's requests share one context (an empty one, BLiMP): a backend that answers
    #: requests of one context as one batch row would put every row in one batch, so they are
    #: answered ``eval_batch_size`` rows at a time (:meth:`answer_in_parts`).
    shared_context: bool = False

    @property
    def completions(self) -> bool:
        return self.mode is AnswerMode.COMPLETIONS

    @property
    def predicted_labels(self) -> tuple[str, ...] | None:
        """The labels a prediction indexes (cloze: the metric's token space)."""
        return tuple(self.metric.space) if self.cloze is not None else None

    def requests(self, rows: Sequence[int]) -> list[Request]:
        """The requests of ``rows``, in row order."""
        return [r for i in rows for r in self.per_example[i]]

    def answer_in_parts(self, backend, rows: Sequence[int], counts, allow_missing: bool, rows_per_call: int) -> list[Answer | None]:
        """``backend``'s answers to the requests of ``rows``: in one call, or, for an entry whose rows
        share one context, ``rows_per_call`` rows a call."""
        step = max(rows_per_call, 1) if self.shared_context else max(len(rows), 1)
        answers: list[Answer | None] = []
        for start in range(0, len(rows), step):
            answers.extend(backend.answer(self.requests(rows[start:start + step]), counts, allow_missing))
        return answers

    def read(self, rows: Sequence[int], answers: Sequence[Answer | None]) -> Read:
        """The answers of ``rows`` (as :meth:`requests` listed them; None: a request that failed
        under ``--allow-missing``, and its row is left out)."""
        got: list[tuple[int, list[Answer]]] = []
        at = 0
        for i in rows:
            k = len(self.per_example[i])
            part = answers[at:at + k]
            at += k
            if all(a is not None for a in part):
                got.append((i, [a for a in part if a is not None]))
        out = Read([i for i, _ in got], None)
        for i, part in got:
            seen = next((a.seen for a in part if a.cut), None)
            if any(a.cut for a in part):
                out.cut.append(i)
                if seen is not None:
                    out.seen[i] = seen
        if self.mode.generates:
            self._read_generations(got, out)
        elif self.mode is AnswerMode.VERBALIZERS:
            self._read_labels(got, out)
        elif self.mode is AnswerMode.CHOICES:
            if got:
                out.predictions = torch.tensor([[a.logprob for a in part] for _, part in got], dtype=torch.float64)
        else:
            self._read_cloze(got, out)
        return out

    def _read_generations(self, got: list[tuple[int, list[Answer]]], out: Read) -> None:
        assert self.rule is not None
        values = []
        for i, (answer,) in got:
            assert answer.text is not None, "a generation was answered without text"
            if answer.text.endswith(INCOMPLETE_TAIL):
                out.incomplete_utf8.append(row_name(self.name, self.examples[i].id))
            response = cut_at_stop(answer.text, self.rule.stop)
            out.responses[i] = response
            if not response.strip():  # scored as its rule reads "", and counted (n_empty)
                out.empty.append(i)
            out.tokens[i] = answer.tokens_out
            value, text = answer_outcome(self.bench, self.examples[i], self.rule.read(response), self.completions, self.bench.labels)
            if text is not None:
                out.texts[i] = text
            values.append(value)
        if got:
            out.predictions = torch.tensor(values, dtype=torch.long)

    def _read_labels(self, got: list[tuple[int, list[Answer]]], out: Read) -> None:
        if not got:
            return
        logprob = torch.tensor([[a.logprob for a in part] for _, part in got], dtype=torch.float64)
        n_tokens = torch.tensor([[a.n_tokens for a in part] for _, part in got])
        scores = ContinuationScores(logprob, n_tokens).normalized(self.verbalizer_score)
        for (i, _), row in zip(got, scores.tolist(), strict=True):
            out.responses[i] = {label: round(v, 4) for label, v in zip(self.bench.labels, row, strict=True)}
        out.predictions = first_argmax(scores)

    def _read_cloze(self, got: list[tuple[int, list[Answer]]], out: Read) -> None:
        assert self.cloze is not None
        common, gold = self.cloze
        rows = skipped_rows(len(got))
        scored = [r for r, (_, part) in enumerate(got) if part]
        if scored:
            def stacked(k: int) -> torch.Tensor:
                return torch.stack([got[r][1][k].next_logprobs for r in scored])

            aff, neg, mis = stacked(0), stacked(1), stacked(2)
            identity = torch.arange(aff.shape[-1])
            picked = torch.tensor([got[r][0] for r in scored], dtype=torch.long)
            rows[scored] = cloze_rows(aff, neg, mis, identity, common, gold[picked]).cpu()
        out.predictions = rows

    def update(self, read: Read) -> None:
        """The metric updated with ``read``'s rows."""
        if read.index and read.predictions is not None:
            self.metric.update(torch.tensor(read.index, dtype=torch.long), read.predictions)
        if read.empty:
            self.metric.mark_empty(torch.tensor(read.empty, dtype=torch.long))

    def mark_cut(self, cut: Sequence[int]) -> None:
        """Under ``truncate: left``, the rows cut counted by the metric (``n_truncated``)."""
        if self.context is not None:
            mark_cut(self.metric, cut, self.context)


def entry_requests(recipe, entry, backend, prepared: Prepared, examples: Sequence[Example] | None = None) -> EntryRequests:
    """``entry`` of ``recipe`` as requests for ``backend`` (what it offers decides a chat, a seq2seq
    continuation and a cloze's vocabulary), from its prompts as ``prepared``."""
    from negtrain.benchmarks.registry import get_benchmark

    bench = get_benchmark(entry.benchmark)
    cfg = recipe.model
    examples = list(bench.load(entry.split)) if examples is None else list(examples)
    settings = PromptSettings.of(entry)
    name = eval_set_name(bench.name, entry.split, settings.variant)
    answering = settings.generating_answer(bench)
    mode = settings.answer_mode(bench)
    encoder_decoder = backend.encoder_decoder
    built = EntryRequests(
        name, bench, entry.split, examples, settings, mode, answering, None, [], bench.metric(examples),
        shot_ids=prepared.shot_ids, note=prepared.note, verbalizer_score=cfg.verbalizer_score,
        context=backend.context,
    )
    if mode is AnswerMode.CLOZE:
        _cloze_requests(built, backend)
        return built
    if mode is AnswerMode.CHOICES:
        assert isinstance(bench, ChoiceQuestions)  # answer_mode gives CHOICES only for a choice benchmark
        if settings.strategy:  # the choices after the strategy's plain prompt
            assert prepared.prompts is not None
            contexts = [p.text() for p in prepared.prompts]
            built.rendered = contexts
        else:
            contexts = [bench.context(e) for e in examples]
            if "" in contexts:  # a whole sentence is the choice (BLiMP): after BOS/EOS, as lm-eval scores it
                prefix = empty_context_text(backend, name)
                contexts = [c or prefix for c in contexts]
                built.shared_context = True
                said = f"each choice scored after the model's {prefix!r} token" if prefix else "each choice scored after the BOS token the tokenizer adds"
                built.note = "; ".join(n for n in (built.note, f"{said}, as lm-evaluation-harness scores an empty context") if n)
        # A benchmark whose choices follow contexts of their own (NevIR) gives them; the others one for all.
        per_choice = ([choice_contexts(bench, e) for e in examples] if isinstance(bench, PerChoiceContexts) and not settings.strategy
                      else [[c] * len(bench.choices(e)) for e, c in zip(examples, contexts, strict=True)])
        built.per_example = [
            [Loglikelihood(context, bench.target_delimiter + o, example=f"{row_name(name, e.id)} choice {j}")
             for j, (o, context) in enumerate(zip(bench.choices(e), own, strict=True))]
            for e, own in zip(examples, per_choice, strict=True)
        ]
        return built
    assert prepared.prompts is not None
    prompts = prepared.prompts
    if chats(cfg, backend, mode):
        messages = [chat_messages(cfg, p) for p in prompts]
        conversations = [tuple((m["role"], m["content"]) for m in ms) for ms in messages]
        # The text the model is given where the backend renders the template itself (this
        # process); a server's own rendering is unknown (None), so its log holds the messages sent.
        built.rendered = [text if (text := rendered_chat(backend, cfg, p)) is not None else json.dumps(ms, ensure_ascii=False)
                          for ms, p in zip(messages, prompts, strict=True)]
    else:
        conversations = [()] * len(prompts)
        built.rendered = [p.text() for p in prompts]
    if mode is AnswerMode.COMPLETIONS:
        # A multiple-choice benchmark under a generating strategy, which only a benchmark whose
        # completions people judge has.
        assert isinstance(bench, WrittenCompletions)
        built.metric = bench.completions_metric(examples)
    if mode.generates:
        built.metric.counts_unparsed = answering is not None
        rule = answering or default_answering(cfg, encoder_decoder)
        built.rule = rule
        built.per_example = [
            [Generation(p.text(), rule.max_new_tokens, tuple(rule.stop), m, example=row_name(name, e.id))]
            for p, m, e in zip(prompts, conversations, examples, strict=True)
        ]
        return built
    verbalizer = settings.verbalizer or bench.verbalizer()
    # Resolving the recipe filled the entry's verbalizer, or refused a label benchmark without one
    # (negtrain.benchmarks.matrix).
    assert verbalizer is not None
    space = "" if encoder_decoder else " "  # a causal LM's continuation follows the prompt after a space
    conts = [space + verbalizer_text(verbalizer[label], cfg) for label in bench.labels]
    _distinct(backend, bench, conts)
    built.per_example = [
        [Loglikelihood(p.text(), c, example=f"{row_name(name, e.id)} label {label!r}", messages=m, eos=encoder_decoder)
         for c, label in zip(conts, bench.labels, strict=True)]
        for p, m, e in zip(prompts, conversations, examples, strict=True)
    ]
    return built


def _distinct(backend, bench: Benchmark, conts: list[str]) -> None:
    """Two labels whose verbalizers are the same tokens cannot be told apart: refused by every
    backend whose tokenizer is here (a server's is not, and is left to its answers)."""
    tokenizer = backend.tokenizer
    if tokenizer is None:
        return
    seen: dict[tuple[int, ...], str] = {}
    for label, text in zip(bench.labels, conts, strict=True):
        ids = tuple(tokenizer(text, add_special_tokens=False)["input_ids"])
        if ids in seen:
            raise ConfigError(
                f"benchmark '{bench.name}': the verbalizers of '{seen[ids]}' and '{label}' are the same "
                f"tokens ({tokenizer.decode(list(ids))!r}), so they cannot be told apart"
            )
        seen[ids] = label


def _cloze_requests(built: EntryRequests, backend) -> None:
    tokenizer = backend.tokenizer
    if tokenizer is None:
        raise ConfigError(f"{built.name}: a cloze probe needs the whole next-token distribution, which only a model in this "
                          f"process gives (backend {backend.name} cannot)")
    common = common_vocab(tokenizer, common_vocabulary(), causal=True)
    metric, gold = cloze_metric(tokenizer, built.examples, common)
    built.metric = metric
    built.cloze = (common.ids, torch.tensor(gold, dtype=torch.long))
    for e in built.examples:
        texts = [cloze_prefix(t) for t in e.inputs]
        if any(t is None for t in texts):
            built.per_example.append([])
            continue
        built.per_example.append([NextToken(t, example=f"{row_name(built.name, e.id)} cloze {k}")
                                  for k, t in enumerate(texts) if t is not None])
