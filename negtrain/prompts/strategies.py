"""Prompt strategies: how a benchmark example is put to a language model, as a paper defines it.

A strategy file ``negtrain/prompts/<benchmark>.yaml`` holds ``defaults`` and ``strategies``; each
strategy has

- ``template``: the zero-shot prompt, the benchmark's input names as placeholders
  (``{premise}``), and ``transforms`` per input (``capitalize_first``, ``lower_first``,
  ``no_final_period``, ``unifiedqa``, or a named transform of the file), applied in order before
  the input is put in, to the zero-shot prompt, the paper's few-shot query and drawn shots alike;
- ``fewshot`` (optional): the paper's fixed demonstrations, each ``[question, answer]`` verbatim,
  joined by ``answer_join`` (default one space); ``template`` for the scored example after them,
  ``prefix`` before the first, ``separator`` between them and ``before_query`` before the scored
  example; or ``demonstration_sets`` chosen per example by its subset (``demonstrations_for``),
  with ``chosen_by_negtrain`` naming the subsets whose set is negtrain's choice (the paper prints
  sets for other subsets only; protocol.md marks such rows with †);
- ``answer``: ``method: loglik`` (the highest verbalizer log-likelihood wins) or ``method:
  generate`` (greedy generation read by ``rule``, see :mod:`negtrain.prompts.answers`, into one
  of ``answers``: answer word -> label), with ``max_new_tokens`` and ``stop`` strings;
- ``verbalizer``: label -> text, the texts log-likelihood scores, and the answers shown after
  drawn shots (``--shots K``);
- ``shot_answer``: how a drawn shot's gold answer is shown (``"So the answer is {answer}."``,
  where the answer rule reads that form); default the answer alone;
- ``chat: required`` when the strategy is only meant for chat-formatted models;
- ``source``: the paper's table or section.

A file may also name transforms under ``named_transforms``: a name for a sequence of the transforms
above (``steps``) and the ``source`` it is read from (which of the paper's demonstrations show the
dataset's rows put in that way), so a rule the paper applies to every row is written once and its
strategies name it.

A prompt the paper shows but does not give as text (a figure printed as an image; explanations
never released) is declared under ``not_reproducible``: its ``source``, ``why`` and the ``nearest``
strategy of the file. Asking for it by name is an error saying so (:class:`NotReproducible`), never
a guess at its text.

Adding a strategy is one entry in one file. Loading checks every key (with "did you mean"). A
plugin's strategies are a file of its own in the same form, added with :func:`register_strategies`.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from negtrain.core.errors import ConfigError, did_you_mean, unknown_name
from negtrain.prompts.answers import answer_rule, first_label_word
from negtrain.prompts.strategy_files import ADDED_STRATEGY_FILES, files_of, strategy_files


def normalize_unifiedqa(text: str) -> str:
    """UnifiedQA(-v2)'s input normalisation: lower-case, tabs/newlines to spaces, single spaces."""
    return re.sub(r"\s+", " ", str(text).replace("\t", " ").replace("\n", " ")).strip().lower()


def _capitalize_first(text: str) -> str:
    return text[:1].upper() + text[1:]


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def _no_final_period(text: str) -> str:
    return text.rstrip().rstrip(".").rstrip()


TRANSFORMS = {
    "capitalize_first": _capitalize_first,
    "lower_first": _lower_first,
    "no_final_period": _no_final_period,
    "unifiedqa": normalize_unifiedqa,
}


@dataclass(frozen=True)
class NamedTransform:
    """A strategy file's name for a sequence of :data:`TRANSFORMS`, with where the paper shows it."""

    name: str
    steps: tuple[str, ...]
    source: str

    def __call__(self, text: str) -> str:
        for step in self.steps:
            text = TRANSFORMS[step](text)
        return text


@dataclass(frozen=True)
class Prompt:
    """One example's prompt: solved demonstrations (question, answer) before the query.

    ``text`` is the prompt as one string; a chat model gets it as one user turn, or the
    demonstrations as alternating user/assistant turns (:meth:`messages`)."""

    query: str
    shots: tuple[tuple[str, str], ...] = ()
    prefix: str = ""
    separator: str = "\n\n"
    before_query: str = "\n\n"
    answer_join: str = " "

    def text(self) -> str:
        if not self.shots:
            return self.prefix + self.query
        solved = self.separator.join(q + self.answer_join + a for q, a in self.shots)
        return self.prefix + solved + self.before_query + self.query

    def messages(self, system: str | None = None, multiturn: bool = False) -> list[dict[str, str]]:
        # An empty system message is one too (--system ''): a template adds its own default only
        # where the conversation has none.
        out = [{"role": "system", "content": system}] if system is not None else []
        if not multiturn or not self.shots:
            return out + [{"role": "user", "content": self.text()}]
        for i, (q, a) in enumerate(self.shots):
            out += [{"role": "user", "content": (self.prefix if i == 0 else "") + q}, {"role": "assistant", "content": a}]
        return out + [{"role": "user", "content": self.query}]


