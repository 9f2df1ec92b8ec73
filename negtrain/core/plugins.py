"""Plugins: packages installed beside negtrain that add benchmarks, backends, model families or
prompt strategies, with no edit to negtrain.

A plugin is a distribution that declares an entry point in the group ``negtrain.plugins``
(pyproject.toml: ``[project.entry-points."negtrain.plugins"] mine = "my_package:register"``). The
entry point names a function that takes no argument and calls the ``register_*`` functions of the
tables it adds to (``negtrain.benchmarks.registry.register_benchmark``,
``negtrain.config.register_backend``, ``negtrain.config.register_family``,
``negtrain.prompts.strategies.register_strategies``). docs/extending.md shows a complete one.

The tables those functions fill are :class:`PluginTable`\\ s: the first time any of them is read
(looked up, iterated, listed, checked for a name), :func:`load_plugins` runs every installed
plugin's function, once per process. So a command that reads no table (``--help``, ``env``) pays
nothing, not even the scan of the installed distributions, and every reader of a table, whichever
path it is on (a card, a recipe, a DDP rank, a sweep's trial), sees what the plugins added.

A plugin that cannot be loaded (its module fails to import, its function raises, it adds a name a
table already has) is one line on stderr naming the plugin and its error, and adds nothing: what it
had registered before the error is taken out again. The command goes on without it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import TypeVar

from negtrain.core.errors import NegtrainError

#: The entry-point group a plugin declares its function in.
GROUP = "negtrain.plugins"

K = TypeVar("K")
V = TypeVar("V")


@dataclass
class Plugin:
    """One installed plugin, as loaded in this process."""

    #: The entry point's name and value (``"my_package:register"``).
    entry_point: str
    value: str
    #: The distribution that declares it (what a listing marks its rows with) and its version.
    distribution: str
    version: str
    #: What it added: (kind of row, name), in the order it registered them.
    added: list[tuple[str, str]] = field(default_factory=list)
    #: Why it was not loaded (one line); None when it was.
    error: str | None = None

    @property
    def label(self) -> str:
        """``my-plugin 0.1`` (entry point ``mine``): how a listing or an error names it."""
        return f"{self.distribution} {self.version}".strip()


#: The plugins loaded in this process (None: not yet); the one whose function runs now, and the
#: rows it wrote so far (taken out again if it fails).
_loaded: list[Plugin] | None = None
_current: Plugin | None = None
_written: list[tuple[PluginTable, object]] = []


class PluginTable(dict[K, V]):
    """A table of negtrain's (benchmarks, backends, families, strategy files) that plugins may add
    rows to. It is a dict; reading it first loads the installed plugins (:func:`load_plugins`),
    and it keeps which rows shipped with negtrain and which plugin added each other row."""

    def __init__(self, kind: str, rows: dict[K, V]) -> None:
        super().__init__(rows)
        #: What a row is, in a listing and an error ("benchmark", "backend").
        self.kind = kind
        #: The rows negtrain ships (never unregistered, never replaced).
        self.shipped: frozenset[K] = frozenset(rows)
        #: Row name -> the distribution of the plugin that added it.
        self.origins: dict[K, str] = {}

    def origin(self, key: K) -> str | None:
        """The distribution of the plugin that added row ``key``; None: shipped, or registered by code."""
        load_plugins()
        return self.origins.get(key)

    # Every read loads the plugins first; a write records which plugin made it.
    def __getitem__(self, key: K) -> V:
        load_plugins()
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        load_plugins()
        return super().__contains__(key)

    def __iter__(self) -> Iterator[K]:
        load_plugins()
        return super().__iter__()

    def __len__(self) -> int:
        load_plugins()
        return super().__len__()

    def get(self, key: K, default=None):  # type: ignore[override]  # dict.get's overloads, one body
        load_plugins()
        return super().get(key, default)

    def keys(self):  # type: ignore[override]  # the same view dict gives, after loading
        load_plugins()
        return super().keys()

    def values(self):  # type: ignore[override]  # the same view dict gives, after loading
        load_plugins()
        return super().values()

    def items(self):  # type: ignore[override]  # the same view dict gives, after loading
        load_plugins()
        return super().items()

    def copy(self) -> dict[K, V]:  # type: ignore[override]  # a plain dict of the rows, after loading
        load_plugins()
        return dict(super().items())

    def __setitem__(self, key: K, value: V) -> None:
        super().__setitem__(key, value)
        if _current is not None:
            self.origins[key] = _current.distribution
            _current.added.append((self.kind, str(key)))
            _written.append((self, key))

    def __delitem__(self, key: K) -> None:
        super().__delitem__(key)
        self.origins.pop(key, None)


def load_plugins() -> list[Plugin]:
    """Run every installed plugin's function, once per process (later calls, and calls made while
    the plugins load, return at once); the plugins, loaded or not, in the order they ran."""
    global _loaded
    if _loaded is not None:
        return _loaded
    _loaded = []  # set first: a plugin's own reads of the tables must not load the plugins again
    for point in sorted(entry_points(group=GROUP), key=lambda p: (_distribution(p)[0], p.name)):
        _loaded.append(_load(point))
    return _loaded


def _distribution(point: EntryPoint) -> tuple[str, str]:
    dist = point.dist
    return (dist.name, dist.version) if dist is not None else ("(unknown distribution)", "")


def _load(point: EntryPoint) -> Plugin:
    global _current
    name, version = _distribution(point)
    plugin = Plugin(entry_point=point.name, value=point.value, distribution=name, version=version)
    _current = plugin
    _written.clear()
    try:
        register = point.load()
        if not callable(register):
            raise NegtrainError(f"{point.value} is not a function (the entry point names the function that registers)")
        register()
    except Exception as exc:  # any failure of someone else's code: one line, and the command goes on
        _take_out(plugin)
        detail = str(exc) if isinstance(exc, NegtrainError) else f"{type(exc).__name__}: {exc}"
        plugin.error = " ".join(detail.split())
        print(f"negtrain: plugin {plugin.entry_point} ({plugin.label}, {point.value}) not loaded: {plugin.error}",
              file=sys.stderr, flush=True)
    finally:
        _current = None
    return plugin


def _take_out(plugin: Plugin) -> None:
    """Remove every row ``plugin`` added before it failed: a plugin is loaded whole or not at all."""
    for table, key in reversed(_written):
        if dict.__contains__(table, key):
            dict.__delitem__(table, key)
            table.origins.pop(key, None)  # type: ignore[call-overload]  # a key of this table
    _written.clear()
    plugin.added.clear()


def plugin_lines() -> list[str]:
    """What the installed plugins added, for ``evaluate --list`` and ``recipes``: a heading and one
    line per plugin (what it added, or why it was not loaded); nothing when none is installed."""
    found = load_plugins()
    if not found:
        return []
    lines = [f"plugins (installed packages with a '{GROUP}' entry point; docs: Extending)"]
    for plugin in found:
        if plugin.error is not None:
            lines.append(f"  {plugin.label} ({plugin.entry_point}): not loaded: {plugin.error}")
            continue
        added: dict[str, list[str]] = {}
        for kind, name in plugin.added:
            added.setdefault(kind, []).append(name)
        what = "; ".join(f"{kind} {', '.join(names)}" for kind, names in added.items()) or "nothing"
        lines.append(f"  {plugin.label} ({plugin.entry_point}): {what}")
    return lines


def plugin_mark(table: PluginTable, key: object) -> str:
    """`` (plugin my-plugin)`` after a row a plugin added; empty for a shipped or registered one."""
    origin = table.origin(key)  # type: ignore[arg-type]  # a key of the table, as listed
    return f" (plugin {origin})" if origin else ""
