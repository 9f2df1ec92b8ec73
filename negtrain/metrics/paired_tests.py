"""Exact paired tests and multiple-comparison control, in the standard library only.

- :func:`mcnemar_exact`: McNemar's exact test on per-example correctness of two systems on the
  same items: of the discordant pairs (one right, the other wrong), ``b`` favour A and ``c`` favour
  B; under the null each discordant pair goes either way with probability 1/2, so the two-sided p
  is the binomial test of ``c`` successes in ``b + c`` trials at p = 0.5 (as
  ``scipy.stats.binomtest(c, b + c, 0.5).pvalue``). No discordant pair: p = 1 (nothing speaks
  against the null; scipy refuses n = 0).
- :func:`holm` (Holm–Bonferroni, controls the family-wise error rate) and
  :func:`benjamini_hochberg` (controls the false discovery rate): adjusted p-values over all the
  comparisons of one table, so that one of twenty differences is not "significant" by chance.

The binomial sum is computed in integers, exactly, and divided once: no rounding accumulates
however many discordant pairs there are.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

#: The adjustments ``compare --adjust`` and ``view`` name; the first is the default.
ADJUSTMENTS = {"holm": "Holm–Bonferroni", "bh": "Benjamini–Hochberg"}


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p for ``b`` pairs A-right/B-wrong and ``c`` pairs A-wrong/B-right."""
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be >= 0, got {b} and {c}")
    n, k = b + c, min(b, c)
    if n == 0 or 2 * k == n:
        return 1.0
    # P(X <= k) for X ~ Binomial(n, 1/2), doubled: the binomial is symmetric at 1/2, so the
    # outcomes as unlikely as k are those <= k and >= n - k (scipy's two-sided rule).
    term, total = 1, 1  # C(n, 0)
    for i in range(k):
        term = term * (n - i) // (i + 1)
        total += term
    return min(1.0, total / (1 << (n - 1)))


def _checked(pvalues: Sequence[float]) -> list[float]:
    out = [float(p) for p in pvalues]
    for p in out:
        if not (0.0 <= p <= 1.0):
            raise ValueError(f"a p-value must be in [0, 1], got {p}")
    return out


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values, in the order given: the i-th smallest p (from 1) times
    m − i + 1, made non-decreasing along that order, capped at 1."""
    p = _checked(pvalues)
    m = len(p)
    out = [0.0] * m
    running = 0.0
    for rank, i in enumerate(sorted(range(m), key=lambda j: p[j])):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out


def benjamini_hochberg(pvalues: Sequence[float]) -> list[float]:
    """Benjamini–Hochberg adjusted p-values (q-values), in the order given: the i-th smallest p
    times m / i, made non-decreasing from the largest down, capped at 1."""
    p = _checked(pvalues)
    m = len(p)
    out = [0.0] * m
    running = 1.0
    order = sorted(range(m), key=lambda j: p[j])
    for rank in range(m - 1, -1, -1):
        i = order[rank]
        running = min(running, m * p[i] / (rank + 1))
        out[i] = min(1.0, running)
    return out


def adjusted(pvalues: Sequence[float | None], method: str) -> list[float | None]:
    """``method``'s adjustment (a key of :data:`ADJUSTMENTS`) over the p-values that exist; a
    comparison with no p (None or NaN: no test possible) stays None and is not counted in m."""
    if method not in ADJUSTMENTS:
        raise ValueError(f"unknown adjustment {method!r}; choose from {', '.join(ADJUSTMENTS)}")
    present = [i for i, p in enumerate(pvalues) if p is not None and not math.isnan(p)]
    adjust = holm if method == "holm" else benjamini_hochberg
    values = adjust([p for p in pvalues if p is not None and not math.isnan(p)])  # the p of each of present
    out: list[float | None] = [None] * len(pvalues)
    for i, v in zip(present, values, strict=False):
        out[i] = v
    return out
