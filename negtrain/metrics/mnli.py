"""The metric of :mod:`negtrain.benchmarks.mnli` (its class docstring says what it reports)."""

from __future__ import annotations

from negtrain.metrics.grouped import GroupedAccuracy


class MnliMetric(GroupedAccuracy):
    """MNLI: ``accuracy`` (matched or mismatched, by split)."""
