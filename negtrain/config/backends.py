"""The table of evaluation backends: what answers a report card's requests.

Every backend is a row of :data:`BACKENDS`: ``hf`` (the default), the model loaded in this
process; ``transformers``, the same backend under the name lm-evaluation-harness users know;
``openai``, a model behind an OpenAI-compatible server. A row (:class:`BackendRow`) is its factory,
named as ``"module:function"`` (like a family's builder), so the command line and the recipe check
a name without importing the backend, and what the backend is (whether it loads the model here,
needs a server, where a chat's template is applied), which every caller asks instead of comparing
names: no code outside this module names a backend (tests/test_backend_contract.py). Nothing
registers on import. The
factory takes a :class:`negtrain.serving.backend.BackendContext` (the model's name, the
``evaluation.server`` section, the response cache) and returns a
:class:`negtrain.serving.backend.Backend`: an object that answers the typed requests of
:mod:`negtrain.engine.requests` (a greedy generation, a continuation's log-likelihood), batched.

A backend kept outside the package (a plugin's, or a test's: tests/test_table_backend.py) is one
call, :func:`register_backend`, made before the command runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from negtrain.core.errors import ConfigError, unknown_name
from negtrain.core.plugins import PluginTable


@dataclass(frozen=True)
class BackendRow:
    """One backend: its factory and what it is, declared, so that the command line, the recipe
    and the engine ask the row instead of comparing backend names.

    - ``loads_here``: it loads the model in this process, so it takes a run directory, an adapter,
      any family and ``--truncate left``, and sends no request (a server's ``extra_body`` would be
      ignored); a classifier (NLI) or masked LM, whose head or masked token is not a text request,
      is scored through its Lightning module by it (ARCHITECTURE.md, "One engine").
    - ``needs_server``: it answers through the ``evaluation.server`` section (``--base-url``),
      which it cannot run without.
    - ``chat_template``: where a ``--chat`` prompt's template is applied, as a card says it:
      ``"tokenizer"`` (the model's, here), ``"server"`` (the server's, through its chat endpoint), or
      None (the backend's own business, said as such).
    """

    factory: str | Callable[..., Any]
    loads_here: bool = False
    needs_server: bool = False
    chat_template: Literal["tokenizer", "server"] | None = None


#: The backend a card and a recipe use when they name none: the model loaded in this process.
DEFAULT_BACKEND = "hf"

#: Backend name -> its row. A factory is ``"module:function"`` (imported only when a card uses it)
#: or the function itself (a registered one). Read when used, never copied at import: its first
#: read loads the installed plugins, which may add rows (negtrain.core.plugins).
BACKENDS: PluginTable[str, BackendRow] = PluginTable("backend", {
    # The model loaded in this process (any language-model family, a run directory, adapters,
    # --truncate left, chat templates, cloze probes), answering the typed requests.
    DEFAULT_BACKEND: BackendRow("negtrain.serving.in_process:open_in_process", loads_here=True, chat_template="tokenizer"),
    "openai": BackendRow("negtrain.serving.openai:open_openai", needs_server=True, chat_template="server"),
    # The same backend as hf, under lm-evaluation-harness's name for it.
    "transformers": BackendRow("negtrain.serving.in_process:open_in_process", loads_here=True, chat_template="tokenizer"),
})
#: The backends that ship; :func:`unregister_backend` removes only those added at run time.
SHIPPED_BACKENDS = BACKENDS.shipped


def backend_names() -> tuple[str, ...]:
    """Every backend a card or recipe can name (``--backend``, ``evaluation.backend``), ``hf`` first."""
    return tuple(BACKENDS)


def check_backend(name: str) -> str:
    """``name`` when the table has it; else an error with the closest name (did you mean)."""
    if name not in BACKENDS:
        raise unknown_name("backend", name, backend_names())
    return name


def backend_row(name: str) -> BackendRow:
    """Backend ``name``'s row (an error with the closest name when the table has none)."""
    return BACKENDS[check_backend(name)]


def loads_here(name: str) -> bool:
    """Whether backend ``name`` loads the model in this process (False for a name the table lacks,
    which :func:`check_backend` refuses where it is checked)."""
    row = BACKENDS.get(name)
    return row is not None and row.loads_here


def register_backend(name: str, factory: str | Callable[..., Any], *, loads_here: bool = False, needs_server: bool = False,
                     chat_template: Literal["tokenizer", "server"] | None = None) -> str:
    """Add a backend to the table, at run time, and return its name.

    ``factory`` is ``"module:function"`` or the function: called with a ``BackendContext``, it
    returns a :class:`negtrain.serving.backend.Backend` answering :mod:`negtrain.engine.requests`
    (a backend whose model is not here subclasses :class:`negtrain.serving.backend.BackendBase`
    for the abilities it lacks). The keywords are its row (:class:`BackendRow`): one that loads the
    model here says ``loads_here=True``. From then on ``evaluate --backend NAME`` and a recipe's
    ``evaluation.backend: NAME`` take it like a shipped backend. Called explicitly (nothing
    registers on import); :func:`unregister_backend` takes it out again.
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ConfigError(f"register_backend: a backend's name is a word (letters, digits, _), got {name!r}")
    if name in BACKENDS:
        held = "ships with negtrain" if name in SHIPPED_BACKENDS else f"was added by {BACKENDS.origin(name) or 'a register_backend call'}"
        raise ConfigError(f"register_backend: the table already has a backend '{name}' ({held})")
    if isinstance(factory, str):
        module, _, function = factory.partition(":")
        if not module or not function:
            raise ConfigError(f"register_backend: {name}'s factory must be 'module:function' or the function, got {factory!r}")
    elif not callable(factory):
        raise ConfigError(f"register_backend: {name}'s factory must be 'module:function' or the function, got {factory!r}")
    if chat_template not in (None, "tokenizer", "server"):
        raise ConfigError(f"register_backend: {name}'s chat_template is 'tokenizer', 'server' or None, got {chat_template!r}")
    BACKENDS[name] = BackendRow(factory, loads_here=loads_here, needs_server=needs_server, chat_template=chat_template)
    return name


def unregister_backend(name: str) -> None:
    """Take a backend added by :func:`register_backend` out of the table (the shipped ones stay)."""
    if name in SHIPPED_BACKENDS:
        raise ConfigError(f"unregister_backend: '{name}' ships with negtrain and stays in the table")
    if name not in BACKENDS:
        raise ConfigError(f"unregister_backend: no backend '{name}' was registered")
    del BACKENDS[name]