@dataclass(frozen=True)
class Answering:
    """How a strategy's prompt is answered."""

    method: str = "loglik"  # "loglik" or "generate"
    rule: str | None = None
    answers: Mapping[str, str] = field(default_factory=dict)  # answer word -> label (label benchmarks)
    max_new_tokens: int = 16
    stop: tuple[str, ...] = ()

    @property
    def generates(self) -> bool:
        return self.method == "generate"

    def read(self, response: str) -> str | None:
        """The label (label benchmark) or answer text (free-text benchmark) the rule reads in
        ``response``; None: unparsed."""
        words = list(self.answers)
        if self.rule is None:  # the whole response is the answer (a seq2seq model's free text)
            found = first_label_word(response, words) if words else response.strip()
        else:
            found = answer_rule(self.rule)(response, words)
        if found is None or not self.answers:
            return found
        lowered = {w.lower(): label for w, label in self.answers.items()}
        return lowered.get(found.lower())


@dataclass(frozen=True)
class FewShot:
    template: str
    demonstrations: tuple[tuple[str, str], ...] = ()
    demonstration_sets: Mapping[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    demonstrations_for: Mapping[str, str] = field(default_factory=dict)
    prefix: str = ""
    separator: str = "\n\n"
    before_query: str = "\n\n"
    answer_join: str = " "
    #: The subsets whose demonstrations are negtrain's choice, not the paper's (it prints sets for
    #: other conditions only); protocol.md marks a row that shows them with †.
    chosen_by_negtrain: tuple[str, ...] = ()

    def for_subset(self, subset: str | None, where: str) -> tuple[tuple[str, str], ...]:
        if not self.demonstrations_for:
            return self.demonstrations
        if subset not in self.demonstrations_for:
            raise ConfigError(f"{where}: no demonstrations for examples of subset {subset!r} (demonstrations_for names {sorted(self.demonstrations_for)})")
        assert subset is not None  # a key of demonstrations_for (checked above)
        return self.demonstration_sets[self.demonstrations_for[subset]]

    @property
    def count(self) -> int:
        sets = list(self.demonstration_sets.values())
        return len(sets[0]) if sets else len(self.demonstrations)


@dataclass(frozen=True)
class Strategy:
    benchmark: str
    name: str
    template: str
    source: str
    paper: str
    answer: Answering
    transforms: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    verbalizer: Mapping[str, str] | None = None
    fewshot: FewShot | None = None
    chat: str = "optional"  # or "required"
    #: The file's named transforms that ``transforms`` may name besides :data:`TRANSFORMS`.
    named_transforms: Mapping[str, NamedTransform] = field(default_factory=dict)
    #: How a drawn shot's gold answer is shown after its prompt (``{answer}`` placeholder), e.g.
    #: "So the answer is {answer}." where the answer rule reads that form; None: the answer alone.
    shot_answer: str | None = None

    def shown_answer(self, answer: str) -> str:
        """A drawn shot's gold answer as the strategy shows it (:attr:`shot_answer`)."""
        return self.shot_answer.format(answer=answer) if self.shot_answer else answer

    @property
    def where(self) -> str:
        return f"strategy {self.benchmark}/{self.name}"

    def fields(self, fields: Mapping[str, str]) -> dict[str, str]:
        out = dict(fields)
        for name, names in self.transforms.items():
            for t in names:
                out[name] = (self.named_transforms.get(t) or TRANSFORMS[t])(out[name])
        return out

    def render(self, fields: Mapping[str, str]) -> str:
        """The zero-shot prompt of an example with these inputs."""
        return self.template.format(**self.fields(fields))

    def paper_prompt(self, fields: Mapping[str, str], subset: str | None) -> Prompt:
        """The few-shot prompt with the paper's fixed demonstrations."""
        if self.fewshot is None:
            raise ConfigError(f"{self.where}: the paper gives no fixed demonstrations, so --shots paper does not apply; use --shots K")
        f = self.fewshot
        return Prompt(
            query=f.template.format(**self.fields(fields)), shots=f.for_subset(subset, self.where),
            prefix=f.prefix, separator=f.separator, before_query=f.before_query, answer_join=f.answer_join,
        )


STRATEGY_KEYS = ("template", "transforms", "verbalizer", "fewshot", "answer", "chat", "source", "shot_answer")
FEWSHOT_KEYS = ("template", "demonstrations", "demonstration_sets", "demonstrations_for", "prefix", "separator", "before_query", "answer_join",
                "chosen_by_negtrain")
ANSWER_KEYS = ("method", "rule", "answers", "max_new_tokens", "stop")
FILE_KEYS = ("benchmark", "paper", "named_transforms", "defaults", "strategies", "not_reproducible")
NOT_REPRODUCIBLE_KEYS = ("source", "why", "nearest")
NAMED_TRANSFORM_KEYS = ("steps", "source")


def _check_keys(mapping: Any, known: Sequence[str], where: str) -> dict:
    if not isinstance(mapping, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(mapping).__name__}")
    for key in mapping:
        if key not in known:
            raise ConfigError(f"{where}: unknown key '{key}'{did_you_mean(str(key), known)}; known: {', '.join(known)}")
    return mapping


def _pairs(items: Any, where: str) -> tuple[tuple[str, str], ...]:
    out = []
    for i, item in enumerate(items or []):
        if not (isinstance(item, list) and len(item) == 2 and all(isinstance(x, str) for x in item)):
            raise ConfigError(f"{where}[{i}]: a demonstration is [question, answer], two strings")
        out.append((item[0], item[1]))
    return tuple(out)


def _answering(raw: dict, where: str) -> Answering:
    _check_keys(raw, ANSWER_KEYS, where)
    method = raw.get("method", "loglik")
    if method not in ("loglik", "generate"):
        raise ConfigError(f"{where}.method: 'loglik' or 'generate', not {method!r}")
    rule = raw.get("rule")
    if rule is not None:
        answer_rule(rule)  # an unknown rule is an error at load time
    stop = raw.get("stop") or []
    if not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop):
        raise ConfigError(f"{where}.stop: a list of non-empty strings")
    limit = raw.get("max_new_tokens", 16)
    if not isinstance(limit, int) or limit < 1:
        raise ConfigError(f"{where}.max_new_tokens: a positive integer, not {limit!r}")
    return Answering(method, rule, {str(k): str(v) for k, v in (raw.get("answers") or {}).items()}, limit, tuple(stop))


