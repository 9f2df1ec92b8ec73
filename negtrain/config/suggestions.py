"""Unknown-key checking with suggestions.

Pydantic would reject an unknown key too, but could not say which known key was meant, and a
typo in a 10-epoch recipe deserves a precise answer."""

from __future__ import annotations

import difflib
import typing
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from negtrain.config.section import PickedSection
from negtrain.core.errors import ConfigError


def model_class(annotation: Any) -> type[BaseModel] | None:
    """The BaseModel inside an annotation such as ``X``, ``list[X]`` or ``X | None``."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = model_class(arg)
        if found is not None:
            return found
    return None


def picked_sections(field: FieldInfo) -> PickedSection | None:
    """For a field whose section is picked from a table (the model section, per family): how it
    is picked, with the table as it is now. None for any other field."""
    return next((m for m in field.metadata if isinstance(m, PickedSection)), None)


def field_sections(field: FieldInfo) -> list[type[BaseModel]]:
    """Every section a field may hold: each row of its table when it is picked from one, else the
    one inside."""
    picked = picked_sections(field)
    if picked is not None:
        return list(picked.table.values())
    found = model_class(field.annotation)
    return [found] if found is not None else []


def _is_mapping_of_models(annotation: Any) -> bool:
    if typing.get_origin(annotation) is dict:
        return True
    return any(_is_mapping_of_models(a) for a in typing.get_args(annotation))


def _field_paths(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every dotted key of ``model``'s sections, e.g. ``model.learning_rate`` (lists and free-form
    mappings are not entered: their items have no fixed path)."""
    paths = []
    for name, field in model.model_fields.items():
        dotted = f"{prefix}.{name}" if prefix else name
        paths.append(dotted)
        origin = typing.get_origin(field.annotation)
        inner = [typing.get_origin(a) for a in typing.get_args(field.annotation)]
        if not _is_mapping_of_models(field.annotation) and list not in (origin, *inner):
            for sub in field_sections(field):
                paths += [p for p in _field_paths(sub, dotted) if p not in paths]
    return paths


def _suggestion(key: str, fields: typing.Iterable[str], root: type[BaseModel]) -> str:
    """A "did you mean" for an unknown key: the closest field of its own section, or a key of the
    same name in another section of ``root`` (the whole recipe) when that is closer
    (``--lerning_rate`` means ``model.learning_rate``)."""

    def best(word: str, choices: list[str], cutoff: float) -> tuple[float, str | None]:
        close = difflib.get_close_matches(word, choices, n=1, cutoff=cutoff)
        return (difflib.SequenceMatcher(None, word, close[0]).ratio(), close[0]) if close else (0.0, None)

    own_score, own = best(key, list(fields), 0.5)
    by_leaf: dict[str, str] = {}
    for path in _field_paths(root):
        if "." in path:
            by_leaf.setdefault(path.rsplit(".", 1)[-1], path)
    leaf_score, leaf = best(key, list(by_leaf), 0.75)
    if leaf is not None and leaf_score > own_score:
        return f" (did you mean '{by_leaf[leaf]}'?)"
    return f" (did you mean '{own}'?)" if own is not None else ""


def check_keys(raw: Any, model: type[BaseModel], where: str, prefix: str = "", root: type[BaseModel] | None = None) -> None:
    """Raise a ConfigError naming the first key of ``raw`` that ``model`` does not have, with the
    closest known key; ``root`` is the schema the search for that key starts from (default: ``model``)."""
    root = root or model
    if isinstance(raw, list):
        for i, item in enumerate(raw):
            check_keys(item, model, where, f"{prefix}[{i}]", root)
        return
    if not isinstance(raw, dict):
        return
    fields = model.model_fields
    for key, value in raw.items():
        dotted = f"{prefix}.{key}" if prefix else str(key)
        if key not in fields:
            raise ConfigError(f"{where}: unknown key '{dotted}'{_suggestion(str(key), fields, root)}")
        annotation = fields[key].annotation
        picked = picked_sections(fields[key])
        if picked is not None:
            _check_picked(value, picked, where, dotted, root)
            continue
        sub = model_class(annotation)
        if sub is not None and _is_mapping_of_models(annotation):
            # dict[str, Model]: the keys are free (e.g. sweep parameter names), the values are checked.
            if isinstance(value, dict):
                for name, item in value.items():
                    check_keys(item, sub, where, f"{dotted}.{name}", root)
        elif sub is not None:
            check_keys(value, sub, where, dotted, root)


def _check_picked(raw: Any, picked: PickedSection, where: str, prefix: str, root: type[BaseModel]) -> None:
    """Check a picked section (the model section of one family) against the row its key picks; a
    key that only other rows have is named with the rows that have it. A key that picks no row is
    left to validation, which names the valid ones."""
    if not isinstance(raw, dict):
        return
    tag = picked.tag(raw)
    section = picked.table.get(tag) if isinstance(tag, str) else None
    if section is None:
        return
    tag_key = f"{prefix}.{picked.key}"
    for key in raw:
        if key not in section.model_fields:
            owners = [name for name, other in picked.table.items() if key in other.model_fields]
            if owners:
                raise ConfigError(f"{where}: '{prefix}.{key}' is a setting of {tag_key} {' and '.join(owners)}, not of {tag_key} '{tag}'")
    check_keys(raw, section, where, prefix, root)
