"""Per-class and support-weighted F1, as scikit-learn's ``classification_report`` computes them,
from confusion counts (so a bootstrap recomputes F1 from resampled counts, never averages it)."""

from __future__ import annotations

import numpy as np


def confusion_columns(gold: np.ndarray, pred: np.ndarray, seen: np.ndarray, num_classes: int, prefix: str) -> dict[str, np.ndarray]:
    """Per-example indicators ``<prefix>/<g>/<p>``: seen, gold class g, predicted class p."""
    return {
        f"{prefix}/{g}/{p}": seen & (gold == g) & (pred == p)
        for g in range(num_classes)
        for p in range(num_classes)
    }


def confusion_from_totals(totals, num_classes: int, prefix: str) -> np.ndarray:
    """The (..., gold, pred) confusion matrix from totals of :func:`confusion_columns`."""
    rows = [[np.asarray(totals[f"{prefix}/{g}/{p}"], dtype=np.float64) for p in range(num_classes)] for g in range(num_classes)]
    return np.stack([np.stack(r, axis=-1) for r in rows], axis=-2)


def class_f1(confusion: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-class F1 and support (gold count) from a (..., gold, pred) confusion matrix.

    F1 = 2·TP / (2·TP + FP + FN): 0 when a class is never predicted right, NaN when the class
    occurs neither in gold nor in the predictions (scikit-learn leaves such a class out).
    """
    tp = np.diagonal(confusion, axis1=-2, axis2=-1)
    support = confusion.sum(axis=-1)  # per gold class: TP + FN
    predicted = confusion.sum(axis=-2)  # per predicted class: TP + FP
    den = support + predicted  # 2·TP + FP + FN
    f1 = np.where(den > 0, 2 * tp / np.where(den > 0, den, 1.0), np.nan)
    return f1, support


def weighted_f1(f1: np.ndarray, support: np.ndarray) -> np.ndarray:
    """The support-weighted mean of per-class F1 (scikit-learn's "weighted avg"); NaN when empty."""
    total = support.sum(axis=-1)
    weighted = np.where(support > 0, np.nan_to_num(f1) * support, 0.0).sum(axis=-1)
    return np.where(total > 0, weighted / np.where(total > 0, total, 1.0), np.nan)


def macro_prf(confusion: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Macro-averaged precision, recall and F1, as scikit-learn's ``precision_recall_fscore_support``
    with ``average="macro"`` (and its "macro avg" row of ``classification_report``): the unweighted
    mean over the classes found in the gold labels or the predictions; a class never predicted has
    precision 0, one never in gold recall 0, and F1 is each class's 2·P·R / (P + R) (0 when both are
    0), averaged. NaN when nothing was scored."""
    tp = np.diagonal(confusion, axis1=-2, axis2=-1)
    support = confusion.sum(axis=-1)
    predicted = confusion.sum(axis=-2)
    present = (support + predicted) > 0
    precision = np.where(predicted > 0, tp / np.where(predicted > 0, predicted, 1.0), 0.0)
    recall = np.where(support > 0, tp / np.where(support > 0, support, 1.0), 0.0)
    pr = precision + recall
    f1 = np.where(pr > 0, 2 * precision * recall / np.where(pr > 0, pr, 1.0), 0.0)
    count = present.sum(axis=-1)

    def mean(x: np.ndarray) -> np.ndarray:
        return np.where(count > 0, np.where(present, x, 0.0).sum(axis=-1) / np.where(count > 0, count, 1), np.nan)

    return mean(precision), mean(recall), mean(f1)