def _named_transforms(raw: Any, path: str) -> dict[str, NamedTransform]:
    """The file's ``named_transforms``: each a sequence of known transforms and its source."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: named_transforms: expected a mapping, got {type(raw).__name__}")
    out = {}
    for name, entry in raw.items():
        where = f"{path}: named_transforms.{name}"
        if name in TRANSFORMS:
            raise ConfigError(f"{where}: '{name}' is already a transform; give the sequence another name")
        _check_keys(entry, NAMED_TRANSFORM_KEYS, where)
        steps = entry.get("steps")
        if not isinstance(steps, list) or not steps or not all(isinstance(t, str) for t in steps):
            raise ConfigError(f"{where}.steps: a non-empty list of transforms ({', '.join(TRANSFORMS)})")
        for t in steps:
            if t not in TRANSFORMS:
                raise ConfigError(f"{where}.steps: unknown transform '{t}'{did_you_mean(t, TRANSFORMS)}; known: {', '.join(TRANSFORMS)}")
        if not isinstance(entry.get("source"), str) or not entry["source"].strip():
            raise ConfigError(f"{where}: no source (which of the paper's demonstrations show the rule)")
        out[str(name)] = NamedTransform(str(name), tuple(steps), entry["source"])
    return out


@dataclass(frozen=True)
class NotReproducible:
    """A prompt of the paper that cannot be rebuilt from it (a figure printed as an image, texts
    never released): declared in the strategy file, so asking for it is a clear error, never a guess."""

    name: str
    source: str
    why: str
    nearest: str | None = None

    def error(self, benchmark: str) -> ConfigError:
        nearest = f"; the nearest strategy here is '{self.nearest}' (see evaluate --list)" if self.nearest else ""
        return ConfigError(f"strategy '{self.name}' of '{benchmark}' is not reproducible: {self.source}: {self.why}{nearest}")


def parse_not_reproducible(raw: Any, path: str, known: Mapping[str, Strategy]) -> dict[str, NotReproducible]:
    """The file's ``not_reproducible`` prompts: each a ``source``, ``why`` and the ``nearest`` strategy of the file."""
    out = {}
    for name, entry in (raw or {}).items():
        where = f"{path}: not_reproducible.{name}"
        _check_keys(entry, NOT_REPRODUCIBLE_KEYS, where)
        if name in known:
            raise ConfigError(f"{where}: '{name}' is also a strategy of the file")
        if not all(isinstance(entry.get(k), str) and entry[k].strip() for k in ("source", "why")):
            raise ConfigError(f"{where}: a source (the paper's figure or section) and why it cannot be reproduced")
        nearest = entry.get("nearest")
        if nearest is not None and nearest not in known:
            raise ConfigError(f"{where}.nearest: no strategy '{nearest}'{did_you_mean(str(nearest), known)}")
        out[str(name)] = NotReproducible(str(name), entry["source"], entry["why"], nearest)
    return out


