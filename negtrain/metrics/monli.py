"""The metric of :mod:`negtrain.benchmarks.monli` (its class docstring says what it reports)."""

from __future__ import annotations

from negtrain.metrics.grouped import GroupedAccuracy


class MonliMetric(GroupedAccuracy):
    """MoNLI: ``accuracy`` (the paper's only metric)."""
