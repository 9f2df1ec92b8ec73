"""What every recipe section shares: unknown keys rejected, assignments validated, no inf or nan.

And the upper bounds on settings whose size turns into memory or threads, and the one field whose
section is picked from a table (:class:`PickedSection`)."""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator
from pydantic_core import PydanticCustomError


def _is_int_field(annotation: Any) -> bool:
    """``int`` or ``int | None``: a number setting, never a yes/no."""
    if annotation is int:
        return True
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return set(typing.get_args(annotation)) == {int, type(None)}
    return False


class Section(BaseModel):
    # allow_inf_nan=False: `1e999` is YAML for inf, which passes `gt=0`; no setting means inf or nan.
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_a_number(cls, value: Any, info) -> Any:
        # pydantic reads true as 1: `seed: true` would silently be seed 1.
        if isinstance(value, bool) and _is_int_field(cls.model_fields[info.field_name].annotation):
            raise ValueError("expected a whole number, not a yes/no")
        return value


#: Upper bounds on settings whose size turns into memory or threads: past them a run does not
#: fail, it exhausts the machine (an epoch of 10^13 examples is an index array of 80 TB).
MAX_SOURCE_WEIGHT = 1e6
MIN_TEMPERATURE, MAX_TEMPERATURE = 0.01, 1000.0
MAX_EPOCH_EXAMPLES = 100_000_000
MAX_TORCH_THREADS = 1024
#: Tokens per input: past every model's context (the longest are a few million tokens).
MAX_LENGTH = 2**24


class PickedSection:
    """A field whose section class is picked at validation time from a live table, by one key of
    the raw mapping: the model section, picked by ``family`` from the table of families.

    It sits in the field's ``Annotated`` metadata and is read three ways: validation picks the
    class through :meth:`validate`; the unknown-key check (``suggestions.py``) and
    ``is_text_field`` read every member through :attr:`table`. All three read the table when they
    run, not when the schema was built, so a row added to it later (``register_family``) is
    validated, checked and suggested like the rows it shipped with.
    """

    def __init__(self, table: Mapping[str, type[BaseModel]], key: str, default: str) -> None:
        self.table = table
        self.key = key
        self.default = default

    def tag(self, raw: Any) -> Any:
        """The table key ``raw`` (a mapping or a section) names; unset: the default."""
        if isinstance(raw, dict):
            return raw.get(self.key, self.default)
        return getattr(raw, self.key, self.default)

    def validate(self, raw: Any) -> Any:
        if isinstance(raw, BaseModel):  # already a section: a copy, or an assignment of one
            return raw
        tag = self.tag(raw)
        if not isinstance(tag, str) or tag not in self.table:
            raise PydanticCustomError(
                "unknown_tag", "Input should be {expected} (got {got})", {"expected": self.expected(), "got": repr(tag)}
            )
        return self.table[tag].model_validate(raw)

    def expected(self) -> str:
        """``'a', 'b' or 'c'``: the table's keys as an error message lists them."""
        names = [f"'{name}'" for name in self.table]
        return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
