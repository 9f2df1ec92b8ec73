"""The ``evaluation:`` section: how the numbers of every evaluation are qualified."""

from __future__ import annotations

from pydantic import Field

from negtrain.config.section import Section


#: The most bootstrap resamples anything draws: intervals settle long before (1,000 are the
#: default); 100,000 take seconds per benchmark split, a billion would take hours.
MAX_BOOTSTRAP = 100_000


class EvaluationConfig(Section):
    """How the numbers of every evaluation are qualified (see negtrain/metrics/uncertainty.py)."""

    bootstrap: int = Field(
        1000,
        ge=0,
        le=MAX_BOOTSTRAP,
        description="Resamples of the percentile bootstrap that gives every metric its ci95, drawing the "
        "benchmark's independent units (ScoNe contrast sets, NaN-NLI premises, CondaQA question groups, "
        "...) with replacement. 0 turns it off: no ci95, and stderr only for per-item means. 1,000 "
        "resamples cost under 0.1 s on CondaQA test on 2 CPU cores; at most 100,000.",
    )
    bootstrap_seed: int = Field(
        0, ge=0, le=2**32 - 1,
        description="Seed of the bootstrap draws; the same seed and outcomes give the same intervals. "
        "Independent of the recipe's `seed`, so runs with different training seeds are scored on the same resamples.",
    )