def parse_strategies(raw: Any, path: str) -> dict[str, Strategy]:
    _check_keys(raw, FILE_KEYS, path)
    bench = raw.get("benchmark")
    named = _named_transforms(raw.get("named_transforms"), path)
    known_transforms = [*TRANSFORMS, *named]
    defaults = _check_keys(raw.get("defaults") or {}, ("answer", "verbalizer", "transforms"), f"{path}: defaults")
    out = {}
    for name, entry in (raw.get("strategies") or {}).items():
        where = f"{path}: strategies.{name}"
        _check_keys(entry, STRATEGY_KEYS, where)
        if not isinstance(entry.get("template"), str):
            raise ConfigError(f"{where}: no template")
        answer = _answering({**(defaults.get("answer") or {}), **(entry.get("answer") or {})}, f"{where}.answer")
        transforms = {**(defaults.get("transforms") or {}), **(entry.get("transforms") or {})}
        for field_name, names in transforms.items():
            for t in names:
                if t not in known_transforms:
                    raise ConfigError(f"{where}.transforms.{field_name}: unknown transform '{t}'{did_you_mean(t, known_transforms)}; known: {', '.join(known_transforms)}")
        fewshot = None
        if entry.get("fewshot") is not None:
            f = _check_keys(entry["fewshot"], FEWSHOT_KEYS, f"{where}.fewshot")
            sets = {k: _pairs(v, f"{where}.fewshot.demonstration_sets.{k}") for k, v in (f.get("demonstration_sets") or {}).items()}
            chosen = dict(f.get("demonstrations_for") or {})
            for subset, set_name in chosen.items():
                if set_name not in sets:
                    raise ConfigError(f"{where}.fewshot.demonstrations_for.{subset}: no demonstration set '{set_name}'{did_you_mean(set_name, sets)}")
            own = f.get("chosen_by_negtrain") or []
            for subset in own:
                if subset not in chosen:
                    raise ConfigError(f"{where}.fewshot.chosen_by_negtrain: '{subset}' is not a subset of demonstrations_for"
                                      f"{did_you_mean(str(subset), chosen)}")
            fewshot = FewShot(
                template=f["template"], demonstrations=_pairs(f.get("demonstrations"), f"{where}.fewshot.demonstrations"),
                demonstration_sets=sets, demonstrations_for=chosen, prefix=f.get("prefix", ""),
                separator=f.get("separator", "\n\n"), before_query=f.get("before_query", "\n\n"), answer_join=f.get("answer_join", " "),
                chosen_by_negtrain=tuple(own),
            )
        chat = entry.get("chat", "optional")
        if chat not in ("optional", "required"):
            raise ConfigError(f"{where}.chat: 'optional' or 'required', not {chat!r}")
        shot_answer = entry.get("shot_answer")
        if shot_answer is not None and (not isinstance(shot_answer, str) or "{answer}" not in shot_answer):
            raise ConfigError(f"{where}.shot_answer: a text with the placeholder {{answer}}, not {shot_answer!r}")
        out[name] = Strategy(
            benchmark=bench, name=name, template=entry["template"], source=str(entry.get("source", "")), paper=str(raw.get("paper", "")),
            answer=answer, transforms={k: tuple(v) for k, v in transforms.items()},
            verbalizer=entry.get("verbalizer", defaults.get("verbalizer")), fewshot=fewshot, chat=chat, shot_answer=shot_answer,
            named_transforms=named,
        )
    parse_not_reproducible(raw.get("not_reproducible"), path, out)  # checked with the strategies it names
    return out


