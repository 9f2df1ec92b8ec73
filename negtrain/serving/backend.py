"""What every served backend is: an object that answers the typed requests of
:mod:`negtrain.engine.requests` in batches, and how a backend is made from its row of the table
(:mod:`negtrain.config.backends`).

A backend answers a list of requests (greedy :class:`~negtrain.engine.requests.Generation`\\ s and
continuation :class:`~negtrain.engine.requests.Loglikelihood`\\ s, in any mix) with one
:class:`~negtrain.engine.requests.Answer` per request, in order, counting what it sent, read from
a cache and the tokens in :class:`~negtrain.engine.requests.Counts`; with ``allow_missing`` a
request it could not answer is None and named in ``counts.missing``, else it raises. The scoring of
benchmarks from those answers is the backend's concern nowhere: :mod:`negtrain.evaluation.served` builds the
requests and reads the answers, whatever backend gave them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from negtrain.config.backends import DEFAULT_BACKEND, backend_row
from negtrain.core.errors import ConfigError
from negtrain.serving.cache import ResponseCache
from negtrain.serving.response_caching import CachingBackend
from negtrain.engine.requests import Answer, Counts, Request


@runtime_checkable
class Backend(Protocol):
    """What the engine asks of a backend, every member declared (nothing is probed for): what it
    answers (``answer``, ``offers_prompt_logprobs``, ``stop``), and what it is, which decides how an
    entry's prompts are built and checked (:mod:`negtrain.engine.prompts`) and what the records say.
    A backend whose model is not here (a server, a table) subclasses :class:`BackendBase`, which
    declares it has none of a local model's abilities."""

    # Read-only members: a backend may hold them as attributes (the model here) or compute them
    # (the response cache round another backend hands on the wrapped one's).
    @property
    def name(self) -> str:
        """The table row it answers as (which keys its response cache)."""
        ...

    @property
    def loads_here(self) -> bool:
        """Whether the model runs in this process (its weights, tokenizer and precision are here)."""
        ...

    @property
    def tokenizer(self) -> Any:
        """The model's tokenizer when it is here (cloze vocabularies, verbalizers told apart); else None."""
        ...

    @property
    def context(self) -> Any:
        """The context every prompt is held to (a :class:`negtrain.models.context.Context`) when
        the backend can count a prompt's tokens; None: a server's context decides."""
        ...

    @property
    def encoder_decoder(self) -> bool:
        """Whether the model is an encoder-decoder (its answer takes none of the prompt's room)."""
        ...

    @property
    def precision(self) -> str | None:
        """The evaluation's precision where the model is here, as the records say it; else None."""
        ...

    @property
    def dtype_words(self) -> str | None:
        """The dtype the model computes in, as the records say it (None where it is not here)."""
        ...

    @property
    def model_config(self) -> Any:
        """The model's config where it is here (provenance); else None."""
        ...

    @property
    def where(self) -> str:
        """Words naming where the requests go, for an error (``the server at URL``)."""
        ...

    def prompt_lengths(self, texts: Sequence[str], chat: bool = False) -> list[int]:
        """Each text's length in tokens as the model is given it (``chat``: a template's rendering,
        which holds its own special tokens). Asked only where :attr:`context` is not None."""
        ...

    def chat_text(self, messages: list[dict[str, str]]) -> str | None:
        """The messages as the model is given them, through the template applied here; None where
        the backend sends the messages and its server renders them."""
        ...

    def load(self) -> None:
        """Load the weights now, where the backend deferred them until every prompt was checked."""
        ...

    def cache_identity(self, request: Request) -> dict[str, Any] | None:
        """What decides ``request``'s answer besides the request (the server and model; a model
        here's weights, tokenizer, template, precision), which keys it in the response cache round
        the backend (:mod:`negtrain.serving.response_caching`); None: never cached."""
        ...

    def answer(self, requests: Sequence[Request], counts: Counts, allow_missing: bool = False,
               on_answer: Callable[[int, Answer], None] | None = None) -> list[Answer | None]:
        """One answer per request, in order (None only with ``allow_missing``, named in
        ``counts.missing``); each handed to ``on_answer`` (its position, the answer) as soon as it
        is computed, where the backend declares a :meth:`cache_identity` (the cache keeps it then)."""
        ...

    def check_run(self, requests: Sequence[Request]) -> None:
        """The checks it makes once a run on the run's own requests before their answers are used,
        whether the answers then come from it or from a cache (a server's spot check); nothing for a
        backend that has none."""
        ...

    def offers_prompt_logprobs(self) -> tuple[bool, str]:
        """Whether it answers :class:`~negtrain.engine.requests.Loglikelihood` requests rightly, and when not,
        what it does, as words that follow its name (``returns no prompt log-probabilities (...)``)."""
        ...

    def stop(self) -> None:
        """End what is in flight and send nothing more (a signal stopped the card)."""
        ...


