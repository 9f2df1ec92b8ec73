"""The settings of a model behind a server, defined once: each one's type on the command line,
default, bounds and description. The recipe's ``evaluation.server`` section
(``negtrain.config.ServerConfig``) makes its fields from this table, the card's flags
(``evaluate --base-url ...``) are made from it with the descriptions as their help, and the
client's settings (``negtrain.serving.openai.ServerSettings``) take their defaults from it.

It imports no pydantic: ``negtrain --help`` builds every flag without loading the recipe schema
(tests/test_cli_arguments.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: No default: the setting must be given.
REQUIRED: Any = ...


@dataclass(frozen=True)
class ServerSetting:
    name: str
    description: str
    default: Any = REQUIRED
    #: The flag's value type on the command line (``extra_body``: its JSON text, parsed by the card).
    cli_type: Callable[[str], Any] = str
    #: Pydantic bounds (``ge``, ``le``, ``gt``, ``pattern``).
    bounds: dict[str, Any] = field(default_factory=dict)
    #: The flag's name where it is not the field's (``--api-key-env`` for ``key_env``); None: the
    #: field's name, dashed.
    flag: str | None = None
    metavar: str | None = None
    #: Has no flag of its own (``allow_missing``: the command's ``--allow-missing``).
    no_flag: bool = False
    #: Changes how a card is run, not what it scores: a rerun may change it.
    run_only: bool = False

    @property
    def option(self) -> str:
        return "--" + (self.flag or self.name).replace("_", "-")

    @property
    def dest(self) -> str:
        return (self.flag or self.name).replace("-", "_")

    def field(self) -> Any:
        """The pydantic field of ``ServerConfig``."""
        from pydantic import Field  # the config floor's; only when the schema is built

        if isinstance(self.default, (dict, list)):
            return Field(default_factory=type(self.default), description=self.description, **self.bounds)
        return Field(self.default, description=self.description, **self.bounds)

    def help(self) -> str:
        default = "" if self.default in (REQUIRED, None) or isinstance(self.default, (dict, list)) else f" (default {self.default})"
        return (self.description + default).replace("%", "%%")


SERVER_SETTINGS: dict[str, ServerSetting] = {s.name: s for s in (
    ServerSetting("base_url", "The server's API root, e.g. http://127.0.0.1:8000/v1 (a missing /v1 is added).", metavar="URL"),
    ServerSetting(
        "key_env", "The name of the environment variable holding the API key, sent as a bearer token (none: no key); "
        "the key itself is never a setting or an argument.",
        None, bounds={"pattern": r"^[A-Za-z_][A-Za-z0-9_]*$"}, flag="api_key_env", metavar="VAR",
    ),
    ServerSetting("concurrency", "Requests in flight at once.", 4, int, {"ge": 1, "le": 256}, metavar="N", run_only=True),
    ServerSetting("timeout", "Seconds for one whole request, connecting to the last byte of the answer, before it counts as a "
                  "timeout (retried).", 120.0, float, {"gt": 0, "le": 3600}, metavar="SECONDS", run_only=True),
    ServerSetting("retries", "Retries of a request answered with 429, a 5xx or nothing, with exponential backoff.", 5, int,
                  {"ge": 0, "le": 20}, metavar="N", run_only=True),
    ServerSetting("max_requests", "Budget guard: the run stops (its answers cached) once this many requests were sent. "
                  "None: no bound.", None, int, {"ge": 1}, metavar="N", run_only=True),
    ServerSetting("allow_missing", "A request that fails after its retries leaves its example unscored (listed in the card) "
                  "instead of stopping the run.", False, no_flag=True),
    ServerSetting(
        "extra_body", "Fields added to every generation request: a server's own settings that decide its text, e.g. "
        "{repeat_penalty: 1.0} for llama.cpp's servers (see docs/served.md). Not the fields negtrain sets itself, "
        "nor (unless --extra-body-allow names them) fields that change the prompt, the token budget, decoding or the answer's format.",
        {}, metavar="JSON",
    ),
    ServerSetting(
        "extra_body_allow", "Fields of --extra-body sent although they change what is scored (the prompt, the token budget, "
        "decoding or the answer's format), comma-separated; card.md, protocol.md and provenance.json name them.",
        [], lambda text: [f.strip() for f in text.split(",") if f.strip()], metavar="FIELD,...",
    ),
)}


def flagged() -> list[ServerSetting]:
    """The settings the command line gives as flags, in the table's order."""
    return [s for s in SERVER_SETTINGS.values() if not s.no_flag]


