"""A model family as the training floor uses it: its settings section and its builder.

The table of families is :data:`negtrain.config.FAMILY_SECTIONS`, on the config floor: each row is
a family's settings section, which declares what the family can do and names its builder
(``builder = "negtrain.models.<module>:<function>"``), so the command line and the scoring matrix
read families without importing torch. This module turns a row into a :class:`Family` whose
builder is imported here, on the builders' own floor, when a run is built. The builder takes the
validated recipe and its loaded benchmark data and returns the family's LightningModule and
DataModule (:class:`negtrain.models.contract.Built`).

No code outside the table compares a family's name: it asks the family (tests/test_layers.py
checks). Adding a family: its settings section with one row in the table, and its builder module;
ARCHITECTURE.md, "How to add", says where.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from negtrain.config import FAMILY_SECTIONS, ModelSection
from negtrain.core.errors import ConfigError, unknown_name
from negtrain.models.contract import Built


@dataclass(frozen=True)
class Family:
    #: The family's settings section; its ``family`` default is the family's name.
    settings: type[ModelSection]

    @property
    def name(self) -> str:
        return self.settings.model_fields["family"].default

    @property
    def build(self) -> Callable[..., Built]:
        """(recipe, loaded data) -> Built: the section's ``builder``, imported when first asked for."""
        return resolve_builder(self.settings)


def resolve_builder(settings: type[ModelSection]) -> Callable[..., Built]:
    """The function a section's ``builder`` names (``"module:function"``), or the function itself."""
    named = settings.builder
    if callable(named):
        return named
    module_name, _, function = named.partition(":")
    try:
        found = getattr(importlib.import_module(module_name), function)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"{settings.__name__}.builder '{named}' names no importable function ({exc})") from exc
    if not callable(found):
        raise ConfigError(f"{settings.__name__}.builder '{named}' is not a function")
    return found


def get_family(name: str) -> Family:
    try:
        return Family(FAMILY_SECTIONS[name])
    except KeyError:
        raise unknown_name("model family", name, FAMILY_SECTIONS) from None
