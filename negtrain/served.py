"""Scoring benchmark splits through a request backend (a model behind an OpenAI-compatible
server), into the same files as the in-process ``hf`` backend.

An eval entry becomes requests (:mod:`negtrain.serving.requests`) built from the same prompts,
shots and verbalizers as the ``causal_lm`` family builds them (:mod:`negtrain.models.lm`):

- a generative benchmark (CondaQA): one greedy :class:`Generation` per example, the family's
  token limit (``model.max_new_tokens``) and stop rule (a newline), the answer cut at its first
  line as the ``hf`` backend cuts it; a chat turn with ``evaluation.server.chat``;
- a label benchmark: one :class:`Loglikelihood` per example and label, the verbalizer after a
  space as the continuation; the label with the highest summed (or per-token mean,
  ``model.verbalizer_score``) log-probability wins;
- a multiple-choice benchmark (NeQA): one per example and choice, the benchmark's own context
  and delimiter; scored as :func:`negtrain.metrics.multiple_choice.choose` scores the ``hf`` ones.

Cloze probes (negated LAMA) need the whole next-token distribution, which no server returns:
they are not scored through a server. The metric, the bootstrap intervals, the metrics line and
the predictions file are the ``hf`` backend's own (:func:`negtrain.training.recorder.eval_record`,
:meth:`negtrain.data.eval_set.EvalSet.write_predictions`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import torch

from negtrain.benchmarks.base import Benchmark
from negtrain.benchmarks.registry import get_benchmark
from negtrain.data.eval_set import EvalResult, EvalSet
from negtrain.metrics.multiple_choice import choose, first_argmax
from negtrain.metrics.uncertainty import estimate
from negtrain.models.lm import STOP_STRINGS, PromptSettings, first_line, prompts_with_shots, verbalizer_text
from negtrain.serving.openai import Counts, OpenAIBackend
from negtrain.serving.requests import Generation, Loglikelihood
from negtrain.training.recorder import eval_record

#: Why a benchmark cannot be scored through a server, by answer type (None: it can).
def served_unsupported(bench: Benchmark) -> str | None:
    if bench.answer_type == "cloze":
        return "its metrics need the whole next-token distribution, which a server does not return"
    return None


def needs_logprobs(bench: Benchmark) -> bool:
    """Whether scoring ``bench`` asks for prompt log-probabilities (verbalizers, choices)."""
    return not bench.generative


@dataclass
class ServedResult:
    record: dict
    counts: Counts


def score_served(recipe, entry, backend: OpenAIBackend, out: Path, allow_missing: bool = False) -> ServedResult:
    """Score one eval entry through ``backend``; write its predictions file into ``out`` and
    return its metrics line (with the requests it took under ``"requests"``)."""
    bench = get_benchmark(entry.benchmark)
    cfg = recipe.model
    examples = list(bench.load(entry.split))
    counts = Counts()
    start = time.perf_counter()
    name = f"{bench.name}/{entry.split}"
    metric = bench.metric(examples)
    texts = None
    shot_ids = None
    if bench.answer_type == "choice":
        requests, shape = [], []
        for e in examples:
            options = list(bench.choices(e))
            shape.append(len(options))
            requests += [Loglikelihood(bench.context(e), bench.target_delimiter + o, example=f"{name}/{e.id} choice {j}")
                         for j, o in enumerate(options)]
        answers = backend.answer(requests, counts, allow_missing)
        index, logprob, chars, at = [], [], [], 0
        for i, (e, k) in enumerate(zip(examples, shape)):
            got = answers[at : at + k]
            at += k
            if any(a is None for a in got):
                continue
            index.append(i)
            logprob.append([a.logprob for a in got])
            chars.append([len(o) for o in bench.choices(e)])
        if index:
            predicted = choose(torch.tensor(logprob, dtype=torch.float64), torch.tensor(chars, dtype=torch.float64))
            metric.update(torch.tensor(index, dtype=torch.long), predicted)
    else:
        settings = PromptSettings.of(entry)
        prompts, shot_ids = prompts_with_shots(bench, entry.split, examples, settings, cfg, recipe.seed)
        if bench.generative:
            chat = recipe.evaluation.server.chat
            requests = [Generation(p, cfg.max_new_tokens, STOP_STRINGS, chat, example=f"{name}/{e.id}") for p, e in zip(prompts, examples)]
            answers = backend.answer(requests, counts, allow_missing)
            texts = [None if a is None else first_line(a.text) for a in answers]
            index = [i for i, t in enumerate(texts) if t is not None]
            if index:
                right = [int(bench.is_correct(texts[i], examples[i])) for i in index]
                metric.update(torch.tensor(index, dtype=torch.long), torch.tensor(right, dtype=torch.long))
        else:
            verbalizer = settings.verbalizer or bench.verbalizer()
            # The continuation is the verbalizer after a space, as the causal family splits it.
            conts = [" " + verbalizer_text(verbalizer[label], cfg) for label in bench.labels]
            requests = [Loglikelihood(p, c, example=f"{name}/{e.id} label {label!r}")
                        for p, e in zip(prompts, examples) for c, label in zip(conts, bench.labels)]
            answers = backend.answer(requests, counts, allow_missing)
            k = len(conts)
            index, scores = [], []
            for i in range(len(examples)):
                got = answers[i * k : (i + 1) * k]
                if any(a is None for a in got):
                    continue
                index.append(i)
                scores.append([a.logprob / (a.n_tokens if cfg.verbalizer_score == "mean" else 1) for a in got])
            if index:
                predicted = first_argmax(torch.tensor(scores, dtype=torch.float64))
                metric.update(torch.tensor(index, dtype=torch.long), predicted)
    values = {k: float(v) for k, v in metric.compute().items()}
    predictions = None if metric.last_predictions is None else metric.last_predictions.copy()
    eval_set = EvalSet(bench, entry.split, examples, encoded=None, metric=metric, shot_ids=shot_ids)
    eval_set.result = EvalResult(name, values, predictions, metric.note, texts)
    if metric.last_outcomes is not None and metric.supports_uncertainty:
        evaluation = recipe.evaluation
        eval_set.result.uncertainty = estimate(metric, metric.last_outcomes, evaluation.bootstrap, evaluation.bootstrap_seed, bench.is_count)
    eval_set.write_predictions(out, "validate")
    record = eval_record(eval_set, 0, "validate", time.perf_counter() - start)
    record["requests"] = counts.as_json()
    if counts.missing:
        note = (f"--allow-missing: {len(counts.missing)} request(s) failed, so {len(examples) - len(index)} of {len(examples)} "
                "examples have no prediction and these numbers are not comparable with full-split results")
        record["note"] = f"{record['note']}; {note}" if record.get("note") else note
        record["missing"] = counts.missing
    return ServedResult(record, counts)
