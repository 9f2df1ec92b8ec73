"""Held-out masked-LM metrics: token-level loss and recovery of masked negation cues.

Per example the state holds four numbers: the summed cross-entropy over its masked tokens, how
many tokens were masked, how many masked cues were predicted right, and how many cues were
masked. They are gathered over ranks like every :class:`ExampleMetric` state, then pooled:

- ``mlm_loss``: total cross-entropy / masked tokens (nats per token; lower is better);
- ``cue_recovery_accuracy``: masked cues whose top-1 prediction is the original token / masked cues;
- ``n_masked``, ``n_cues``: the pooled counts.
"""

from __future__ import annotations

import numpy as np
import torch
from torchmetrics.utilities import dim_zero_cat

from negtrain.metrics.base import ExampleMetric

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
        return {k: torch.tensor(float(v), dtype=torch.float64) for k, v in self.score(full).items()}

    def score(self, values: np.ndarray) -> dict[str, float]:
        if values.ndim != 2:  # a scoring of "no predictions" (see training.build.metric_names)
            values = np.full((self.num_examples, FIELDS), np.nan)
        seen = ~np.isnan(values[:, 0])
        total = values[seen].sum(axis=0) if seen.any() else np.zeros(FIELDS)
        return {
            "mlm_loss": float(total[0] / total[1]) if total[1] else float("nan"),
            "cue_recovery_accuracy": float(total[2] / total[3]) if total[3] else float("nan"),
            "n_masked": float(total[1]),
            "n_cues": float(total[3]),
        }
