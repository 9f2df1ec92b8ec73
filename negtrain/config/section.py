"""What every recipe section shares: unknown keys rejected, assignments validated, no inf or nan.

And the upper bounds on settings whose size turns into memory or threads."""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator


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
