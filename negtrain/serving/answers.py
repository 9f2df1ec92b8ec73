"""What a server's answer must hold before a number is taken from it: each endpoint's answer is
checked against the shape the OpenAI API gives it, and anything else is :class:`Malformed` (one
error naming the example and quoting the answer), never a traceback or a silently wrong score.

- ``choices``: a non-empty list of objects; the one answering the prompt is matched by its
  ``index`` (0), not taken by position. A lone choice without ``index`` is accepted.
- ``usage``: absent or null (counted as 0), or an object whose ``prompt_tokens`` and
  ``completion_tokens`` are absent, null or non-negative integers.
- a completion's ``text`` and a chat's ``message.content``: strings.
- a continuation's log-probability (``echo`` + ``logprobs``, :func:`continuation_logprob`):
  ``tokens`` (strings), ``token_logprobs`` (numbers or null) and ``text_offset`` (non-negative,
  non-decreasing integers) of one length; each log-probability summed finite and at most
  :data:`LOGPROB_SLACK` (a probability is at most 1; a server's float rounding may put a near-
  certain token a hair above 0); and the tokens taken as the continuation must spell it exactly.
"""

from __future__ import annotations

import math
from typing import Any

#: How far above 0 a log-probability may be and still be read (as given): float32 rounding of a
#: near-certain token's log-softmax gives values like +1e-7; anything larger is not a probability.
LOGPROB_SLACK = 1e-4


class Malformed(Exception):
    """The answer is not of the shape its endpoint promises (the message says what is wrong)."""


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def choice(out: Any) -> dict[str, Any]:
    """The choice answering the (one) prompt: the one whose ``index`` is 0."""
    if not isinstance(out, dict):
        raise Malformed("the answer is not a JSON object")
    choices = out.get("choices")
    if not isinstance(choices, list) or not choices:
        raise Malformed("the answer has no choices (a non-empty list)")
    if not all(isinstance(c, dict) for c in choices):
        raise Malformed("a choice is not an object")
    indexed = [c for c in choices if "index" in c]
    if not indexed:
        if len(choices) == 1:
            return choices[0]
        raise Malformed(f"{len(choices)} choices and none says its index")
    if len(indexed) != len(choices) or not all(_is_int(c["index"]) for c in choices):
        raise Malformed("a choice's index is missing or not an integer")
    first = [c for c in choices if c["index"] == 0]
    if len(first) != 1:
        raise Malformed(f"{len(first)} choices have index 0 (one was asked for)")
    return first[0]


def usage_counts(out: dict[str, Any]) -> tuple[int, int]:
    """(tokens_in, tokens_out): the tokens the server counted for the prompt and the answer."""
    counts = usage(out)
    return counts["tokens_in"], counts["tokens_out"]


def usage(out: dict[str, Any]) -> dict[str, int]:
    """The tokens the server counted: ``tokens_in``, ``tokens_out``, 0 where it did not say or
    said something that is no count (a string, a fraction, a negative number): usage only feeds
    the card's token counts, never a score, so an odd one is unknown, not an error."""
    given = out.get("usage")
    if not isinstance(given, dict):
        return {"tokens_in": 0, "tokens_out": 0}
    counts: dict[str, int] = {}
    for field, name in (("prompt_tokens", "tokens_in"), ("completion_tokens", "tokens_out")):
        value = given.get(field)
        counts[name] = value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
    return counts


def completion_text(out: Any) -> str:
    text = choice(out).get("text")
    if not isinstance(text, str):
        raise Malformed("the choice has no text")
    return text


def chat_text(out: Any) -> str:
    message = choice(out).get("message")
    if not isinstance(message, dict):
        raise Malformed("the choice has no message")
    content = message.get("content")
    if not isinstance(content, str):
        raise Malformed("the message has no text content (null, or a tool call)")
    return content


