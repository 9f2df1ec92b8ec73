"""The two requests an evaluation puts to a model, whatever runs it.

- :class:`Generation`: a prompt (text, or chat messages when chat formatting is asked), a token
  limit and stop strings; greedy. The answer is the generated text.
- :class:`Loglikelihood`: a context and a continuation (text); the answer is the continuation's
  summed log-probability, its token count, and whether every one of its tokens was the greedy
  choice (as lm-evaluation-harness's ``loglikelihood`` answers).

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
    context: str
    continuation: str
    example: str = field(default="", compare=False)

    kind = "loglikelihood"

    def payload(self) -> dict[str, Any]:
        return {"kind": self.kind, "context": self.context, "continuation": self.continuation}


Request = Generation | Loglikelihood


@dataclass(frozen=True)
class Answer:
    """What a backend answered one request with (from the server or from the cache)."""

    text: str | None = None  # Generation
    logprob: float | None = None  # Loglikelihood: summed over the continuation's tokens
    n_tokens: int | None = None  # Loglikelihood: the continuation's tokens
    is_greedy: bool | None = None  # Loglikelihood
    scores: list[float] | None = None  # the hf backend's label scores of one prompt (one per label)
    tokens_in: int = 0  # as the server counted them (usage), 0 when it did not say
    tokens_out: int = 0

    def as_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}

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