@functools.lru_cache(maxsize=None)
def strategies(benchmark: str) -> dict[str, Strategy]:
    """The named strategies of ``benchmark`` (empty when it has no strategy file): the shipped
    file's, then those a plugin added."""
    found: dict[str, Strategy] = {}
    for raw, shown in files_of(benchmark):
        parsed = parse_strategies(raw, shown)
        clash = sorted(set(parsed) & set(found))
        if clash:
            raise ConfigError(f"{shown}: strategy {', '.join(map(repr, clash))} of '{benchmark}' ships with negtrain; give it another name")
        found.update(parsed)
    return found


@functools.lru_cache(maxsize=None)
def not_reproducible(benchmark: str) -> dict[str, NotReproducible]:
    """The prompts of ``benchmark``'s paper that its strategy files declare cannot be reproduced."""
    out: dict[str, NotReproducible] = {}
    for raw, shown in files_of(benchmark):
        out.update(parse_not_reproducible(raw.get("not_reproducible"), shown, strategies(benchmark)))
    return out


def register_strategies(path: str | os.PathLike[str]) -> str:
    """Add a strategy file kept outside the package (a plugin's), at run time, and return the
    benchmark it is for.

    The file is written like ``negtrain/prompts/<benchmark>.yaml`` (this module's docstring): its
    ``benchmark`` names a shipped or a registered benchmark, and its strategies join those negtrain
    ships for it; a strategy of a name negtrain already has for that benchmark is refused. It is
    read and checked now, so a mistake in it is found when the plugin loads.
    """
    file = Path(path)
    raw = yaml.safe_load(file.read_text(encoding="utf-8")) if file.is_file() else None
    if not isinstance(raw, dict) or not isinstance(raw.get("benchmark"), str):
        why = "no such file" if not file.is_file() else "it names no benchmark (benchmark: <name>)"
        raise ConfigError(f"register_strategies: {file}: {why}")
    benchmark = raw["benchmark"]
    if benchmark in ADDED_STRATEGY_FILES:
        raise ConfigError(f"register_strategies: '{benchmark}' already has added strategies "
                          f"({ADDED_STRATEGY_FILES.origin(benchmark) or ADDED_STRATEGY_FILES[benchmark]})")
    parse_strategies(raw, str(file))  # every key checked now, with "did you mean"
    ADDED_STRATEGY_FILES[benchmark] = file
    strategies.cache_clear()
    not_reproducible.cache_clear()
    try:
        strategies(benchmark)  # a clash with a shipped strategy's name: refused now, not at first use
    except ConfigError:
        del ADDED_STRATEGY_FILES[benchmark]
        strategies.cache_clear()
        not_reproducible.cache_clear()
        raise
    return benchmark


def unregister_strategies(benchmark: str) -> None:
    """Take the strategy file :func:`register_strategies` added for ``benchmark`` out again."""
    if benchmark not in ADDED_STRATEGY_FILES:
        raise ConfigError(f"unregister_strategies: no strategies were added for '{benchmark}'")
    del ADDED_STRATEGY_FILES[benchmark]
    strategies.cache_clear()
    not_reproducible.cache_clear()


#: Strategies renamed because their old name claimed what they are not: (benchmark, old) -> (new, why).
#: The old name is refused with the new one, never silently mapped: a result under the old name
#: would read as the paper's.
RENAMED = {
    ("condaqa", "cot"): ("cot_answer_only", "its shots carry no reasoning (the paper's explanations were never "
                         "released), so it is not the paper's chain of thought"),
}


def get_strategy(benchmark: str, name: str) -> Strategy:
    if (benchmark, name) in RENAMED:
        new, why = RENAMED[benchmark, name]
        raise ConfigError(f"strategy '{name}' of '{benchmark}' is now called '{new}': {why}")
    known = strategies(benchmark)
    if name in not_reproducible(benchmark):
        raise not_reproducible(benchmark)[name].error(benchmark)
    if not known:
        have = ", ".join(sorted({*strategy_files(), *ADDED_STRATEGY_FILES})) or "none"
        raise ConfigError(f"benchmark '{benchmark}' has no prompt strategies (strategy files exist for: {have}); give a literal prompt instead")
    if name not in known:
        raise unknown_name(f"strategy of '{benchmark}'", name, known)
    return known[name]
