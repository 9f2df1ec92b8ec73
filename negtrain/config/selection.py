"""The ``selection:`` section: which epoch a run keeps (the best by a metric, or the last), and
what that selection biases. No epoch is picked on a test split unless the recipe says so."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field

from negtrain.config.section import Section


class SelectionConfig(Section):
    metric: str | None = Field(
        None,
        description="'<benchmark>/<split>/<metric>' that picks the best checkpoint. Whether higher is "
        "better comes from the metric's declaration. Unset: the first metric of the first eval set that holds no "
        "test rows (recipe.yaml then names it). A split holding test rows (called test, an `all` split, an "
        "evaluation-only set such as monli/pmonli, NegNLI's val15 when its test is reported) is refused unless "
        "allow_test_split is true.",
    )
    epoch: Literal["best", "last"] = Field(
        "best",
        description="best: keep the epoch with the best `metric` (checkpoints/best-epoch<N>.ckpt); last: train "
        "the fixed trainer.max_epochs and keep the last epoch (checkpoints/last.ckpt), selecting nothing, as a "
        "paper that trains a fixed number of epochs does (ScoNe, Appendix A.1).",
    )
    allow_test_split: bool = Field(
        False,
        description="Allow `metric` (and a sweep's metric) on a split holding test rows. Picking an epoch on the split "
        "it is reported on flatters that epoch; every record of such a run says the selection was made on test.",
    )


#: A split called test: ``test``, ``fewshot_test_1``, ``test_matched``, never ``contest``.
_TEST_SPLIT = re.compile(r"(^|_)test(_|$|\d)")


def selection_split(monitor: str | None) -> str | None:
    """``scone/test/accuracy/one_scoped`` -> ``scone/test``: the split a selection metric is computed on."""
    return "/".join(monitor.split("/")[:2]) if monitor else None


def is_test_split(split: str) -> bool:
    """Whether a split (``test``) or a metric's split (``scone/test``, ``scone/test/accuracy``) is a test split."""
    parts = split.split("/")
    name = parts[1] if len(parts) > 1 else parts[0]
    return bool(_TEST_SPLIT.search(name))


def on_test_split(monitor: str | None) -> bool:
    """Whether the selection metric ``monitor`` is computed on a test split."""
    return bool(monitor) and is_test_split(selection_split(monitor) or "")


def selected_on_test_note(monitor: str, where: str | None = None, allowed: bool = True) -> str:
    """What fit says of a run that selected on test rows (a run that set
    ``selection.allow_test_split: true``: negtrain.benchmarks.test_rows.choose_selection, or one
    begun before the rule and resumed as it began, ``allowed`` false); ``where``: why the split
    holds test rows (default: it is a test split)."""
    why = "(selection.allow_test_split: true)" if allowed else "(a run begun before the rule, resumed as it began)"
    return f"selected on test: the epoch was picked by {monitor}, on {where or 'the test split ' + str(selection_split(monitor))} {why}"


def selection_bias_note(monitor: str, epochs: int) -> str:
    """Why the chosen epoch's numbers on the selection metric's own split flatter the model
    (``fit`` prints it, and report and model cards write it, when that split is reported)."""
    split = selection_split(monitor)
    return (
        f"The {split} numbers of the selected epoch are optimistic: {monitor} picked that epoch out of "
        f"{epochs} on the very split it is reported on. The last epoch's numbers are not selected; "
        f"select on a split you do not report for an unbiased figure."
    )
