"""The table of evaluation backends: what answers a report card's requests.

Every backend is a row of :data:`BACKENDS`: ``hf`` (the default), the model loaded in this
process; ``transformers``, the same backend under the name lm-evaluation-harness users know;
``openai``, a model behind an OpenAI-compatible server. A row is a name and its factory, named as ``"module:function"`` (like a family's builder), so the command line and
the recipe check a name without importing the backend, and nothing registers on import. The
factory takes a :class:`negtrain.serving.backend.BackendContext` (the model's name, the
``evaluation.server`` section, the response cache) and returns a
:class:`negtrain.serving.backend.Backend`: an object that answers the typed requests of
:mod:`negtrain.engine.requests` (a greedy generation, a continuation's log-likelihood), batched.

A backend kept outside the package (a plugin's, or a test's: tests/test_table_backend.py) is one
call, :func:`register_backend`, made before the command runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from negtrain.core.errors import ConfigError, unknown_name
from negtrain.core.plugins import PluginTable

#: The default backend: the model loaded in this process. It answers the language-model families'
#: requests like any row; a classifier (NLI) or masked LM, whose head or masked token is not a text
#: request, is scored through its Lightning module by it (ARCHITECTURE.md, "One engine").
IN_PROCESS = "hf"

#: Backend name -> its factory, ``"module:function"`` (imported only when a card uses it) or the
#: function itself (a registered one). Read when used, never copied at import: its first read loads
#: the installed plugins, which may add rows (negtrain.core.plugins).
BACKENDS: PluginTable[str, str | Callable[..., Any]] = PluginTable("backend", {
    # The model loaded in this process (any language-model family, a run directory, adapters,
    # --truncate left, chat templates, cloze probes), answering the typed requests.
    IN_PROCESS: "negtrain.serving.in_process:open_in_process",
    "openai": "negtrain.serving.openai:open_openai",
    # The same backend as hf, under lm-evaluation-harness's name for it.
    "transformers": "negtrain.serving.in_process:open_in_process",
})
#: The backends that load the model in this process: they take a run directory, an adapter, any
#: family and --truncate left, and send no request, so a server's ``extra_body`` would be ignored.
IN_THIS_PROCESS = frozenset({IN_PROCESS, "transformers"})
SENDS_NO_REQUEST_BODY = IN_THIS_PROCESS
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


def register_backend(name: str, factory: str | Callable[..., Any]) -> str:
    """Add a backend to the table, at run time, and return its name.

    ``factory`` is ``"module:function"`` or the function: called with a ``BackendContext``, it
    returns an object answering :mod:`negtrain.engine.requests` (see
    :class:`negtrain.serving.backend.Backend`). From then on ``evaluate --backend NAME`` and a
    recipe's ``evaluation.backend: NAME`` take it like a shipped backend. Called explicitly
    (nothing registers on import); :func:`unregister_backend` takes it out again.
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
    BACKENDS[name] = factory
    return name


def unregister_backend(name: str) -> None:
    """Take a backend added by :func:`register_backend` out of the table (the shipped ones stay)."""
    if name in SHIPPED_BACKENDS:
        raise ConfigError(f"unregister_backend: '{name}' ships with negtrain and stays in the table")
    if name not in BACKENDS:
        raise ConfigError(f"unregister_backend: no backend '{name}' was registered")
    del BACKENDS[name]
