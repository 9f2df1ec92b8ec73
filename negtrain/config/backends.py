"""The table of evaluation backends: what answers a report card's requests.

``hf`` is the in-process backend: the model is loaded here and scored through Lightning, as
``fit`` and ``validate`` score it. Every other backend is a row of :data:`BACKENDS` (``openai``: a
server; ``transformers``: the model loaded here, answering the same requests): a name and
its factory, named as ``"module:function"`` (like a family's builder), so the command line and
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

#: The in-process backend (not a row: it loads the model here rather than answering requests).
IN_PROCESS = "hf"

#: Backend name -> its factory, ``"module:function"`` (imported only when a card uses it) or the
#: function itself (a registered one). Read when used, never copied at import.
BACKENDS: dict[str, str | Callable[..., Any]] = {
    "openai": "negtrain.serving.openai:open_openai",
    # The model loaded in this process, answering the same requests as a server (the served path).
    "transformers": "negtrain.serving.in_process:open_in_process",
}
#: The backends that load the model here and send no request, so a server's ``extra_body`` would
#: be ignored: refused with them.
SENDS_NO_REQUEST_BODY = frozenset({"transformers"})
#: The backends that ship; :func:`unregister_backend` removes only those added at run time.
SHIPPED_BACKENDS = frozenset(BACKENDS)


def backend_names() -> tuple[str, ...]:
    """Every backend a card or recipe can name (``--backend``, ``evaluation.backend``), ``hf`` first."""
    return (IN_PROCESS, *BACKENDS)


def check_backend(name: str) -> str:
    """``name`` when the table has it; else an error with the closest name (did you mean)."""
    if name != IN_PROCESS and name not in BACKENDS:
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
    if name == IN_PROCESS or name in BACKENDS:
        raise ConfigError(f"register_backend: the table already has a backend '{name}'")
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
    if name == IN_PROCESS or name in SHIPPED_BACKENDS:
        raise ConfigError(f"unregister_backend: '{name}' ships with negtrain and stays in the table")
    if name not in BACKENDS:
        raise ConfigError(f"unregister_backend: no backend '{name}' was registered")
    del BACKENDS[name]