#: The members every backend declares (:class:`Backend`), named in the error for one that lacks some.
MEMBERS = ("name", "loads_here", "tokenizer", "context", "encoder_decoder", "precision", "dtype_words", "model_config", "where",
           "prompt_lengths", "chat_text", "load", "cache_identity", "answer", "check_run", "offers_prompt_logprobs", "stop")


class BackendBase:
    """The declared abilities of a backend whose model is not in this process: no tokenizer, no
    context it can count (every prompt is sent whole, with all its shots), no template of its own
    (a chat is sent as messages), no precision or weights to load, and no answer cached (it
    declares no :meth:`cache_identity`). A subclass sets ``name`` and defines ``answer``;
    ``offers_prompt_logprobs`` says yes and ``stop`` does nothing unless it says otherwise."""

    name: str = ""
    loads_here: bool = False
    tokenizer: Any = None
    context: Any = None
    encoder_decoder: bool = False
    precision: str | None = None
    dtype_words: str | None = None
    model_config: Any = None

    @property
    def where(self) -> str:
        return f"the backend {self.name}"

    def prompt_lengths(self, texts: Sequence[str], chat: bool = False) -> list[int]:
        raise NotImplementedError(f"{self.where} cannot count a prompt's tokens (it has no context)")

    def chat_text(self, messages: list[dict[str, str]]) -> str | None:
        return None

    def load(self) -> None:
        pass

    def cache_identity(self, request: Request) -> dict[str, Any] | None:
        return None

    def answer(self, requests: Sequence[Request], counts: Counts, allow_missing: bool = False,
               on_answer: Callable[[int, Answer], None] | None = None) -> list[Answer | None]:
        raise NotImplementedError

    def check_run(self, requests: Sequence[Request]) -> None:
        pass

    def offers_prompt_logprobs(self) -> tuple[bool, str]:
        return True, ""

    def stop(self) -> None:
        pass


@dataclass(frozen=True)
class BackendContext:
    """What a backend's factory is given: the model's name (``model.name``), the recipe's
    ``evaluation.server`` section (None when it has none), the card's response cache, and the
    card's whole recipe (a backend that loads the model here reads its settings from it); for a
    backend that loads the model here, also a negtrain run's checkpoint to load into it, and the
    name of the row it answers as (which keys its response cache)."""

    model: str
    server: Any = None  # negtrain.config.ServerConfig | None
    cache: ResponseCache | None = None
    recipe: Any = None  # negtrain.config.Recipe | None
    checkpoint: Path | None = None  # a run's .ckpt (a card's --model RUN)
    backend: str = DEFAULT_BACKEND


def backend_factory(name: str):
    """The factory of backend ``name``, imported from its ``"module:function"`` when the table names it so."""
    factory = backend_row(name).factory
    if not isinstance(factory, str):
        return factory
    module, _, function = factory.partition(":")
    try:
        return getattr(importlib.import_module(module), function)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"backend {name}: cannot import its factory {factory} ({exc})") from exc


def open_backend(name: str, context: BackendContext) -> Backend:
    """Backend ``name`` made by its factory, checked to declare every member of :class:`Backend`
    (the context names the row it answers as), with the context's response cache round it
    (:class:`negtrain.serving.response_caching.CachingBackend`) when there is one."""
    backend = backend_factory(name)(replace(context, backend=name))
    if not isinstance(backend, Backend):
        missing = [m for m in MEMBERS if m not in dir(backend)]
        raise ConfigError(f"backend {name}: its factory returned {type(backend).__name__}, which lacks {', '.join(missing)} "
                          "(a backend whose model is not here subclasses negtrain.serving.backend.BackendBase for them)")
    return CachingBackend(backend, context.cache) if context.cache is not None else backend
