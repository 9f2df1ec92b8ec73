"""What an eval record says when it was computed in a lower precision than the model's own dtype:
the same words for a family's per-epoch evaluation and for a card answered by the engine."""

from __future__ import annotations

#: trainer.precision values under which a model is evaluated in its own (checkpoint) dtype, with no
#: autocast: ``auto`` (an evaluation never takes bf16 from the hardware, see
#: :func:`negtrain.training.checks.evaluation_precision`) and fp32 itself.
FP32_NUMBERS = ("auto", "32", "32-true")


def precision_note(precision: str) -> str | None:
    """What an eval record says when it was computed in a lower precision than the model's own
    dtype (an explicit ``trainer.precision``), else None."""
    if precision in FP32_NUMBERS:
        return None
    return (f"scored under trainer.precision {precision} (set explicitly): the numbers may differ from the model's "
            "own dtype; the default (auto) evaluates in the checkpoint's dtype on every machine")
