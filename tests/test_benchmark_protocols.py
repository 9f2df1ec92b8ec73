"""What only some benchmarks provide is declared as protocols (negtrain.benchmarks.base), and the
served path narrows a benchmark to them where its answer mode guarantees it
(negtrain.evaluation.served): these tests check that guarantee over every registered benchmark and
strategy, so a new multiple-choice benchmark that lacks a member fails here, not mid-evaluation."""

from __future__ import annotations

from negtrain.benchmarks.base import AnswerKind, ChoiceQuestions, WrittenCompletions
from negtrain.benchmarks.registry import BENCHMARKS, get_benchmark
from negtrain.models.prompting import AnswerMode, answer_mode
from negtrain.prompts.strategies import strategies


def test_every_multiple_choice_benchmark_provides_its_choice_questions():
    choice = {name for name in BENCHMARKS if get_benchmark(name).answer_type is AnswerKind.CHOICE}
    assert {"neqa", "neqa-lettered", "scone_nlg"} <= choice
    for name in BENCHMARKS:
        # Exactly the multiple-choice benchmarks: a label benchmark does not claim choices.
        assert isinstance(get_benchmark(name), ChoiceQuestions) == (name in choice), name


def test_every_benchmark_answered_by_completions_writes_them():
    completing = set()
    for name in BENCHMARKS:
        bench = get_benchmark(name)
        for strategy in strategies(name).values():
            generating = strategy.answer if strategy.answer.generates else None
            if answer_mode(bench, generating) is AnswerMode.COMPLETIONS:
                completing.add(name)
                assert isinstance(bench, WrittenCompletions), name
    assert "scone_nlg" in completing
    assert not isinstance(get_benchmark("neqa"), WrittenCompletions)
