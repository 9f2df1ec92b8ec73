"""The cluster bootstrap against scipy's own bootstrap, on a case without clusters.

When every example is its own unit (MoNLI: no contrast sets), negtrain's cluster bootstrap is the
ordinary percentile bootstrap of the mean. scipy.stats.bootstrap (method="percentile") computes
that independently, with its own random draws, so the two 95% intervals agree up to Monte-Carlo
error: with 20,000 resamples of 400 examples the percentiles move by well under 0.005.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from negtrain.metrics.monli import MonliMetric
from negtrain.metrics.uncertainty import estimate


@pytest.mark.parametrize("right", [380, 200])
def test_the_accuracy_interval_equals_scipys_percentile_bootstrap(right):
    n = 400
    labels = [0] * n
    predictions = np.array([0] * right + [1] * (n - right))  # 0 is right, 1 is wrong
    ours = estimate(MonliMetric(labels=labels), predictions, resamples=20_000, seed=7, is_count=lambda name: name == "n")
    assert ours.unit == "example" and ours.units == n

    outcomes = (predictions == 0).astype(float)
    theirs = stats.bootstrap((outcomes,), np.mean, n_resamples=20_000, method="percentile",
                             confidence_level=0.95, random_state=np.random.default_rng(11)).confidence_interval
    lo, hi = ours.metrics["accuracy"]["ci95"]
    assert lo == pytest.approx(theirs.low, abs=0.005) and hi == pytest.approx(theirs.high, abs=0.005)
    # and both are near the normal approximation, so neither is off by a shared mistake
    p = right / n
    half = 1.96 * np.sqrt(p * (1 - p) / n)
    assert lo == pytest.approx(p - half, abs=0.01) and hi == pytest.approx(p + half, abs=0.01)
