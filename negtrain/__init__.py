"""negtrain: train and evaluate negation-robust language models.

Importing the package does one thing: it installs the finder that keeps old module paths
importing after a module moved to another package. Users' scripts and plugins import modules by
path (``from negtrain.evaluation.card import ...``, ``monkeypatch.setattr("negtrain.release.export....")``). When a
module moves, its old path stays in :data:`MOVED`, and the finder answers an import of the old
path with the module at the new one: the same module object (not a copy), so a patch through
either name patches both. Nothing is imported until an old path is asked for, and with the table
empty the finder answers nothing. It sits first on ``sys.meta_path``, so that a moved package's
submodules are never loaded a second time from the package's real folder under their old name;
an old path must therefore name no real file (tests/test_moved_modules.py). Importing an old path
warns (``DeprecationWarning``, attributed to the line that imports it, so Python shows it by
default only in a script run as ``__main__``: scripts see it, commands stay quiet).

The table is data: old path on the left, new on the right; an entry may name a package, which
carries its submodules (``negtrain.old.x`` is ``negtrain.new.x``). A module whose path a package
took (``negtrain.runs.reading`` becoming the package ``negtrain/runs/``, its code ``negtrain.runs.reading``)
cannot be an entry: that package's ``__getattr__`` is :func:`package_getattr` instead, so
``from negtrain.runs.reading import read_run`` still works.

It lives here, not in a module of its own, because the package's root is the one place every
import passes through, and so that no floor of ARCHITECTURE.md has to list it.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
import warnings
from collections.abc import Callable, Sequence

__version__ = "0.1.0"

#: old module path -> new module path.
MOVED: dict[str, str] = {
    "negtrain.across_splits": "negtrain.evaluation.across_splits",
    "negtrain.card": "negtrain.evaluation.card",
    "negtrain.card_plan": "negtrain.evaluation.card_plan",
    "negtrain.card_render": "negtrain.evaluation.card_render",
    "negtrain.card_run": "negtrain.evaluation.card_run",
    "negtrain.compare": "negtrain.evaluation.compare",
    "negtrain.errors": "negtrain.core.errors",
    "negtrain.export": "negtrain.release.export",
    "negtrain.hub": "negtrain.release.push",
    "negtrain.hub_access": "negtrain.core.hub_access",
    "negtrain.labels": "negtrain.core.labels",
    "negtrain.local_sweep": "negtrain.runs.local_sweep",
    "negtrain.memory": "negtrain.core.memory",
    "negtrain.paths": "negtrain.core.paths",
    "negtrain.plan": "negtrain.evaluation.plan",
    "negtrain.protocol": "negtrain.evaluation.protocol",
    "negtrain.report": "negtrain.runs.report",
    "negtrain.secrets": "negtrain.core.secrets",
    "negtrain.seeds": "negtrain.runs.seeds",
    "negtrain.served": "negtrain.evaluation.served",
    "negtrain.serving.requests": "negtrain.engine.requests",
    "negtrain.evaluation.served_prompts": "negtrain.engine.prompts",
    "negtrain.server_settings": "negtrain.core.server_settings",
    "negtrain.stop_signals": "negtrain.core.stop_signals",
    "negtrain.sweeps": "negtrain.runs.sweeps",
}


def new_path(old: str) -> str | None:
    """Where the module once at ``old`` is now, by the most specific entry of :data:`MOVED`."""
    if old in MOVED:
        return MOVED[old]
    package = old
    while "." in package:
        package, _, _ = package.rpartition(".")
        if package in MOVED:
            return MOVED[package] + old[len(package):]
    return None


class _Alias(importlib.abc.Loader):
    """Loads an old path as the module at its new path."""

    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        warnings.warn(f"{self.old} moved to {self.new}; import it from there", DeprecationWarning,
                      stacklevel=2)  # warnings skips the import system's frames: the importing line
        # The module itself: the import system keeps its own __name__ and __spec__ (it sets
        # them only where they are missing) and files it in sys.modules under the old path too.
        return importlib.import_module(self.new)

    def exec_module(self, module: types.ModuleType) -> None:
        pass  # already executed under its new path


class MovedFinder(importlib.abc.MetaPathFinder):
    """Finds an old path of :data:`MOVED`; every other name is left to the other finders."""

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        new = new_path(fullname) if fullname.startswith("negtrain.") else None
        if new is None:
            return None
        real = importlib.util.find_spec(new)
        if real is None:
            return None
        return importlib.util.spec_from_loader(fullname, _Alias(fullname, new),
                                               is_package=real.submodule_search_locations is not None)


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, MovedFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, MovedFinder())


def package_getattr(package: str, module: str) -> Callable[[str], object]:
    """The ``__getattr__`` of ``package``, which took the path of the module now at ``module``: a
    name the package lacks, and that is not one of its submodules, is the module's (with a
    DeprecationWarning). Nothing is imported until such a name is asked for."""

    def __getattr__(name: str) -> object:
        if name.startswith("__") or importlib.util.find_spec(f"{package}.{name}") is not None:
            raise AttributeError(name)  # a dunder, or a submodule: the import system's to find
        try:
            value = getattr(importlib.import_module(module), name)
        except AttributeError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        warnings.warn(f"{package}.{name} moved to {module}.{name}; import it from there", DeprecationWarning, stacklevel=2)
        return value

    return __getattr__


install()
