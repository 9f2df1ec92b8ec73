"""The scoring matrix: which model family scores which benchmark, and the resolution of a recipe's
benchmark lists against it.

The matrix is derived, not tabulated: a family scores a benchmark when its settings section
declares the benchmark's answer kind (``answer_kinds`` in negtrain/config/model.py) and the
benchmark does not refuse it (``Benchmark.refuses``, the one place a benchmark says no, with the
reason); the benchmark modules add how each family scores them, default prompts and verbalizers. :func:`resolve_benchmarks` runs before
any data file or model is loaded: it expands ``data.eval: all``, rejects an unsupported
(family, benchmark) pair with the reason, and fills each entry's prompt and verbalizer, so the
run's ``recipe.yaml`` records exactly what was scored.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from negtrain.benchmarks.base import AnswerKind, Benchmark
from negtrain.benchmarks.files import resolve
from negtrain.benchmarks.registry import BENCHMARKS, get_benchmark
from negtrain.config import FAMILY_SECTIONS, EvalConfig, LanguageModelConfig, families, families_where
from negtrain.core.errors import ConfigError, NegtrainError, did_you_mean
from negtrain.benchmarks.row_filters import check_select
from negtrain.prompts.strategies import Strategy, get_strategy, not_reproducible, strategies


def lm_families() -> list[str]:
    """Families that read a benchmark through a prompt (declared by each family's settings section)."""
    return families_where("reads_prompts")


def check_answer_kinds(family: str) -> None:
    """A family's ``answer_kinds`` are answer kinds: a misspelt one would silently score nothing
    (a family registered at run time is checked here, the first time the matrix asks it)."""
    known = [kind.value for kind in AnswerKind]
    for kind in FAMILY_SECTIONS[family].answer_kinds:
        if kind not in known:
            raise ConfigError(f"model family '{family}' declares answer kind '{kind}'{did_you_mean(kind, known)}; "
                              f"the kinds are {', '.join(known)}")


def unsupported_reason(bench: Benchmark, family: str) -> str | None:
    """None when ``family`` can score ``bench``, else why not: the benchmark's refusal, else the
    family's own reason for not scoring the benchmark's answer kind."""
    section = FAMILY_SECTIONS.get(family)
    if section is None:
        return f"no scoring rule for the '{family}' family"
    check_answer_kinds(family)
    if family in bench.refuses:
        return bench.refuses[family]
    if bench.scored_kind.value not in section.answer_kinds:
        return section.cannot_score or f"the '{family}' family does not score {bench.scored_kind} answers"
    return None


def how_scored(bench: Benchmark, family: str) -> str:
    """How a family that can score ``bench`` scores it, in words for the listing."""
    return bench.how_scored.get(family, f"{bench.scored_kind} answers, as the '{family}' family predicts them")


def check_supported(bench: Benchmark, family: str, where: str) -> None:
    reason = unsupported_reason(bench, family)
    if reason is not None:
        raise ConfigError(f"{where}: the '{family}' family cannot score benchmark '{bench.name}': {reason}")


def unreadable_reason(bench: Benchmark, split: str) -> str | None:
    """None when every file of the split can be found (or fetched), else why not."""
    try:
        for file in bench.files(split):
            resolve(file)
    except NegtrainError as exc:
        return str(exc).splitlines()[0]
    except OSError as exc:  # a failed download
        return f"{type(exc).__name__}: {exc}"[:300]
    return None


@dataclass(frozen=True)
class Skipped:
    benchmark: str
    split: str
    reason: str


def scorable(family: str, names: Sequence[str] | None = None, trained: Mapping[str, Sequence[str]] | None = None) -> list[tuple[str, str]]:
    """(benchmark, split) for every benchmark ``family`` can score (or those of ``names``), on
    the benchmark's evaluation splits (its test split, MNLI's two validation splits; NegNLI's
    ``all``), or, for a benchmark the run trained on (``trained``: benchmark -> its training
    splits), the split held out from that training split (NegNLI ``train`` -> ``test``)."""
    out: list[tuple[str, str]] = []
    for name in names if names is not None else BENCHMARKS:
        bench = get_benchmark(name)
        if unsupported_reason(bench, family) is None:
            held = [bench.held_out_splits[s] for s in (trained or {}).get(name, ()) if s in bench.held_out_splits]
            out.extend((name, split) for split in (held[:1] or bench.eval_splits))
    return out


def trained_splits(sources: Sequence[Any]) -> dict[str, list[str]]:
    """benchmark -> the splits a run's ``data.train`` sources (typed entries or their mappings) train on."""
    out: dict[str, list[str]] = {}
    for s in sources:
        name, split = (s.get("benchmark"), s.get("split")) if isinstance(s, Mapping) else (getattr(s, "benchmark", None), getattr(s, "split", None))
        if isinstance(name, str) and isinstance(split, str):
            out.setdefault(name, []).append(split)
    return out


def _placeholders(template: str) -> set[str]:
    try:
        return {f.split(".")[0].split("[")[0] for _, f, _, _ in string.Formatter().parse(template) if f is not None}
    except ValueError as exc:
        raise ConfigError(f"malformed template ({exc})") from exc


def check_prompt(bench: Benchmark, template: str, where: str) -> None:
    try:
        names = _placeholders(template)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from exc
    unknown = sorted(n for n in names if n not in bench.input_names)
    if unknown or "" in names:
        shown = unknown[0] if unknown else ""
        raise ConfigError(
            f"{where}: placeholder '{{{shown}}}' is not an input of benchmark '{bench.name}' "
            f"(its inputs: {', '.join('{' + n + '}' for n in bench.input_names)})"
        )


def check_verbalizer(bench: Benchmark, verbalizer: Mapping[str, str], where: str) -> None:
    """Every label has a non-empty text, no other key is given, and no two labels share a text
    (two identical continuations always score the same, so the tie would decide)."""
    for key in verbalizer:
        if key not in bench.labels:
            raise ConfigError(f"{where}: '{key}' is not a label of '{bench.name}'{did_you_mean(key, bench.labels)}")
    missing = [label for label in bench.labels if label not in verbalizer]
    if missing:
        raise ConfigError(f"{where}: no text for label(s) {missing} of '{bench.name}' (every label needs one)")
    seen: dict[str, str] = {}
    for label in bench.labels:
        text = verbalizer[label]
        if not isinstance(text, str) or not text.strip():
            raise ConfigError(f"{where}: the text of label '{label}' is empty")
        key = text.strip()
        if key in seen:
            raise ConfigError(
                f"{where}: labels '{seen[key]}' and '{label}' have the same verbalizer {key!r}, so they "
                "cannot be told apart"
            )
        seen[key] = label


def _resolve_strategy(entry, bench: Benchmark, where: str, chat: bool) -> Strategy:
    """An eval entry's ``strategy``, checked against the benchmark and the entry."""
    if entry.prompt is not None:
        raise ConfigError(f"{where}: give a strategy or a prompt, not both")
    strategy = get_strategy(bench.name, entry.strategy)
    check_prompt(bench, strategy.template, f"{where}.strategy {strategy.name}")
    if strategy.chat == "required" and not chat:
        raise ConfigError(f"{where}: strategy {bench.name}/{strategy.name} is for chat models ({strategy.source}); add --chat (model.chat: true)")
    for word, label in strategy.answer.answers.items():
        if label not in bench.labels:
            raise ConfigError(f"{where}: strategy {strategy.name} answers {word!r} as '{label}', not a label of '{bench.name}'")
    if entry.shots == "paper" and strategy.fewshot is None:
        raise ConfigError(f"{where}: strategy {bench.name}/{strategy.name} has no fixed demonstrations, so shots: paper does not apply; give a number")
    return strategy


def _resolve_entry(entry, family: str, model_prompt: str | None, where: str, eval_entry: bool, chat: bool = False) -> None:
    bench = get_benchmark(entry.benchmark)
    bench.check_split(entry.split)
    if not eval_entry and getattr(entry, "select", None) is not None:
        check_select(bench, entry.select, where)
    if FAMILY_SECTIONS[family].trains_objective and not eval_entry:
        # The mlm family's objectives read training benchmarks as text (the cue-masking corpus,
        # negated-LAMA probes); its builder checks them. The matrix is about scoring.
        return
    check_supported(bench, family, where)
    if not eval_entry and bench.scored_kind.builds_own_context:  # choices, a blank, an open-vocabulary [MASK]
        raise ConfigError(f"{where}: {bench.name}/{entry.split} is an evaluation probe; a {family} model cannot train on it")
    settings = ["prompt", "verbalizer"] + (["shots", "min_shots", "shots_split", "strategy"] if eval_entry else [])
    if not FAMILY_SECTIONS[family].reads_prompts:
        given = [s for s in settings if getattr(entry, s) not in (None, 0)]
        if given:
            raise ConfigError(f"{where}: {', '.join(given)} apply to the {' and '.join(lm_families())} families, not '{family}'")
        return
    strategy: Strategy | None  # the entry's, resolved below (None: it names none)
    if bench.answer_type is AnswerKind.CHOICE and eval_entry and entry.strategy is not None and strategies(bench.name):
        # A multiple-choice benchmark with strategies of its own (ScoNe-NLG): the strategy's prompt
        # is the context, its demonstrations the shots (paper), and it is answered by its choices'
        # log-likelihood or, generating, by completions written for people to judge.
        given = [s for s in ("prompt", "verbalizer", "shots_split") if getattr(entry, s) is not None]
        if given or entry.shots not in (0, "paper"):
            raise ConfigError(f"{where}: a strategy of '{bench.name}' takes shots 0 or paper and no {', '.join(given) or 'drawn shots'}")
        strategy = get_strategy(bench.name, entry.strategy)
        if entry.shots == "paper" and strategy.fewshot is None:
            raise ConfigError(f"{where}: strategy {bench.name}/{strategy.name} has no fixed demonstrations, so shots: paper does not apply")
        return
    if bench.answer_type.builds_own_context:
        # Multiple choice (NeQA) and cloze probes (negated LAMA) build their own context from
        # the example; a prompt, verbalizer or shots would not be read, so they are refused.
        given = [s for s in settings if getattr(entry, s) not in (None, 0)]
        if given:
            raise ConfigError(f"{where}: {', '.join(given)} do not apply to '{bench.name}': it builds its own context per example")
        return
    strategy = None
    if eval_entry and entry.strategy is not None:
        strategy = _resolve_strategy(entry, bench, where, chat)
    else:
        if eval_entry and entry.shots == "paper":
            raise ConfigError(f"{where}: shots: paper uses a strategy's fixed demonstrations; name a strategy")
        prompt = entry.prompt or model_prompt or bench.prompt_for(family)
        if prompt is None:
            raise ConfigError(f"{where}: benchmark '{bench.name}' has no default prompt for '{family}'; set a prompt")
        check_prompt(bench, prompt, f"{where}.prompt" if entry.prompt else "model.prompt" if model_prompt else where)
        entry.prompt = prompt
    if bench.generative:
        if entry.verbalizer is not None:
            raise ConfigError(f"{where}.verbalizer: '{bench.name}' has free-text answers, so no verbalizer")
    else:
        fallback = strategy.verbalizer if strategy is not None and strategy.verbalizer is not None else bench.verbalizer()
        verbalizer = entry.verbalizer if entry.verbalizer is not None else fallback
        if verbalizer is None:
            raise ConfigError(f"{where}: benchmark '{bench.name}' has no default verbalizer; set one")
        check_verbalizer(bench, verbalizer, f"{where}.verbalizer")
        entry.verbalizer = dict(verbalizer)
    if eval_entry and isinstance(entry.shots, int) and entry.shots:
        shots_split = entry.shots_split or bench.default_shots_split(entry.split)
        bench.check_split(shots_split)
        entry.shots_split = shots_split


def _expand_all(family: str, field: str, trained: Mapping[str, Sequence[str]]) -> tuple[list, list[Skipped]]:
    entries, skipped = [], []
    for name, split in scorable(family, trained=trained):
        reason = unreadable_reason(get_benchmark(name), split)
        if reason is None:
            entries.append(EvalConfig(benchmark=name, split=split))
        else:
            skipped.append(Skipped(name, split, reason))
    if not entries:
        why = f" ({skipped[0].reason.split('; data file', 1)[0]})" if skipped and skipped[0].reason.startswith("NEGTRAIN_DATA_DIR:") else ""
        raise ConfigError(f"{field}: all: no benchmark the '{family}' family can score could be read{why}")
    return entries, skipped


def resolve_benchmarks(recipe, announce: bool = True, trained: Mapping[str, Sequence[str]] | None = None) -> list[Skipped]:
    """Expand ``all``, check every (family, benchmark) pair and fill prompts and verbalizers, in
    place on ``recipe``. Returns the benchmarks ``all`` skipped (printed when ``announce``).
    ``all`` scores a benchmark the recipe trains on (or ``trained`` names: a report card's run) on
    the split held out from its training split (:func:`scorable`)."""
    family = recipe.model.family
    lm = recipe.model if isinstance(recipe.model, LanguageModelConfig) else None
    model_prompt, chat = (lm.prompt, lm.chat) if lm is not None else (None, False)
    data = recipe.data
    skipped: list[Skipped] = []
    for field in ("eval", "test"):
        value = getattr(data, field)
        if value == "all":
            entries, lost = _expand_all(family, f"data.{field}", {**trained_splits(data.train), **(trained or {})})
            skipped += lost
            setattr(data, field, entries)
    for i, source in enumerate(data.train):
        _resolve_entry(source, family, model_prompt, f"data.train[{i}]", eval_entry=False)
    for field in ("eval", "test"):
        for i, entry in enumerate(getattr(data, field) or []):
            _resolve_entry(entry, family, model_prompt, f"data.{field}[{i}]", eval_entry=True, chat=chat)
    if announce:
        for s in skipped:
            print(f"all: skipping {s.benchmark}/{s.split}: {s.reason}", flush=True)
    return skipped


# ---- listing ---------------------------------------------------------------------------------


def matrix() -> list[dict]:
    """Per benchmark: per family, how it is scored or why not; the LM defaults."""
    rows = []
    for name in BENCHMARKS:
        bench = get_benchmark(name)
        rows.append(
            {
                "benchmark": name,
                "eval_splits": list(bench.eval_splits),
                "families": {
                    f: {"supported": unsupported_reason(bench, f) is None, "how": unsupported_reason(bench, f) or how_scored(bench, f)}
                    for f in families()
                },
                "prompts": {f: bench.prompt_for(f) for f in lm_families() if unsupported_reason(bench, f) is None and not bench.answer_type.builds_own_context},
                "verbalizer": bench.verbalizer() if bench.answer_type is AnswerKind.LABEL else None,
                "strategies": {n: strategy_line(st) for n, st in strategies(name).items()},
                "not_reproducible": {n: f"{nr.source}: {nr.why}" for n, nr in not_reproducible(name).items()},
            }
        )
    return rows


def strategy_line(strategy) -> str:
    """One line saying how a strategy is answered and where it comes from."""
    a = strategy.answer
    scored = "the choices' log-likelihood" if get_benchmark(strategy.benchmark).answer_type is AnswerKind.CHOICE else "verbalizer log-likelihood"
    how = f"generate ({a.rule}, {a.max_new_tokens} tokens)" if a.generates else scored
    shots = f", paper shots: {strategy.fewshot.count}" if strategy.fewshot is not None else ""
    chat = ", chat models" if strategy.chat == "required" else ""
    return f"{how}{shots}{chat}; {strategy.paper}: {strategy.source}"
