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
import unicodedata

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
        "{repeat_penalty: 1.0} for llama.cpp's servers (see docs/served.md). Not the fields negtrain sets itself, at any depth; "
        "unless --extra-body-allow names them, only fields known to leave the text as it is, and penalties at their neutral value.",
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
#: decoding): an ``extra_body`` never sets them, at any depth, in any case or look-alike spelling
#: of their letters (names are compared NFKC-normalised and case-folded: ``ſtream`` is ``stream``).
SENT_BY_NEGTRAIN = frozenset({"model", "prompt", "messages", "max_tokens", "stop", "temperature", "top_p", "echo", "logprobs", "n",
                              "stream", "best_of", "logit_bias", "seed"})
#: The only fields sent without ``--extra-body-allow``: the ones known to leave the text as it is.
#: Where they go (a slot, a user or request label, a scheduling priority, a prefix-cache salt, how
#: long a model stays loaded), not what is decoded. Every other field, known or not, may change
#: what is scored, and is refused unless ``--extra-body-allow`` names it (an allow-list: a server's
#: new field is refused until someone shows it changes nothing, not sent until someone shows it does).
LEAVES_THE_TEXT = frozenset({"id_slot", "slot_id", "user", "priority", "request_id", "cache_salt", "keep_alive"})
#: Fields that change decoding in general, at a value that leaves greedy decoding as it is
#: (llama.cpp's servers apply a repeat_penalty of 1.1 unless a request sets 1.0): sent without
#: --extra-body-allow at that value only.
NEUTRAL = {"repeat_penalty": (1,), "repetition_penalty": (1,), "presence_penalty": (0,), "frequency_penalty": (0,),
           "top_k": (1, 0, -1), "min_p": (0,), "typical_p": (1,), "tfs_z": (1,)}


def field_name(name: Any) -> str:
    """A field's name as it is compared: NFKC-normalised (a fullwidth or long-s look-alike is the
    letter it looks like) and case-folded."""
    return unicodedata.normalize("NFKC", str(name)).casefold()


def extra_body_fields(extra: dict[str, Any], prefix: str = "") -> list[tuple[str, str, Any]]:
    """Every field of ``extra`` with a value that is not an object, at any depth, as (its dotted
    path as given, its compared name, its value): a field one level down (Ollama's
    ``options``, vLLM's ``vllm_xargs``, TGI's ``parameters``) is a field like its top-level twin."""
    out: list[tuple[str, str, Any]] = []
    for key, value in extra.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.extend(extra_body_fields(value, path + "."))
        else:
            out.append((path, field_name(key), value))
    return out


def changing_fields(extra: dict[str, Any]) -> list[str]:
    """The dotted paths of the fields of ``extra`` that may change what is scored (every field
    but the allow-listed ones and neutral values)."""
    return [path for path, name, value in extra_body_fields(extra) if _changes_scoring(name, value)]


def let_through(path: str, allowed: list[str] | tuple[str, ...]) -> bool:
    """Whether ``--extra-body-allow`` names the field at ``path``: by its name or its dotted path."""
    names = {field_name(a) for a in allowed}
    return field_name(path) in names or field_name(path.rsplit(".", 1)[-1]) in names


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return value == value and value not in (float("inf"), float("-inf"))
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return all(_finite(v) for v in value)
    return True


def extra_body_problem(extra: dict[str, Any], allowed: list[str] | tuple[str, ...] = ()) -> str | None:
    """Why ``extra`` may not be sent as it is, or None: a field negtrain sets itself (at any depth,
    in any spelling), a field not known to leave the text as it is that ``allowed``
    (``--extra-body-allow``) does not name, a NaN or an infinity (not JSON)."""
    fields = extra_body_fields(extra)
    ours = sorted(path + ("" if path.rsplit(".", 1)[-1].lower() == name else f" (read as {name})")
                  for path, name, _ in fields if name in SENT_BY_NEGTRAIN)
    if ours:
        return (f"{', '.join(ours)} {'is' if len(ours) == 1 else 'are'} set by negtrain itself (greedy decoding, the prompt, "
                "its limits); extra_body is for a server's own settings")
    odd = sorted(path for path, _, v in fields if not _finite(v))
    if odd:
        return f"{', '.join(odd)}: NaN and Infinity are not JSON; give a number"
    changes = sorted(path for path in changing_fields(extra) if not let_through(path, allowed))
    if changes:
        return (f"{', '.join(changes)} would change what is scored (the prompt, the token budget, decoding or the answer's "
                "format), or is not known to leave it as it is; to send it anyway, name it in --extra-body-allow "
                "(evaluation.server.extra_body_allow)")
    return None


def _changes_scoring(name: str, value: Any) -> bool:
    if name in LEAVES_THE_TEXT:
        return False
    neutral = NEUTRAL.get(name)
    return not (neutral is not None and not isinstance(value, bool) and isinstance(value, (int, float)) and value in neutral)
