"""The ``evaluation:`` section: how the numbers of every evaluation are qualified, and what runs
the model (the in-process ``hf`` backend, or a server: ``ServerConfig``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from negtrain.config.backends import IN_PROCESS, check_backend
from negtrain.config.section import Section
from negtrain.core.errors import ConfigError
from negtrain.core.server_settings import SERVER_SETTINGS


#: The most bootstrap resamples anything draws: intervals settle long before (1,000 are the
#: default); 100,000 take seconds per benchmark split, a billion would take hours.
MAX_BOOTSTRAP = 100_000


#: The request fields negtrain sets itself: an ``extra_body`` may not change them (decoding stays
#: greedy, and the prompt, limits and stop strings are the benchmark's).
SENT_BY_NEGTRAIN = frozenset({"model", "prompt", "messages", "max_tokens", "stop", "temperature", "top_p", "echo", "logprobs", "n",
                              "stream", "best_of", "logit_bias", "seed"})


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

    @field_validator("extra_body")
    @classmethod
    def _not_negtrains_fields(cls, v: dict[str, Any]) -> dict[str, Any]:
        taken = sorted(set(v) & SENT_BY_NEGTRAIN)
        if taken:
            raise ValueError(f"{', '.join(taken)} {'is' if len(taken) == 1 else 'are'} set by negtrain itself (greedy decoding, "
                             "the prompt, its limits); extra_body is for a server's own settings")
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

    bootstrap: int = Field(
        1000,
        ge=0,
        le=MAX_BOOTSTRAP,
        description="Resamples of the percentile bootstrap that gives every metric its ci95, drawing the "
        "benchmark's independent units (ScoNe contrast sets, NaN-NLI premises, CondaQA question groups, "
        "...) with replacement. 0 turns it off: no ci95, and stderr only for per-item means. 1,000 "
        "resamples cost under 0.1 s on CondaQA test on 2 CPU cores; at most 100,000.",
    )
    bootstrap_seed: int = Field(
        0, ge=0, le=2**32 - 1,
        description="Seed of the bootstrap draws; the same seed and outcomes give the same intervals. "
        "Independent of the recipe's `seed`, so runs with different training seeds are scored on the same resamples.",
    )
    log_samples: bool = Field(
        True,
        description="Write next to every prediction the exact prompt the model saw (after the chat "
        "template) and its response (the generated text, or each label's score). `evaluate --no-log-samples` "
        "turns it off for very large runs.",
    )
    truncate: Literal["none", "left"] = Field(
        "none",
        description="What a language model's evaluation does with a prompt that, with the room its answer needs, does "
        "not fit the model's context (its max_position_embeddings, or its tokenizer's model_max_length): 'none': "
        "an error before scoring, naming the row; 'left': cut from the start (BOS kept), the rows cut counted as "
        "n_truncated in the metrics and the logged prompt the text the model saw (`evaluate --truncate left`).",
    )
    backend: str = Field(
        "hf", description="hf: the model in this process (Lightning, any number of GPUs). openai: a model behind an "
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
        if self.backend == "openai" and self.server is None:
            raise ValueError("backend openai needs a server section (base_url)")
        if self.backend == IN_PROCESS and self.server is not None:
            raise ValueError("server is for a served backend (openai)")
        return self
