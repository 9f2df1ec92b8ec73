"""How a benchmark example is put to a language model as text, and how a generated answer is
read: the prompts (the benchmark's or the recipe's template, a strategy, shots), the verbalizers,
the default answering of a causal LM. Text only (no tokenizer, no weights), so the in-process
families (:mod:`negtrain.models.lm`) and a served backend (:mod:`negtrain.evaluation.served`) build the same
prompts from the same code, and a served card imports no Lightning.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from negtrain.benchmarks.base import AnswerKind, Benchmark, Example
from negtrain.config import LanguageModelConfig
from negtrain.core.errors import ConfigError
from negtrain.metrics.base import UNPARSED
from negtrain.models.fewshot import SHOT_SEPARATOR, draw_shots
from negtrain.prompts.strategies import Answering, Prompt, Strategy, get_strategy, normalize_unifiedqa


def prompt_text(bench: Benchmark, example: Example, cfg: LanguageModelConfig, template: str | None = None) -> str:
    template = template or cfg.prompt or bench.prompt_for(cfg.family)
    if template is None:
        raise ConfigError(f"benchmark '{bench.name}' has no default prompt for a language model; set model.prompt")
    fields = bench.prompt_fields(example)
    if cfg.normalize_input == "unifiedqa":
        fields = {k: normalize_unifiedqa(v) for k, v in fields.items()}
    try:
        text = template.format(**fields)
    except (KeyError, IndexError) as exc:
        raise ConfigError(
            f"model.prompt: placeholder {exc} is not an input of benchmark '{bench.name}' "
            f"(its inputs: {', '.join('{' + n + '}' for n in bench.input_names)})"
        ) from exc
    return normalize_unifiedqa(text) if cfg.normalize_input == "unifiedqa" else text


def target_text(example: Example, cfg: LanguageModelConfig) -> str:
    return normalize_unifiedqa(example.label) if cfg.normalize_input == "unifiedqa" else example.label


class AnswerMode(str, Enum):
    """How a language model answers one benchmark split: decided once, by :func:`answer_mode`,
    for the in-process families (their eval sets and ``predict``) and the served path alike."""

    #: Each choice's log-likelihood after the context (multiple choice: NeQA; a ScoNe-NLG
    #: strategy that scores its choices).
    CHOICES = "choices"
    #: The next-token distribution after the text before a blank (negated LAMA; in process only).
    CLOZE = "cloze"
    #: Each label's verbalizer log-likelihood after the prompt (label benchmarks by default).
    VERBALIZERS = "verbalizers"
    #: Greedy text read by an answer rule (a free-text benchmark, or a generating strategy).
    GENERATION = "generation"
    #: A multiple-choice benchmark's greedy completions under a generating strategy, written for
    #: people to judge (ScoNe-NLG).
    COMPLETIONS = "completions"

    @property
    def generates(self) -> bool:
        return self in (AnswerMode.GENERATION, AnswerMode.COMPLETIONS)


def answer_mode(bench: Benchmark, generating: Answering | None) -> AnswerMode:
    """How ``bench`` is answered when its strategy's answering is ``generating`` (a generating
    strategy's :class:`Answering`, None without one: see :meth:`PromptSettings.generating_answer`)."""
    if bench.answer_type is AnswerKind.CHOICE:
        return AnswerMode.CHOICES if generating is None else AnswerMode.COMPLETIONS
    if bench.answer_type is AnswerKind.CLOZE:
        return AnswerMode.CLOZE
    if bench.generative or generating is not None:
        return AnswerMode.GENERATION
    return AnswerMode.VERBALIZERS


def verbalizer_text(text: str, cfg: LanguageModelConfig) -> str:
    return normalize_unifiedqa(text) if cfg.normalize_input == "unifiedqa" else text


@dataclass
class PromptSettings:
    """How one benchmark split is put to a language model (resolved from its recipe entry)."""

    prompt: str | None = None
    verbalizer: dict[str, str] | None = None
    shots: int | str = 0  # a number drawn, or "paper": the strategy's fixed demonstrations
    shots_split: str | None = None
    #: The fewest shots a prompt may drop to where ``shots`` do not fit (None: always ``shots``).
    min_shots: int | None = None
    strategy: str | None = None
    variant: str | None = None

    @classmethod
    def of(cls, entry) -> "PromptSettings":
        return cls(
            prompt=getattr(entry, "prompt", None),
            verbalizer=getattr(entry, "verbalizer", None),
            shots=getattr(entry, "shots", 0),
            shots_split=getattr(entry, "shots_split", None),
            min_shots=getattr(entry, "min_shots", None),
            strategy=getattr(entry, "strategy", None),
            variant=getattr(entry, "variant", None),
        )

    @property
    def shots_to_fit(self) -> bool:
        """Whether prompts may drop shots to fit the model's context (``min_shots`` below ``shots``)."""
        return self.min_shots is not None and isinstance(self.shots, int) and self.min_shots < self.shots

    @property
    def shots_rule(self) -> tuple[int, int] | None:
        """(shots asked, fewest allowed) when prompts may drop shots to fit; None otherwise."""
        return (int(self.shots), int(self.min_shots)) if self.shots_to_fit and self.min_shots is not None else None

    def strategy_of(self, bench: Benchmark) -> Strategy | None:
        return get_strategy(bench.name, self.strategy) if self.strategy else None

    def generating_answer(self, bench: Benchmark) -> Answering | None:
        """The strategy's answering when it generates; None: the family's default (verbalizers, or greedy text)."""
        strategy = self.strategy_of(bench)
        return strategy.answer if strategy is not None and strategy.answer.generates else None

    def answer_mode(self, bench: Benchmark) -> AnswerMode:
        """How ``bench`` is answered under these settings (see :func:`answer_mode`)."""
        return answer_mode(bench, self.generating_answer(bench))


