"""Loading the in-process backend's model (:mod:`negtrain.serving.in_process`) as the ``hf``
backend's families load it, with nothing of Lightning or the training floor: the family's auto
class, attention implementation, LoRA / QLoRA adapters (:mod:`negtrain.models.adapters`), frozen
parts (so an adapter-only checkpoint's trainable weights are the ones it holds), a negtrain run's
checkpoint, and the precision an evaluation runs in; and what decides an answer besides the
request (:func:`in_process_cache_settings`), which keys the response cache.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from negtrain.config import LanguageModelConfig, to_dict
from negtrain.core.errors import ConfigError
from negtrain.data.store_keys import tokenizer_signature
from negtrain.io.checkpoint_reading import read_checkpoint
from negtrain.models import provenance
from negtrain.models.adapters import add_adapter, load_adapter_state, load_base
from negtrain.models.freezing import freeze
from negtrain.models.sources import attention_kwargs

#: ``trainer.precision`` -> (autocast dtype, dtype the weights are cast to) in evaluation. ``auto``
#: evaluates in fp32 (the checkpoint's dtype, no autocast) on every machine, as
#: :func:`negtrain.training.checks.evaluation_precision` decides for the ``hf`` backend.
PRECISIONS: dict[str, tuple[torch.dtype | None, torch.dtype | None]] = {
    "auto": (None, None),
    "32": (None, None),
    "32-true": (None, None),
    "bf16-mixed": (torch.bfloat16, None),
    "16-mixed": (torch.float16, None),
    "bf16-true": (None, torch.bfloat16),
}


def evaluation_precision_name(precision: str) -> str:
    """The precision an evaluation runs in, as the cache and records name it: ``auto`` is ``32-true``."""
    return "32-true" if precision == "auto" else precision


def precision_dtypes(precision: str) -> tuple[torch.dtype | None, torch.dtype | None]:
    """(autocast dtype or None, dtype to cast the weights to or None) of ``trainer.precision``."""
    if precision not in PRECISIONS:
        raise ConfigError(f"trainer.precision {precision!r}: the in-process backend knows {', '.join(PRECISIONS)}")
    return PRECISIONS[precision]


def language_model_section(recipe: Any) -> LanguageModelConfig:
    cfg = recipe.model
    if not isinstance(cfg, LanguageModelConfig):
        raise ConfigError(f"model.family {cfg.family}: the in-process backend answers language-model requests; "
                          "use a language-model family (its auto class is a causal or seq2seq LM)")
    return cfg


def load_model(path: str, recipe: Any):
    """The recipe's model from ``path``: its family's auto class, adapters and frozen parts, in eval mode."""
    import transformers

    cfg = language_model_section(recipe)
    auto = getattr(transformers, type(cfg).auto_class)
    model = load_base(auto, path, recipe.adapter, **attention_kwargs(cfg))
    assert cfg.peft_task_type is not None  # every language-model family declares its peft task
    model = add_adapter(model, recipe.adapter, cfg.peft_task_type)
    freeze(model, cfg)
    return model


class _Holder(torch.nn.Module):
    """The model under the name the run's module gave it (``model.``), so a checkpoint's keys fit."""

    def __init__(self, model) -> None:
        super().__init__()
        self.model = model


def load_checkpoint_weights(model, checkpoint: Path, given_as: str = "--checkpoint") -> None:
    """A run's checkpoint into ``model`` in place, as ``training.build.reload_weights`` loads it
    into the run's module: the whole state, or an adapter run's trainable weights only."""
    state = read_checkpoint(checkpoint, given_as)
    weights = {k: v for k, v in state["state_dict"].items() if k.startswith("model.")}
    if not weights:
        raise ConfigError(f"{given_as} {checkpoint}: holds no language model's weights (no model.* entries)")
    holder = _Holder(model)
    if state.get("negtrain_adapter_only"):
        load_adapter_state(holder, weights, str(checkpoint))
        return
    try:
        holder.load_state_dict(weights)
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()[0]
        raise ConfigError(f"{given_as} {checkpoint}: its weights do not fit the recipe's model ({first[:200]})") from exc


def in_process_cache_settings(recipe: Any, model, tokenizer, checkpoint: Path | None) -> dict[str, Any]:
    """What decides an in-process answer besides the request, by content and never by a path: the weights' digests
    (:func:`negtrain.models.provenance.weights_identity`), the tokenizer's content and chat
    template, the dtype the weights are in and the precision they are run in, and the model and
    adapter settings."""
    raw = to_dict(recipe)
    parameter = next(model.parameters(), None) if model is not None else None
    return {
        "weights": provenance.weights_identity(recipe, getattr(model, "config", None), checkpoint),
        "tokenizer": tokenizer_signature(tokenizer),
        "chat_template": getattr(tokenizer, "chat_template", None),
        "dtype": str(parameter.dtype) if parameter is not None else None,
        "precision": evaluation_precision_name(recipe.trainer.precision),
        "model": {k: v for k, v in raw["model"].items() if k not in ("name", "init_from")},
        "adapter": {k: v for k, v in (raw.get("adapter") or {}).items() if k != "path"},
    }
