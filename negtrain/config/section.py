"""What every recipe section shares: unknown keys rejected, assignments validated, no inf or nan.

And the upper bounds on settings whose size turns into memory or threads."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    # allow_inf_nan=False: `1e999` is YAML for inf, which passes `gt=0`; no setting means inf or nan.
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)


#: Upper bounds on settings whose size turns into memory or threads: past them a run does not
#: fail, it exhausts the machine (an epoch of 10^13 examples is an index array of 80 TB).
MAX_SOURCE_WEIGHT = 1e6
MIN_TEMPERATURE, MAX_TEMPERATURE = 0.01, 1000.0
MAX_EPOCH_EXAMPLES = 100_000_000
MAX_TORCH_THREADS = 1024
