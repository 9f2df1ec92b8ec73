"""What an objective of the masked-LM family is: the interface every row of
:data:`negtrain.objectives.table.OBJECTIVES` implements, and what it hands the family's builder.

An objective owns its loss (``loss(module, batch)``), the batch transform that feeds the loss,
its training data and any eval sets it scores itself every epoch (with their evaluator). The
family (:func:`negtrain.models.mlm.build_mlm`) owns what every objective shares: the model, the
tokenizer and the per-epoch ``negated_probes`` evaluation.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from negtrain.config import SourceConfig
from negtrain.data.eval_set import EvalSet
from negtrain.data.module import TrainSet


class Loss(ABC):
    """The loss of a training batch, given the masked-LM module (its ``logits``, ``mask_logits``,
    ``reference_logits`` and ``log``)."""

    @abstractmethod
    def loss(self, module: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor: ...

    def units(self, batch: dict[str, torch.Tensor]) -> torch.Tensor | None:
        """What the loss is a mean over, counted in the batch (weights ranks' losses under DDP);
        None: the batch's examples."""
        return None


@dataclass
class Prepared:
    """An objective's part of a built run."""

    loss: Loss
    #: None when no training split was loaded (validate / test).
    train: TrainSet | None
    #: ``(padded batch, epoch) -> batch``: what the loss needs beyond the padded examples.
    train_transform: Callable | None
    #: Eval sets the objective scores itself every epoch, after the recipe's ``data.eval``.
    eval_sets: list[EvalSet] = field(default_factory=list)
    #: The frozen starting model, when the loss compares against it (KL terms).
    reference: Any = None
    #: The DataModule's training sources, when they are not the recipe's ``data.train``.
    train_sources: list[SourceConfig] | None = None


class Objective(ABC):
    """One training objective, built from its section of the recipe's ``objective:``."""

    def __init__(self, settings: Any) -> None:
        self.settings = settings

    #: How a multi-token probe object is scored ('reject' or 'first_subtoken'), also at evaluation.
    multi_token_objects: str = "reject"

    # Optional hooks, empty unless an objective needs them (not abstract on purpose).
    def check(self, loaded) -> None:  # noqa: B027
        """Refuse training data the objective cannot read, before the model loads."""

    def add_tokens(self, tokenizer) -> None:  # noqa: B027
        """Add the special tokens the objective needs to the tokenizer (the model is resized)."""

    @abstractmethod
    def prepare(self, recipe, loaded, tokenizer, model) -> Prepared:
        """Encode the training data and make the loss, once the model is loaded and frozen."""
