"""Per-class and support-weighted F1, as scikit-learn's ``classification_report`` computes them."""

from __future__ import annotations

import numpy as np


def class_f1(gold: np.ndarray, pred: np.ndarray, num_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-class F1 and support (gold count) over aligned arrays of class ids.

    F1 = 2·TP / (2·TP + FP + FN): 0 when a class is never predicted right, NaN when the class
    occurs neither in ``gold`` nor in ``pred`` (scikit-learn leaves such a class out).
    """
    f1 = np.full(num_classes, np.nan)
    support = np.zeros(num_classes, dtype=np.int64)
    for c in range(num_classes):
        tp = int(((pred == c) & (gold == c)).sum())
        fp = int(((pred == c) & (gold != c)).sum())
        fn = int(((pred != c) & (gold == c)).sum())
        support[c] = tp + fn
        if 2 * tp + fp + fn:
            f1[c] = 2 * tp / (2 * tp + fp + fn)
    return f1, support


def weighted_f1(f1: np.ndarray, support: np.ndarray) -> float:
    """The support-weighted mean of per-class F1 (scikit-learn's "weighted avg")."""
    total = support.sum()
    if not total:
        return float("nan")
    return float(np.nansum(np.where(support > 0, f1 * support, 0.0)) / total)
