"""The metric of :mod:`negtrain.benchmarks.scone` (its class docstring says what it reports)."""

from __future__ import annotations

from negtrain.metrics.grouped import GroupedAccuracy


class SconeMetric(GroupedAccuracy):
    """ScoNe: ``accuracy``, ``accuracy/<condition>`` (the paper's table), and ``consistency``:
    the fraction of contrast sets whose six examples are all right (not reported in the paper).
    The six members of a contrast set are one independent unit for the bootstrap."""

    resampling_unit = "contrast set"