def continuation_logprob(out: Any, context: str, continuation: str) -> tuple[float, int, bool]:
    """The continuation's summed log-probability, its token count and whether each of its tokens
    was the greedy one, from the echoed prompt ``context + continuation``.

    The continuation's tokens are the ones from the token that starts where the continuation
    starts: found by ``text_offset`` counted in characters, or, failing that, in UTF-8 bytes (as
    some servers count), and accepted only when their texts, joined, are the continuation exactly.
    A token with empty text (a special token) is summed but not counted."""
    logprobs = choice(out).get("logprobs")
    if not isinstance(logprobs, dict) or not logprobs.get("token_logprobs") or not logprobs.get("text_offset"):
        raise Malformed("the server returned no prompt log-probabilities (echo + logprobs on /v1/completions)")
    tokens, values, offsets = logprobs.get("tokens"), logprobs["token_logprobs"], logprobs["text_offset"]
    tops = logprobs.get("top_logprobs")
    if not isinstance(tokens, list) or not isinstance(values, list) or not isinstance(offsets, list):
        raise Malformed("logprobs.tokens, token_logprobs and text_offset must be lists")
    if not len(tokens) == len(values) == len(offsets):
        raise Malformed(f"logprobs lists of different lengths (tokens {len(tokens)}, token_logprobs {len(values)}, text_offset {len(offsets)})")
    if tops is not None and (not isinstance(tops, list) or len(tops) != len(tokens)):
        raise Malformed("logprobs.top_logprobs is not a list as long as tokens")
    if not all(isinstance(t, str) for t in tokens):
        raise Malformed("a token is not a string")
    if not all(v is None or _is_number(v) for v in values):
        raise Malformed("a log-probability is neither a number nor null")
    if not all(_is_int(o) and o >= 0 for o in offsets):
        raise Malformed("a text_offset is not a non-negative integer")
    if any(b < a for a, b in zip(offsets, offsets[1:], strict=False)):
        raise Malformed("text_offset decreases")
    picked = _continuation_tokens(tokens, offsets, context, continuation)
    total = 0.0
    for i in picked:
        value = values[i]
        if value is None:
            raise Malformed("no log-probability for a continuation token")
        if not math.isfinite(value) or value > LOGPROB_SLACK:
            raise Malformed(f"the log-probability {value!r} of a continuation token is not a log-probability (finite, at most 0)")
        total += value
    greedy = True
    for i in picked:
        top = tops[i] if tops is not None else None
        if top is None:
            continue
        if not isinstance(top, dict) or not all(isinstance(k, str) and _is_number(v) for k, v in top.items()):
            raise Malformed("a top_logprobs entry is not an object of token: number")
        if not all(math.isfinite(v) for v in top.values()):
            raise Malformed("a top_logprobs value is not finite (NaN or an infinity)")
        if top:
            greedy = greedy and max(top, key=lambda token: top[token]) == tokens[i]
    return total, sum(1 for i in picked if tokens[i]), greedy


def _continuation_tokens(tokens: list[str], offsets: list[int], context: str, continuation: str) -> list[int]:
    """The indices of the continuation's tokens (see :func:`continuation_logprob`)."""
    spans = [(len(context), len(context) + len(continuation))]
    as_bytes = (len(context.encode("utf-8")), len(context.encode("utf-8")) + len(continuation.encode("utf-8")))
    if as_bytes != spans[0]:
        spans.append(as_bytes)
    for start, end in spans:
        picked = [i for i, o in enumerate(offsets) if start <= o < end]
        if picked and offsets[picked[0]] == start and "".join(tokens[i] for i in picked) == continuation:
            return picked
    start, end = spans[0]
    picked = [i for i, o in enumerate(offsets) if start <= o < end]
    if not picked or offsets[picked[0]] != start:
        raise Malformed(f"the server's tokens do not split where the continuation {continuation!r} begins")
    spelled = "".join(tokens[i] for i in picked)
    raise Malformed(f"the tokens taken as the continuation spell {spelled!r}, not {continuation!r} "
                    "(text_offset off, or counted in a unit negtrain does not know)")


