"""The ``evaluation:`` section: how the numbers of every evaluation are qualified."""

from __future__ import annotations

from pydantic import Field

from negtrain.config.section import Section


class EvaluationConfig(Section):
    """How the numbers of every evaluation are qualified (see negtrain/metrics/uncertainty.py)."""

    bootstrap: int = Field(
        1000,
        ge=0,
        description="Resamples of the percentile bootstrap that gives every metric its ci95, drawing the "
        "benchmark's independent units (ScoNe contrast sets, NaN-NLI premises, CondaQA question groups, "
        "...) with replacement. 0 turns it off: no ci95, and stderr only for per-item means. 1,000 "
        "resamples cost under 0.1 s on CondaQA test on 2 CPU cores.",
    )
    bootstrap_seed: int = Field(
        0, ge=0, le=2**32 - 1,
        description="Seed of the bootstrap draws; the same seed and outcomes give the same intervals. "
        "Independent of the recipe's `seed`, so runs with different training seeds are scored on the same resamples.",
    )
    log_samples: bool = Field(
        True,
        description="Write next to every prediction the exact prompt the model saw (after the chat "
        "template) and its response (the generated text, or each label's score). `evaluate --no-log-samples` "
        "turns it off for very large runs.",
    )
