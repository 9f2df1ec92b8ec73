"""The ``selection:`` section: the metric that picks the best checkpoint, and what that selection biases."""

from __future__ import annotations

from pydantic import Field

from negtrain.config.section import Section


class SelectionConfig(Section):
    metric: str | None = Field(
        None,
        description="'<benchmark>/<split>/<metric>' that picks the best checkpoint. Whether higher is "
        "better comes from the metric's declaration. Unset: the first eval benchmark's first metric.",
    )


def selection_split(monitor: str | None) -> str | None:
    """``scone/test/accuracy/one_scoped`` -> ``scone/test``: the split a selection metric is computed on."""
    return "/".join(monitor.split("/")[:2]) if monitor else None


def selection_bias_note(monitor: str, epochs: int) -> str:
    """Why the chosen epoch's numbers on the selection metric's own split flatter the model
    (``fit`` prints it, and report and model cards write it, when that split is reported)."""
    split = selection_split(monitor)
    return (
        f"The {split} numbers of the selected epoch are optimistic: {monitor} picked that epoch out of "
        f"{epochs} on the very split it is reported on. The last epoch's numbers are not selected; "
        f"select on a split you do not report for an unbiased figure."
    )
