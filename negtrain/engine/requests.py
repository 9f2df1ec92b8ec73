"""The requests an evaluation puts to a model, whatever runs it (lm-evaluation-harness's request
types, plus the one a cloze probe needs).

- :class:`Generation`: a prompt (text, or chat messages when chat formatting is asked), a token
  limit and stop strings; greedy. The answer is the generated text.
- :class:`Loglikelihood`: a context (text, or chat messages rendered by the model's template) and
  a continuation (text); the answer is the continuation's summed log-probability, its token count,
  and whether every one of its tokens was the greedy choice (as lm-evaluation-harness's
  ``loglikelihood`` answers).
- :class:`NextToken`: a context; the answer is the log-probability of every token of the
  vocabulary as the next one (negated LAMA's cloze). Only a backend with the model in this process
  answers it (a server returns a few top log-probabilities at most), and it is never cached.

A backend that cuts a prompt from the left (``evaluation.truncate: left``) says so in the answer
(``cut``) with the text the model was given (``seen``), so the sample log shows what it saw.

Every request carries ``example``, the ``benchmark/split/id`` (and choice) it was made for, so a
failure names what it could not score; ``example`` is not part of what is sent or cached.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Generation:
    prompt: str  # the text (for a chat, what the messages say, for logs)
    max_tokens: int
    stop: tuple[str, ...] = ()
    #: A chat: ((role, content), ...) sent to /v1/chat/completions; empty: ``prompt`` as text.
    messages: tuple[tuple[str, str], ...] = ()
    example: str = field(default="", compare=False)

    kind = "generation"

    @property
    def chat(self) -> bool:
        return bool(self.messages)

    def payload(self) -> dict[str, Any]:
        sent = {"messages": [list(m) for m in self.messages]} if self.messages else {"prompt": self.prompt}
        return {"kind": self.kind, **sent, "max_tokens": self.max_tokens, "stop": list(self.stop)}


@dataclass(frozen=True)
class Loglikelihood:
    context: str  # the text (for a chat, what the messages say, for logs)
    continuation: str
    example: str = field(default="", compare=False)
    #: A chat context: ((role, content), ...) rendered through the model's chat template, the
    #: continuation after it; empty: ``context`` as text. Only a backend that renders the template
    #: itself (the model in this process) can answer it.
    messages: tuple[tuple[str, str], ...] = ()
    #: The continuation is a whole answer, ending the sequence: a seq2seq model scores it as its
    #: decoder target with EOS (a verbalizer, as the family trains it). False: its tokens only (a
    #: choice, as lm-evaluation-harness scores one). A causal LM scores the tokens either way.
    eos: bool = False

    kind = "loglikelihood"

    @property
    def chat(self) -> bool:
        return bool(self.messages)

    def payload(self) -> dict[str, Any]:
        sent = {"messages": [list(m) for m in self.messages]} if self.messages else {"context": self.context}
        return {"kind": self.kind, **sent, "continuation": self.continuation, **({"eos": True} if self.eos else {})}


@dataclass(frozen=True)
class NextToken:
    """The next token's log-probabilities over the whole vocabulary after ``context`` (text, with
    the tokenizer's special tokens)."""

    context: str
    example: str = field(default="", compare=False)

    kind = "next_token"

    @property
    def chat(self) -> bool:
        return False

    def payload(self) -> dict[str, Any]:
        return {"kind": self.kind, "context": self.context}


Request = Generation | Loglikelihood | NextToken


@dataclass(frozen=True)
class Answer:
    """What a backend answered one request with (from the server or from the cache)."""

    text: str | None = None  # Generation
    logprob: float | None = None  # Loglikelihood: summed over the continuation's tokens
    n_tokens: int | None = None  # Loglikelihood: the continuation's tokens
    is_greedy: bool | None = None  # Loglikelihood
    tokens_in: int = 0  # as the server counted them (usage), 0 when it did not say
    tokens_out: int = 0
    #: The prompt was cut from the left to fit the model's context (``evaluation.truncate: left``),
    #: and ``seen`` is the text the model was given.
    cut: bool = False
    seen: str | None = None
    #: NextToken: (vocabulary,) float32 log-probabilities, a tensor kept in memory (never cached).
    next_logprobs: Any = None

    def as_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None and k != "next_logprobs" and not (k == "cut" and not v)}

    @classmethod
    def of(cls, data: dict[str, Any]) -> "Answer":
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


def cache_key(backend: str, settings: dict[str, Any], request: Request | dict[str, Any]) -> str:
    """The cache key of a request: the backend, its settings (server, model, sampling) and the
    request itself (a request, or the plain data an in-process backend asks with), as canonical
    JSON hashed."""
    payload = request if isinstance(request, dict) else request.payload()
    text = json.dumps({"backend": backend, "settings": settings, "request": payload}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class Counts:
    """Per benchmark: requests sent to the server (retries included), answers read from the
    cache, and tokens in and out as the server counted them (answers from the cache included)."""

    requests: int = 0
    cached: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    missing: list[str] = field(default_factory=list)  # examples whose request failed (--allow-missing)

    def as_json(self) -> dict[str, Any]:
        return {"sent": self.requests, "cached": self.cached, "tokens_in": self.tokens_in, "tokens_out": self.tokens_out}