#: The request fields negtrain sets itself (the model, the prompt, its limit and stop strings, greedy
#: decoding): an ``extra_body`` never sets them, in any case of their letters.
SENT_BY_NEGTRAIN = frozenset({"model", "prompt", "messages", "max_tokens", "stop", "temperature", "top_p", "echo", "logprobs", "n",
                              "stream", "best_of", "logit_bias", "seed"})
#: Parts of a field's name that mark a field which changes what is scored: the prompt
#: (``suffix``, ``truncate_prompt_tokens``, ``chat_template``), the token budget
#: (``max_completion_tokens``, ``min_tokens``, ``ignore_eos``, ``n_predict``), decoding (``top_k``,
#: ``mirostat``, a penalty) or the answer's format (``guided_choice``, ``response_format``,
#: ``grammar``). Matched in lower case, so ``MAX_TOKENS`` is ``max_tokens``.
CHANGES_SCORING = ("token", "prompt", "suffix", "prefix", "stop", "eos", "guided", "grammar", "schema", "format", "logit",
                   "logprob", "sampl", "temperature", "top_", "min_p", "typical", "beam", "penalty", "template", "seed",
                   "predict", "mirostat", "dynatemp", "dry_", "xtc", "tool", "function", "length", "choice", "regex",
                   "structured", "json", "message", "echo", "best_of", "stream", "tfs", "n_probs", "lora", "adapter")
#: Values of those fields that leave greedy decoding as it is (llama.cpp's servers apply a
#: repeat_penalty of 1.1 unless a request sets 1.0): sent without --extra-body-allow.
NEUTRAL = {"repeat_penalty": (1,), "repetition_penalty": (1,), "presence_penalty": (0,), "frequency_penalty": (0,),
           "top_k": (1, 0, -1), "min_p": (0,), "typical_p": (1,), "tfs_z": (1,)}


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return value == value and value not in (float("inf"), float("-inf"))
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return all(_finite(v) for v in value)
    return True


def extra_body_problem(extra: dict[str, Any], allowed: list[str] | tuple[str, ...] = ()) -> str | None:
    """Why ``extra`` may not be sent as it is, or None: a field negtrain sets itself, a field that
    changes what is scored and that ``allowed`` (``--extra-body-allow``) does not name, a NaN or an
    infinity (not JSON)."""
    ours = sorted(k for k in extra if str(k).lower() in SENT_BY_NEGTRAIN)
    if ours:
        return (f"{', '.join(ours)} {'is' if len(ours) == 1 else 'are'} set by negtrain itself (greedy decoding, the prompt, "
                "its limits); extra_body is for a server's own settings")
    odd = sorted(k for k, v in extra.items() if not _finite(v))
    if odd:
        return f"{', '.join(odd)}: NaN and Infinity are not JSON; give a number"
    allow = {a.lower() for a in allowed}
    changes = sorted(k for k, v in extra.items() if str(k).lower() not in allow and _changes_scoring(str(k), v))
    if changes:
        return (f"{', '.join(changes)} would change what is scored (the prompt, the token budget, decoding or the answer's "
                "format); to send it anyway, name it in --extra-body-allow (evaluation.server.extra_body_allow)")
    return None


def _changes_scoring(name: str, value: Any) -> bool:
    low = name.lower()
    if low in NEUTRAL and not isinstance(value, bool) and isinstance(value, (int, float)) and value in NEUTRAL[low]:
        return False
    return any(part in low for part in CHANGES_SCORING)