def answer_text(bench: Benchmark, example: Example, settings: PromptSettings, cfg: LanguageModelConfig) -> str:
    """The gold answer as the model should produce it: the label's verbalizer, or the answer text."""
    if bench.generative:
        return target_text(example, cfg)
    verbalizer = settings.verbalizer or bench.verbalizer()
    # Resolving the recipe filled the entry's verbalizer, or refused a label benchmark without one
    # (negtrain.benchmarks.matrix).
    assert verbalizer is not None
    return verbalizer_text(verbalizer[example.label], cfg)


def zero_shot_text(bench: Benchmark, example: Example, settings: PromptSettings, cfg: LanguageModelConfig) -> str:
    strategy = settings.strategy_of(bench)
    if strategy is None:
        return prompt_text(bench, example, cfg, settings.prompt)
    return strategy.render(bench.prompt_fields(example))


def prompts_with_shots(
    bench: Benchmark, split: str, examples: Sequence[Example], settings: PromptSettings, cfg: LanguageModelConfig, seed: int
) -> tuple[list[Prompt], list[list[str]] | None]:
    """Each example's prompt (its solved examples first when ``settings.shots``: drawn, or the
    strategy's fixed demonstrations for ``paper``); and the shots' ids per example (None without
    shots; ``paper:<n>`` for the paper's n-th demonstration)."""
    strategy = settings.strategy_of(bench)
    if settings.shots == "paper":
        assert strategy is not None, "shots: paper needs a strategy (checked when the recipe is resolved)"
        prompts = [strategy.paper_prompt(bench.prompt_fields(e), e.subset) for e in examples]
        ids = [[f"paper:{d}" for d in _demo_names(strategy, e.subset)] for e in examples]
        return prompts, ids
    queries = [zero_shot_text(bench, e, settings, cfg) for e in examples]
    if not settings.shots:
        return [Prompt(query=q) for q in queries], None
    shots_split = settings.shots_split or bench.default_shots_split(split)
    pool = bench.load(shots_split)
    drawn = draw_shots(examples, pool, int(settings.shots), seed, f"{bench.name}/{split}: shots",
                       fixed=shots_split in bench.fixed_shot_splits)
    def shown(example: Example) -> str:
        answer = answer_text(bench, example, settings, cfg)
        return strategy.shown_answer(answer) if strategy is not None else answer

    solved = {j: (zero_shot_text(bench, pool[j], settings, cfg), shown(pool[j])) for picks in drawn for j in picks}
    prompts = [Prompt(query=q, shots=tuple(solved[j] for j in picks), separator=SHOT_SEPARATOR, before_query=SHOT_SEPARATOR)
               for picks, q in zip(drawn, queries, strict=False)]
    return prompts, [[pool[j].id for j in picks] for picks in drawn]


def _demo_names(strategy: Strategy, subset: str | None) -> list[str]:
    f = strategy.fewshot
    assert f is not None
    if f.demonstrations_for:
        assert subset is not None  # demonstrations chosen per subset: the benchmark's examples each name one
        chosen = f.demonstrations_for[subset]
        return [f"{chosen}/{i + 1}" for i in range(len(f.demonstration_sets[chosen]))]
    return [str(i + 1) for i in range(len(f.demonstrations))]


def answer_outcome(bench: Benchmark, example: Example, answer: str | None, completions: bool,
                   labels: Sequence[str]) -> tuple[int, str | None]:
    """What the metric is given for one response, from the ``answer`` its rule read (None: no rule
    could), and the text kept as the prediction (a free-text answer or a completion, else None)."""
    if answer is None:  # no rule could read it: wrong, and counted (n_unparsed)
        return UNPARSED, None
    if completions:  # written for people to judge: the text is the prediction
        return 1, answer
    if bench.generative:
        return int(bench.is_correct(answer, example)), answer
    return labels.index(answer), None


#: A causal LM's answer ends at the first newline: past it, it starts another question or turn.
STOP_STRINGS = ("\n",)


def causal_answering(cfg: LanguageModelConfig) -> Answering:
    """A causal LM's default for a free-text benchmark (in process or served): greedy up to
    ``model.max_new_tokens``, the answer its first line."""
    # Stop rule: EOS, a newline, or max_new_tokens. A row that ran past its newline while the
    # batch went on is cut there, so batching never changes an answer.
    return Answering(method="generate", rule="first_line", max_new_tokens=cfg.max_new_tokens, stop=STOP_STRINGS)
