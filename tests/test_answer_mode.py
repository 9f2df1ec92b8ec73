"""Which way a language model answers a benchmark split (`models/prompting.answer_mode`), decided
once for the in-process families and the served path: hand-picked benchmarks and strategies,
and the served path's need for prompt log-probabilities follows from it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from negtrain.benchmarks.registry import get_benchmark
from negtrain.models.prompting import AnswerMode, PromptSettings
from negtrain.evaluation.served import needs_logprobs


@pytest.mark.parametrize("benchmark,strategy,mode", [
    ("neqa", None, AnswerMode.CHOICES),
    ("negated_lama", None, AnswerMode.CLOZE),
    ("scone", None, AnswerMode.VERBALIZERS),
    ("condaqa", None, AnswerMode.GENERATION),
    ("scone", "conditional_q", AnswerMode.GENERATION),  # a label benchmark read from generated text
    ("scone_nlg", "completion", AnswerMode.COMPLETIONS),  # generated completions, for people to judge
    ("scone_nlg", "outcome_choice", AnswerMode.CHOICES),  # its choices scored after the strategy's prompt
])
def test_each_answer_mode(benchmark, strategy, mode):
    bench = get_benchmark(benchmark)
    assert PromptSettings(strategy=strategy).answer_mode(bench) is mode
    entry = SimpleNamespace(benchmark=benchmark, strategy=strategy)
    assert needs_logprobs(bench, entry) is (not mode.generates)
