"""NLI label spaces and the one explicit rule that relates them.

Three-way NLI (entailment / neutral / contradiction) is finer than two-way NLI (entailment /
not_entailment): neutral and contradiction both *coarsen* to not_entailment. Every mapping
between a benchmark's labels and a model head's labels goes through :func:`coarsen`; nothing is
ever inferred from a label's position.
"""

from __future__ import annotations

from collections.abc import Sequence

NLI3 = ("entailment", "neutral", "contradiction")
NLI2 = ("entailment", "not_entailment")

_ALIASES = {
    "entailment": "entailment",
    "entails": "entailment",
    "neutral": "neutral",
    "contradiction": "contradiction",
    "not_entailment": "not_entailment",
    "non_entailment": "not_entailment",
    "nonentailment": "not_entailment",
    "not_entailed": "not_entailment",
}

_COARSE = {"neutral": "not_entailment", "contradiction": "not_entailment"}


def normalize(text: str) -> str | None:
    """The canonical NLI label for a common spelling (any case, '-', ' ' or '_'), else None."""
    key = str(text).strip().lower().replace("-", "_").replace(" ", "_")
    return _ALIASES.get(key)


def coarsen(label: str) -> str:
    return _COARSE.get(label, label)


def into(label: str, label_set: Sequence[str]) -> str | None:
    """Express a (normalized) label in ``label_set``: itself, or its coarsening, or None."""
    if label in label_set:
        return label
    coarse = coarsen(label)
    return coarse if coarse in label_set else None
