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
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from negtrain.config.backends import BACKENDS, check_backend
from negtrain.core.errors import ConfigError
from negtrain.serving.cache import ResponseCache
from negtrain.engine.requests import Answer, Counts, Request


@runtime_checkable
class Backend(Protocol):
    name: str

    def answer(self, requests: Sequence[Request], counts: Counts, allow_missing: bool = False) -> list[Answer | None]:
        """One answer per request, in order (None only with ``allow_missing``, named in ``counts.missing``)."""
        ...

    def offers_prompt_logprobs(self) -> tuple[bool, str]:
        """Whether it answers :class:`~negtrain.engine.requests.Loglikelihood` requests rightly, and when not,
        what it does, as words that follow its name (``returns no prompt log-probabilities (...)``)."""
        ...

    def stop(self) -> None:
        """End what is in flight and send nothing more (a signal stopped the card)."""
        ...


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
    backend: str = "transformers"


def backend_factory(name: str):
    """The factory of backend ``name``, imported from its ``"module:function"`` when the table names it so."""
    factory = BACKENDS[check_backend(name)]
    if not isinstance(factory, str):
        return factory
    module, _, function = factory.partition(":")
    try:
        return getattr(importlib.import_module(module), function)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"backend {name}: cannot import its factory {factory} ({exc})") from exc


def open_backend(name: str, context: BackendContext) -> Backend:
    """Backend ``name`` made by its factory, checked to answer requests (the context names the row
    it answers as)."""
    backend = backend_factory(name)(replace(context, backend=name))
    if not isinstance(backend, Backend):
        missing = [m for m in ("name", "answer", "offers_prompt_logprobs", "stop") if not hasattr(backend, m)]
        raise ConfigError(f"backend {name}: its factory returned {type(backend).__name__}, which lacks {', '.join(missing)}")
    return backend
