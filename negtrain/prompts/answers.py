"""Answer rules: how a generated response becomes an answer.

A rule takes the response text and the answer words a strategy accepts and returns the answer it
reads (one of those words, or for a free-text benchmark the answer text), or None when it cannot
read one. A response no rule can read is *unparsed*: scored as wrong and counted in
``n_unparsed``, never dropped. Rules are named in the strategy files (``negtrain/prompts/*.yaml``):
``contains_yes``, ``first_label_word``, ``so_the_answer_is``, ``first_line`` and
``regex:<pattern>``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from negtrain.core.errors import ConfigError, did_you_mean

Rule = Callable[[str, Sequence[str]], "str | None"]


def contains_yes(response: str, words: Sequence[str] = ()) -> str:
    """ScoNe's rule (She et al. 2023, §3 and Appendix D): "yes" if the response contains the
    letters ``yes`` in any case anywhere, else "no". Never unparsed.

    The paper's rule is a substring test, so "yesterday" reads as yes and "Yes." and "YES" do too;
    that is kept on purpose, so numbers compare with the paper's."""
    return "yes" if "yes" in response.lower() else "no"


def first_label_word(response: str, words: Sequence[str]) -> str | None:
    """The first of ``words`` (as a whole word, any case) to occur in the response; None when none
    occurs. Where two words start at the same place the longer wins ("not entailment" over "not")."""
    best: tuple[int, int, str] | None = None
    for word in words:
        m = re.search(rf"(?<!\w){re.escape(word)}(?!\w)", response, re.IGNORECASE)
        if m and (best is None or (m.start(), -len(word)) < (best[0], best[1])):
            best = (m.start(), -len(word), word)
    return None if best is None else best[2]


#: CondaQA's chain-of-thought answer markers (Ravichander et al. 2022, Appendix C.2): the answer
#: follows "So the answer is"; FLAN-T5 sometimes writes "(final) answer is" or "(final) answer:".
#: A colon after "is" ("So the answer is: yes") belongs to the marker, not to the answer.
_ANSWER_MARKER = re.compile(r"(?:so the answer is|(?:final )?answer is|(?:final )?answer(?=\s*:))(?:\s*:)?\s*", re.IGNORECASE)


def so_the_answer_is(response: str, words: Sequence[str] = ()) -> str | None:
    """The text after the last "So the answer is" / "(final) answer is" / "(final) answer:" up to
    the end of its sentence (a period, newline or end), without quotes; None when no marker is found
    or nothing follows it. With ``words`` (a label benchmark), the first of them in that text."""
    matches = list(_ANSWER_MARKER.finditer(response))
    if not matches:
        return None
    tail = response[matches[-1].end():]
    answer = re.split(r"\n|\.(?:\s|$)", tail, maxsplit=1)[0].strip().strip("\"'“”").rstrip(".").strip()
    if not answer:
        return None
    return first_label_word(answer, words) if words else answer


def first_line(response: str, words: Sequence[str] = ()) -> str | None:
    """The response's first line, stripped (a causal LM's free-text answer); with ``words``, the
    first of them in it. An empty first line reads as nothing (None: unparsed), not as the answer ""."""
    line = response.split("\n", 1)[0].strip()
    if words:
        return first_label_word(line, words)
    return line or None


def regex_rule(pattern: str) -> Rule:
    """``regex:<pattern>``: the first match's group 1 (or the whole match), stripped; with
    ``words``, it must be one of them (any case)."""
    try:
        compiled = re.compile(pattern, re.IGNORECASE | re.DOTALL)
    except re.error as exc:
        raise ConfigError(f"answer rule regex:{pattern}: not a regular expression ({exc})") from exc

    def rule(response: str, words: Sequence[str] = ()) -> str | None:
        m = compiled.search(response)
        if m is None:
            return None
        text = (m.group(1) if compiled.groups else m.group(0)) or ""
        text = text.strip()
        if not words:
            return text or None
        lowered = {w.lower(): w for w in words}
        return lowered.get(text.lower())

    return rule


RULES: dict[str, Rule] = {
    "contains_yes": contains_yes,
    "first_label_word": first_label_word,
    "so_the_answer_is": so_the_answer_is,
    "first_line": first_line,
}


def answer_rule(name: str) -> Rule:
    """The rule called ``name`` (``regex:<pattern>`` compiles its pattern)."""
    if name.startswith("regex:"):
        return regex_rule(name[len("regex:"):])
    if name not in RULES:
        raise ConfigError(
            f"unknown answer rule '{name}'{did_you_mean(name, RULES)}; known: {', '.join(RULES)}, regex:<pattern>"
        )
    return RULES[name]
