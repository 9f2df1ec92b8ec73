"""McNemar's exact test against scipy's binomial test, and the Holm and Benjamini–Hochberg
adjustments against p-values adjusted by hand; `compare` prints raw and adjusted p and names the
adjustment."""

from __future__ import annotations

import pytest
from scipy.stats import binomtest

from negtrain.metrics.paired_tests import adjusted, benjamini_hochberg, holm, mcnemar_exact


@pytest.mark.parametrize("b,c", [(0, 1), (1, 0), (0, 5), (7, 0), (0, 25), (3, 3), (2, 5), (5, 2), (10, 21), (40, 61),
                                 (1, 2), (150, 180), (499, 560)])
def test_mcnemar_equals_scipy_binomtest(b, c):
    assert mcnemar_exact(b, c) == pytest.approx(binomtest(c, b + c, 0.5).pvalue, rel=1e-12, abs=0)


def test_mcnemar_edge_cases():
    # No discordant pair: nothing against the null (scipy refuses n = 0, so the value is ours: 1).
    assert mcnemar_exact(0, 0) == 1.0
    with pytest.raises(ValueError):
        binomtest(0, 0, 0.5)
    # All discordant pairs in one direction: 2 / 2^n, the same whichever side holds them.
    assert mcnemar_exact(0, 10) == mcnemar_exact(10, 0) == pytest.approx(2 / 2**10, rel=1e-15)
    assert mcnemar_exact(0, 1) == 1.0  # one pair can never be significant
    # Thousands of discordant pairs: exact, no underflow to garbage or a value above 1.
    assert mcnemar_exact(5000, 5000) == 1.0
    assert mcnemar_exact(4800, 5200) == pytest.approx(binomtest(5200, 10000, 0.5).pvalue, rel=1e-9)
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 3)


#: Five comparisons, out of order, with a tie, adjusted by hand.
P = [0.04, 0.01, 0.03, 0.005, 0.04]
# Holm: sorted 0.005, 0.01, 0.03, 0.04, 0.04 times 5, 4, 3, 2, 1 = 0.025, 0.04, 0.09, 0.08, 0.04,
# then the running maximum: 0.025, 0.04, 0.09, 0.09, 0.09; back in the given order:
HOLM = [0.09, 0.04, 0.09, 0.025, 0.09]
# BH: sorted times 5/1, 5/2, 5/3, 5/4, 5/5 = 0.025, 0.025, 0.05, 0.05, 0.04, then the running
# minimum from the largest down: 0.025, 0.025, 0.04, 0.04, 0.04; back in the given order:
BH = [0.04, 0.025, 0.04, 0.025, 0.04]


def test_holm_and_bh_on_a_five_comparison_table():
    assert holm(P) == pytest.approx(HOLM, abs=1e-15)
    assert benjamini_hochberg(P) == pytest.approx(BH, abs=1e-15)
    assert holm([0.3, 0.9]) == [0.6, 0.9] and holm([0.6, 0.7]) == [1.0, 1.0]  # capped at 1
    # A comparison with no p is left out of m and stays None.
    assert adjusted([P[0], None, *P[1:]], "holm") == pytest.approx([HOLM[0], None, *HOLM[1:]])
    assert adjusted([P[0], float("nan"), *P[1:]], "bh") == pytest.approx([BH[0], None, *BH[1:]])
    with pytest.raises(ValueError):
        adjusted(P, "bonferroni")
    with pytest.raises(ValueError):
        holm([1.5])
