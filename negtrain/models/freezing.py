"""Keeping parameters fixed during training: ``model.freeze_embeddings`` and ``model.freeze``.

Frozen parameters are left out of the optimizer, and autograd stops at them: freezing the bottom
layers of an encoder also skips their backward pass, so it is a speed lever as well as a
regulariser.
"""

from __future__ import annotations

from collections.abc import Iterator
from fnmatch import fnmatchcase
from typing import Protocol

import torch

from negtrain.config import ModelSection
from negtrain.core.errors import ConfigError


class EmbeddedModel(Protocol):
    """What freezing reads of a model: a transformers model, or its peft wrapper."""

    def get_input_embeddings(self) -> torch.nn.Module: ...

    def named_parameters(self) -> Iterator[tuple[str, torch.nn.Parameter]]: ...

    def parameters(self) -> Iterator[torch.nn.Parameter]: ...


def freeze(model: EmbeddedModel, cfg: ModelSection) -> None:
    """Apply the recipe's freezing to ``model``."""
    if cfg.freeze_embeddings:
        model.get_input_embeddings().weight.requires_grad_(False)
    if cfg.freeze:
        named = dict(model.named_parameters())
        for pattern in cfg.freeze:
            if not any(fnmatchcase(name, pattern) for name in named):
                sample = ", ".join(list(named)[:3])
                raise ConfigError(
                    f"model.freeze: '{pattern}' matches no parameter of {type(model).__name__} "
                    f"(names look like: {sample}; patterns are fnmatch globs such as '*.encoder.layer.0.*')"
                )
        for name, param in named.items():
            if any(fnmatchcase(name, pattern) for pattern in cfg.freeze):
                param.requires_grad_(False)
    if (cfg.freeze_embeddings or cfg.freeze) and not any(p.requires_grad for p in model.parameters()):
        raise ConfigError("model.freeze / model.freeze_embeddings leave no parameter to train")
