"""The base of every benchmark metric.

The state is the list of (example index, prediction id) pairs seen so far. Under DDP torchmetrics
gathers the lists from every rank before ``compute``, so a contrast set whose members were
evaluated on different ranks is scored whole. Duplicates (a distributed sampler pads the last
batch by repeating examples) collapse onto one slot, so padding never counts twice.

A metric is defined in two steps, so that its uncertainty comes from the same definition as its
value (see :mod:`negtrain.metrics.uncertainty`): ``unit_table`` sums per-example outcomes within
each independent unit of the benchmark (``resampling_unit``), and ``from_totals`` computes the
metrics from those sums. ``score`` is the two applied to every unit once; the bootstrap applies
``from_totals`` to resampled units.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
from negtrain.metrics.torchmetrics_core import Metric, dim_zero_cat

from negtrain.metrics.uncertainty import Mean, UnitTable, point_values

MISSING = -1
#: A generated response that no answer rule could read: predicted, and wrong (never dropped).
UNPARSED = -2


def ratio(num: float, den: float) -> float:
    """num / den, or NaN when nothing was scored (an empty subset is unknown, not 0)."""
    return float(num) / float(den) if den else float("nan")


class ExampleMetric(Metric):
    """Scores a whole split from per-example predictions; subclasses define ``unit_table`` and
    ``from_totals`` (or, without uncertainty, ``score`` alone)."""

    full_state_update: bool = False
    # Which way each reported name is better, and which names are counts, is declared by the
    # benchmark (Benchmark.reported_metrics), not here.
    #: A remark on how the predictions are scored (e.g. only a binary view of a 3-way benchmark),
    #: shown next to the numbers wherever they are reported.
    note: str | None = None
    #: What one independent unit of the benchmark is (the bootstrap resamples these): "example"
    #: unless examples come in groups that are scored together (contrast sets).
    resampling_unit: str = "example"
    #: States registered by ``add_state``: per update one tensor (torchmetrics concatenates each
    #: list into one tensor when it syncs ranks).
    indices: list[torch.Tensor]
    predictions: list[torch.Tensor]
    empty: list[torch.Tensor]

    def __init__(self, num_examples: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.num_examples = num_examples
        self.add_state("indices", default=[], dist_reduce_fx="cat")
        self.add_state("predictions", default=[], dist_reduce_fx="cat")
        #: The examples whose generated response was empty (nothing, or only whitespace): an
        #: answer rule still reads one ("contains yes" reads "no"), so they are scored, and
        #: ``n_empty`` says how many (a state, so DDP ranks' counts add up).
        self.add_state("empty", default=[], dist_reduce_fx="cat")
        #: Predictions of the last ``compute`` over all ranks, MISSING where none was made.
        self.last_predictions: np.ndarray | None = None
        #: The full per-example state the last ``compute`` scored (after the DDP sync): what the
        #: bootstrap resamples.
        self.last_outcomes: np.ndarray | None = None
        #: Per example, whether its response was empty, after the last ``compute`` (None: not a
        #: split answered by generation).
        self.last_empty: np.ndarray | None = None
        #: Report ``n_unparsed``, the responses no answer rule could read (set for a split
        #: answered by generation); they are scored as wrong.
        self.counts_unparsed = False
        #: Per example, whether its prompt was cut to fit the model's context (set under
        #: ``evaluation.truncate: left``): ``n_truncated`` counts the scored ones. None: no cutting.
        self.truncated: np.ndarray | None = None

    def update(self, indices: torch.Tensor, predictions: torch.Tensor) -> None:
        self.indices.append(indices.detach().to(torch.long).flatten())
        self.predictions.append(predictions.detach().to(torch.long).flatten())

    def mark_empty(self, indices: torch.Tensor) -> None:
        """The examples ``indices`` were answered with an empty response (counted as ``n_empty``
        where they are scored)."""
        self.empty.append(indices.detach().to(torch.long).flatten())

    def compute(self) -> dict[str, torch.Tensor]:
        full = np.full(self.num_examples, MISSING, dtype=np.int64)
        # Before a DDP sync the states are lists of tensors; after it torchmetrics has already
        # concatenated each into one tensor.
        if len(self.indices):
            idx = dim_zero_cat(self.indices).cpu().numpy()
            full[idx] = dim_zero_cat(self.predictions).cpu().numpy()
        self.last_predictions = full
        self.last_outcomes = full
        values = {k: torch.tensor(float(v), dtype=torch.float64) for k, v in self.score(full).items()}
        if self.counts_unparsed:
            values["n_unparsed"] = torch.tensor(float((full == UNPARSED).sum()), dtype=torch.float64)
            empty = np.zeros(self.num_examples, dtype=bool)
            if len(self.empty):
                empty[dim_zero_cat(self.empty).cpu().numpy()] = True
            self.last_empty = empty & (full != MISSING)
            values["n_empty"] = torch.tensor(float(self.last_empty.sum()), dtype=torch.float64)
        if self.truncated is not None:
            values["n_truncated"] = torch.tensor(float((self.truncated & (full != MISSING)).sum()), dtype=torch.float64)
        return values

    def score(self, predictions: np.ndarray) -> dict[str, float]:
        """Metric values from the full prediction array (MISSING where not predicted).

        A metric may override this alone; it is then scored as before but gets no uncertainty
        (see :attr:`supports_uncertainty`)."""
        return point_values(self.from_totals(self.unit_table(predictions).totals()))

    def unit_table(self, predictions: np.ndarray) -> UnitTable:
        """Per independent unit, the sums ``from_totals`` needs."""
        raise NotImplementedError(f"{type(self).__name__} defines no unit_table: it cannot be bootstrapped")

    def from_totals(self, totals: Mapping[str, np.ndarray]) -> dict[str, np.ndarray | Mean]:
        """The metrics from column totals (scalars, or arrays over bootstrap resamples)."""
        raise NotImplementedError(f"{type(self).__name__} defines no from_totals: it cannot be bootstrapped")

    def prediction_fields(self) -> list[dict | None] | None:
        """Per example, what its prediction line carries beyond the predicted label so that
        ``evaluate --predictions`` re-scores it exactly (a model's scores), after ``compute``;
        None: the label is all it needs."""
        return None

    @property
    def supports_uncertainty(self) -> bool:
        """Whether the metric is defined through ``unit_table`` and ``from_totals`` (every
        benchmark here is); one that only overrides ``score`` gets no stderr or interval."""
        cls = type(self)
        return cls.unit_table is not ExampleMetric.unit_table and cls.from_totals is not ExampleMetric.from_totals
