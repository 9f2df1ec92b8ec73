"""The response cache round any backend: one wrapper (as lm-evaluation-harness's ``CachingLM``
wraps any model), so no backend looks answers up itself.

:class:`CachingBackend` answers a request from the cache (:mod:`negtrain.serving.cache`) when it
holds one under its key, and hands the others to the backend it wraps; each answer the backend
computes is kept the moment the backend has it (``on_answer``: a batch of the model here, a reply
of a server), so a card killed, stopped or out of budget loses none it paid for. The key is the
backend's name, what the backend says decides an answer besides the request
(``cache_identity``: the server and model; for a model here its weights by content, tokenizer,
chat template, dtype, precision and ``truncate``) and the request
(:func:`negtrain.engine.requests.cache_key`). A request whose identity is None (a next token's
whole distribution; any request of a backend that declares no identity, such as a table or a
live model whose weights change) is never cached. Everything else the engine asks is the wrapped
backend's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from negtrain.engine.requests import Answer, Counts, Request, cache_key
from negtrain.serving.cache import ResponseCache


class CachingBackend:
    """``inner`` (a :class:`negtrain.serving.backend.Backend`) with ``cache`` round it."""

    def __init__(self, inner: Any, cache: ResponseCache) -> None:
        self.inner = inner
        self.cache = cache

    # ---- what the wrapped backend is -------------------------------------------------------
    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def loads_here(self) -> bool:
        return self.inner.loads_here

    @property
    def tokenizer(self) -> Any:
        return self.inner.tokenizer

    @property
    def context(self) -> Any:
        return self.inner.context

    @property
    def encoder_decoder(self) -> bool:
        return self.inner.encoder_decoder

    @property
    def precision(self) -> str | None:
        return self.inner.precision

    @property
    def dtype_words(self) -> str | None:
        return self.inner.dtype_words

    @property
    def model_config(self) -> Any:
        return self.inner.model_config

    @property
    def where(self) -> str:
        return self.inner.where

    def prompt_lengths(self, texts: Sequence[str], chat: bool = False) -> list[int]:
        return self.inner.prompt_lengths(texts, chat)

    def chat_text(self, messages: list[dict[str, str]]) -> str | None:
        return self.inner.chat_text(messages)

    def load(self) -> None:
        self.inner.load()

    def cache_identity(self, request: Request) -> dict[str, Any] | None:
        return self.inner.cache_identity(request)

    def check_run(self, requests: Sequence[Request]) -> None:
        self.inner.check_run(requests)

    def offers_prompt_logprobs(self) -> tuple[bool, str]:
        return self.inner.offers_prompt_logprobs()

    def stop(self) -> None:
        self.inner.stop()

    # ---- answering through the cache --------------------------------------------------------
    def answer(self, requests: Sequence[Request], counts: Counts, allow_missing: bool = False, on_answer=None) -> list[Answer | None]:
        """Every request's answer, in order: the cached ones read (``counts.cached``, their tokens
        counted as the backend counts its own), the rest answered by the wrapped backend and each
        kept as it comes."""
        # The backend's own checks of this run (a server's spot check) run whatever the cache holds:
        # a verdict is never taken from a cache.
        self.inner.check_run(requests)
        answers: list[Answer | None] = [None] * len(requests)
        keys: dict[int, str] = {}
        for i, request in enumerate(requests):
            identity = self.inner.cache_identity(request)
            if identity is None:
                continue
            keys[i] = cache_key(self.inner.name, identity, request)
            found = self.cache.get(keys[i])
            if found is not None:
                answers[i] = found
                counts.cached += 1
                counts.tokens_in += found.tokens_in
                counts.tokens_out += found.tokens_out
        todo = [i for i, a in enumerate(answers) if a is None]
        if not todo:
            return answers

        def keep(at: int, answer: Answer) -> None:
            i = todo[at]
            if i in keys:
                self.cache.put(keys[i], answer)  # committed with its batch (serving/cache.py)
            if on_answer is not None:
                on_answer(i, answer)

        if keys:
            got = self.inner.answer([requests[i] for i in todo], counts, allow_missing, on_answer=keep)
        else:  # nothing of this backend is cached: its answer() is asked as it is
            got = self.inner.answer([requests[i] for i in todo], counts, allow_missing)
        for i, answer in zip(todo, got, strict=True):
            answers[i] = answer
        return answers