def continuation_top(out: Any, context: str, continuation: str) -> tuple[str, float] | None:
    """The most probable token the server names at the continuation's first token (the entry of
    its ``top_logprobs`` with the highest value), or None where it names none. The answer is
    checked as :func:`continuation_logprob` checks it."""
    continuation_logprob(out, context, continuation)
    logprobs = choice(out)["logprobs"]
    first = _continuation_tokens(logprobs["tokens"], logprobs["text_offset"], context, continuation)[0]
    tops = logprobs.get("top_logprobs")
    top = tops[first] if isinstance(tops, list) else None
    if not isinstance(top, dict) or not top:
        return None
    best = max(top, key=lambda token: top[token])
    return best, float(top[best])


#: How far two reports of one distribution's most probable token may differ (nats): batching and
#: kernels change the last digits of a server's arithmetic, never a token's log-probability by this.
SAME_DISTRIBUTION = 1e-2


def next_token_top(out: Any) -> tuple[str, float] | None:
    """The most probable token the server names for the token it generated after an echoed prompt
    (``max_tokens: 1``: the last entry of the echoed log-probabilities), or None where it names none:
    the distribution after the whole prompt, as the server samples from it."""
    logprobs = choice(out).get("logprobs")
    tops = logprobs.get("top_logprobs") if isinstance(logprobs, dict) else None
    top = tops[-1] if isinstance(tops, list) and tops else None
    if not isinstance(top, dict) or not top:
        return None
    if not all(isinstance(k, str) and _is_number(v) and math.isfinite(v) for k, v in top.items()):
        raise Malformed("a top_logprobs entry is not an object of token: finite number")
    best = max(top, key=lambda token: top[token])
    return best, float(top[best])


def tops_contradiction(out: Any) -> str | None:
    """Where an echoed answer's ``top_logprobs`` contradict its own log-probabilities: a value that
    is not a finite number, or a token reported as more probable than the most probable token named
    at its position (which no distribution allows); None when they agree."""
    logprobs = choice(out).get("logprobs")
    if not isinstance(logprobs, dict):
        return None
    tokens, values, tops = logprobs.get("tokens"), logprobs.get("token_logprobs"), logprobs.get("top_logprobs")
    if not isinstance(tops, list) or not isinstance(values, list) or not isinstance(tokens, list):
        return None
    for token, value, top in zip(tokens, values, tops, strict=False):
        if not isinstance(top, dict) or not top:
            continue
        if not all(_is_number(v) and math.isfinite(v) for v in top.values()):
            return "a top_logprobs value that is not a finite number"
        if _is_number(value) and math.isfinite(value) and value > max(top.values()) + SAME_DISTRIBUTION:
            best = max(top, key=lambda t: top[t])
            return f"{token!r} at {value:.3f} is more probable than the most probable token named there, {best!r} at {top[best]:.3f}"
    return None


def constant_top(outs: list[Any]) -> str | None:
    """The one token the ``top_logprobs`` of every position of every answer name, where they name
    one only (a server that does not report the distribution at each position); else None."""
    named: set[str] = set()
    positions = 0
    for out in outs:
        logprobs = choice(out).get("logprobs")
        tops = logprobs.get("top_logprobs") if isinstance(logprobs, dict) else None
        for top in tops if isinstance(tops, list) else []:
            if isinstance(top, dict) and top:
                positions += 1
                named.add(max(top, key=lambda t: top[t]))
    return next(iter(named)) if len(named) == 1 and positions > 2 else None


def misaligned(tops: list[tuple[str, float] | None]) -> bool | None:
    """Whether echoed log-probabilities belong to another position than the token they are given
    for, from the most probable token reported at the first token of continuations of one context.

    Every continuation's first token is predicted by the same distribution, the one after the
    context, so a server that reports each token's log-probability where it belongs names the same
    most probable token, with the same value, for all of them. A server one position off (the
    value for token i read from the logits at position i, which predict token i + 1, as
    llama-cpp-python's does) reports the distribution after each continuation's first token, which
    differs between continuations. None: the server names no top tokens, and nothing is known."""
    if any(t is None for t in tops):
        return None
    known = [t for t in tops if t is not None]
    if not all(math.isfinite(t[1]) for t in known):  # NaN agrees with nothing, itself included
        return True
    first = known[0]
    return any(t[0] != first[0] or abs(t[1] - first[1]) > SAME_DISTRIBUTION for t in known[1:])
