"""The base of every benchmark metric.

The state is the list of (example index, prediction id) pairs seen so far. Under DDP torchmetrics
gathers the lists from every rank before ``compute``, so a contrast set whose members were
evaluated on different ranks is scored whole. Duplicates (a distributed sampler pads the last
batch by repeating examples) collapse onto one slot, so padding never counts twice.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import ClassVar

import numpy as np
import torch
from torchmetrics import Metric
from torchmetrics.utilities import dim_zero_cat

MISSING = -1


def ratio(num: float, den: float) -> float:
    """num / den, or NaN when nothing was scored (an empty subset is unknown, not 0)."""
    return float(num) / float(den) if den else float("nan")


class ExampleMetric(Metric):
    """Scores a whole split from per-example predictions; subclasses define ``score``."""

    full_state_update: ClassVar[bool] = False
    # Which way each reported name is better, and which names are counts, is declared by the
    # benchmark (Benchmark.reported_metrics), not here.
    #: A remark on how the predictions are scored (e.g. only a binary view of a 3-way benchmark),
    #: shown next to the numbers wherever they are reported.
    note: str | None = None

    def __init__(self, num_examples: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.num_examples = num_examples
        self.add_state("indices", default=[], dist_reduce_fx="cat")
        self.add_state("predictions", default=[], dist_reduce_fx="cat")
        #: Predictions of the last ``compute`` over all ranks, MISSING where none was made.
        self.last_predictions: np.ndarray | None = None

    def update(self, indices: torch.Tensor, predictions: torch.Tensor) -> None:
        self.indices.append(indices.detach().to(torch.long).flatten())
        self.predictions.append(predictions.detach().to(torch.long).flatten())

    def compute(self) -> dict[str, torch.Tensor]:
        full = np.full(self.num_examples, MISSING, dtype=np.int64)
        # Before a DDP sync the states are lists of tensors; after it torchmetrics has already
        # concatenated each into one tensor.
        if len(self.indices):
            idx = dim_zero_cat(self.indices).cpu().numpy()
            full[idx] = dim_zero_cat(self.predictions).cpu().numpy()
        self.last_predictions = full
        return {k: torch.tensor(float(v), dtype=torch.float64) for k, v in self.score(full).items()}

    @abstractmethod
    def score(self, predictions: np.ndarray) -> dict[str, float]:
        """Metric values from the full prediction array (MISSING where not predicted)."""
