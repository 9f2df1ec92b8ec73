"""The NLI family: sequence classification on (premise, hypothesis) pairs.

Works with any ``AutoModelForSequenceClassification`` checkpoint (DeBERTa, RoBERTa, BERT, ...).
A three-way MNLI head is scored on two-way benchmarks by coarsening its prediction, and trained on
two-way data through the probability mass of the matching classes (see :mod:`negtrain.models.heads`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from negtrain.benchmarks.base import Example
from negtrain.config import ModelConfig
from negtrain.data.encoded import EncodedSplit, cached, fingerprint
from negtrain.metrics.base import ExampleMetric
from negtrain.models.base import NegtrainModule
from negtrain.models.heads import set_loss


def encode_pairs(tokenizer, examples: Sequence[Example], max_length: int) -> EncodedSplit:
    key = fingerprint(
        "nli-pairs",
        type(tokenizer).__name__,
        str(tokenizer.name_or_path),
        str(len(tokenizer)),
        str(max_length),
        [e.inputs[0] for e in examples],
        [e.inputs[1] for e in examples],
    )

    def build() -> EncodedSplit:
        enc = tokenizer(
            [e.inputs[0] for e in examples],
            [e.inputs[1] for e in examples],
            truncation=True,
            max_length=max_length,
        )
        return EncodedSplit.from_lists(enc["input_ids"], enc.get("token_type_ids"))

    return cached(key, build)


class NLIModule(NegtrainModule):
    def __init__(
        self,
        model,
        config: ModelConfig,
        head_labels: Sequence[str],
        eval_names: Sequence[str],
        metrics: Sequence[ExampleMetric],
        head_maps: Sequence[torch.Tensor],
        recipe: dict[str, Any],
    ) -> None:
        super().__init__(config, eval_names, metrics, recipe)
        # from_pretrained returns the model in eval mode; Lightning keeps modules' modes, so
        # without this dropout would be off during training.
        self.model = model.train()
        self.head_labels = list(head_labels)
        # For each eval set: head class id -> benchmark label id.
        for i, m in enumerate(head_maps):
            self.register_buffer(f"head_map_{i}", m, persistent=False)

    def _logits(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in batch}
        return self.model(**inputs).logits

    def training_loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return set_loss(self._logits(batch), batch["targets"])

    def predict(self, batch: dict[str, torch.Tensor], eval_index: int) -> torch.Tensor:
        return getattr(self, f"head_map_{eval_index}")[self._logits(batch).argmax(-1)]
