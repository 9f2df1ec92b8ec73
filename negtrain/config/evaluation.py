"""The ``evaluation:`` section: how the numbers of every evaluation are qualified, and what runs
the model (the in-process ``hf`` backend, or a server: ``ServerConfig``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from negtrain.config.backends import DEFAULT_BACKEND, backend_row, check_backend
from negtrain.config.section import Section
from negtrain.core.card_settings import CARD_SETTINGS
from negtrain.core.errors import ConfigError
from negtrain.core.secrets import key_name_problem
from negtrain.core.server_settings import SERVER_SETTINGS, extra_body_problem


class ServerConfig(Section):
    """A model behind an OpenAI-compatible server (``evaluation.backend: openai``; see
    negtrain/serving/openai.py). The API key itself is never a setting: only the name of the
    environment variable that holds it."""

    # Each field's default, bounds and description: the one table of server settings, which the
    # command line's flags are made from too.
    base_url: str = SERVER_SETTINGS["base_url"].field()
    key_env: str | None = SERVER_SETTINGS["key_env"].field()
    concurrency: int = SERVER_SETTINGS["concurrency"].field()
    timeout: float = SERVER_SETTINGS["timeout"].field()
    retries: int = SERVER_SETTINGS["retries"].field()
    max_requests: int | None = SERVER_SETTINGS["max_requests"].field()
    allow_missing: bool = SERVER_SETTINGS["allow_missing"].field()
    extra_body: dict[str, Any] = SERVER_SETTINGS["extra_body"].field()
    extra_body_allow: list[str] = SERVER_SETTINGS["extra_body_allow"].field()

    @model_validator(mode="after")
    def _extra_body_decides_nothing_scored(self) -> ServerConfig:
        problem = extra_body_problem(self.extra_body, self.extra_body_allow)
        if problem:
            raise ValueError(f"extra_body: {problem}")
        return self

    @field_validator("key_env", mode="before")  # before the name's pattern, whose error quotes the value
    @classmethod
    def _a_name_not_a_key(cls, v: Any) -> Any:
        problem = key_name_problem(v, "key_env") if isinstance(v, str) and v else None
        if problem:
            raise ValueError(problem)
        return v

    @field_validator("base_url")
    @classmethod
    def _http(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {v!r}")
        return v


#: Server settings that change how a card is run, not what it scores: a rerun may change them.
RUN_ONLY_SERVER_SETTINGS = tuple(name for name, s in SERVER_SETTINGS.items() if s.run_only)


class EvaluationConfig(Section):
    """How the numbers of every evaluation are qualified (see negtrain/metrics/uncertainty.py),
    and what runs the model."""

    # Each field's default, bounds and description: the one table of the card's settings, which the
    # command line's flags (evaluate --bootstrap, --no-log-samples, ...) are made from too.
    bootstrap: int = CARD_SETTINGS["bootstrap"].field()
    bootstrap_seed: int = CARD_SETTINGS["bootstrap_seed"].field()
    log_samples: bool = CARD_SETTINGS["log_samples"].field()
    truncate: Literal["none", "left"] = CARD_SETTINGS["truncate"].field()
    backend: str = Field(
        DEFAULT_BACKEND, description="hf: the model in this process (transformers: the same backend under another name). openai: a model behind an "
        "OpenAI-compatible server (`server`), scored by report cards (evaluate --model NAME --backend openai). Any "
        "other name is a row of the backends table (negtrain/config/backends.py; a plugin adds one with register_backend).",
    )
    server: ServerConfig | None = Field(None, description="The server, for backend openai (or a registered backend that reads one).")

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, v: str) -> str:
        try:
            return check_backend(v)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None

    @model_validator(mode="after")
    def _server_with_openai(self) -> EvaluationConfig:
        row = backend_row(self.backend)
        if row.needs_server and self.server is None:
            raise ValueError(f"backend {self.backend} needs a server section (base_url)")
        if row.loads_here and self.server is not None and not self.server.extra_body:
            raise ValueError("server is for a served backend (openai)")
        if row.loads_here and self.server is not None and self.server.extra_body:
            raise ValueError(f"server.extra_body: the {self.backend} backend sends no request body, so it would be ignored; "
                             "it goes with backend openai")
        return self
