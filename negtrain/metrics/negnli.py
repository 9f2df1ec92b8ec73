"""The metric of :mod:`negtrain.benchmarks.negnli` (its class docstring says what it reports)."""

from __future__ import annotations

from negtrain.metrics.grouped import GroupedAccuracy


class NegnliMetric(GroupedAccuracy):
    """NegNLI: ``accuracy``, ``accuracy/<pair type>`` for Tneg-H, T-Hneg and Tneg-Hneg (the paper's
    tables), and ``consistency``: the fraction of groups whose three rows are all right. The three
    rewrites of one original pair are one independent unit for the bootstrap."""

    resampling_unit = "original pair"
