"""Held-out masked-LM metrics: token-level loss and recovery of masked negation cues.

Per example the state holds four numbers: the summed cross-entropy over its masked tokens, how
many tokens were masked, how many masked cues were predicted right, and how many cues were
masked. They are gathered over ranks like every :class:`ExampleMetric` state, then pooled:

- ``mlm_loss``: total cross-entropy / masked tokens (nats per token; lower is better);
- ``cue_recovery_accuracy``: masked cues whose top-1 prediction is the original token / masked cues;
- ``n_masked``, ``n_cues``: the pooled counts.

The independent unit for the bootstrap is the held-out line (an example).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

from negtrain.metrics.base import ExampleMetric
from negtrain.metrics.uncertainty import Mean, UnitTable, ratios, unit_table
from negtrain.metrics.torchmetrics_core import dim_zero_cat

FIELDS = 4  # loss sum, masked tokens, cues right, cues masked


class HeldOutMLMMetric(ExampleMetric):
    """``mlm_loss``, ``cue_recovery_accuracy`` and their counts (declared by the cue corpus)."""

    def update(self, indices: torch.Tensor, values: torch.Tensor) -> None:
        self.indices.append(indices.detach().to(torch.long).flatten())
        self.predictions.append(values.detach().to(torch.float64).reshape(-1, FIELDS))

    def compute(self) -> dict[str, torch.Tensor]:
        full = np.full((self.num_examples, FIELDS), np.nan)
        if not (isinstance(self.indices, list) and not self.indices):
            full[dim_zero_cat(self.indices).cpu().numpy()] = dim_zero_cat(self.predictions).cpu().numpy()
        # There is no per-example label prediction to write to a predictions file.
        self.last_predictions = None
        self.last_outcomes = full
        return {k: torch.tensor(float(v), dtype=torch.float64) for k, v in self.score(full).items()}

    def unit_table(self, values: np.ndarray) -> UnitTable:
        if values.ndim != 2:  # a scoring of no predictions (every example MISSING)
            values = np.full((self.num_examples, FIELDS), np.nan)
        summed = np.nan_to_num(values)  # an unscored example adds nothing
        columns = {name: summed[:, k] for k, name in enumerate(("loss", "masked", "cues_right", "cues"))}
        return unit_table(self.resampling_unit, np.arange(self.num_examples), self.num_examples, columns)

    def from_totals(self, t: Mapping[str, np.ndarray]) -> dict[str, np.ndarray | Mean]:
        # Pooled ratios, not means of independent 0/1 items (tokens and cues of one line are not
        # independent), so their stderr comes from the bootstrap over lines.
        return {
            "mlm_loss": ratios(t["loss"], t["masked"]),
            "cue_recovery_accuracy": ratios(t["cues_right"], t["cues"]),
            "n_masked": t["masked"],
            "n_cues": t["cues"],
        }
