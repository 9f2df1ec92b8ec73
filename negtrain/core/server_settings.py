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

        if isinstance(self.default, dict):
            return Field(default_factory=dict, description=self.description, **self.bounds)
        return Field(self.default, description=self.description, **self.bounds)

    def help(self) -> str:
        default = "" if self.default in (REQUIRED, None) or isinstance(self.default, dict) else f" (default {self.default})"
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
        "{repeat_penalty: 1.0} for llama.cpp's servers (see docs/served.md). Not the fields negtrain sets itself.",
        {}, metavar="JSON",
    ),
)}


def flagged() -> list[ServerSetting]:
    """The settings the command line gives as flags, in the table's order."""
    return [s for s in SERVER_SETTINGS.values() if not s.no_flag]
