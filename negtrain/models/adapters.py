"""LoRA / QLoRA for every model family, through peft.

- ``adapter.type: lora`` wraps the loaded model with LoRA adapters; ``qlora`` first loads the base
  quantized by bitsandbytes (4-bit NF4 with double quantization, or 8-bit) and prepares it with
  ``prepare_model_for_kbit_training``. Under DDP each rank loads its own quantized copy onto its
  own device (``device_map`` = the rank's local GPU).
- A classification head (the NLI family's ``classifier``/``score``) stays fully trainable.
- Checkpoints of an adapter run hold only the trainable weights: adapters and head
  (:func:`trainable_state`), not the base model, which the recipe names.

- ``fit`` saves the peft config next to the run's HF config (:func:`save_adapter_config`), so that
  ``export`` can rebuild the adapter from a checkpoint (see :mod:`negtrain.release.export`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from negtrain.config import AdapterConfig
from negtrain.core.errors import ConfigError
from negtrain.models.folder_checks import load_adapter


def quantization_config(adapter: AdapterConfig, keep_full: list[str] | None = None):
    """bitsandbytes settings for QLoRA; ``keep_full`` names modules left unquantized (a
    classification head, which must stay fully trainable). transformers itself keeps an LM's
    output layer unquantized."""
    if adapter.type != "qlora":
        return None
    from transformers import BitsAndBytesConfig

    skip = {"llm_int8_skip_modules": keep_full} if keep_full else {}
    if adapter.bits == 8:
        return BitsAndBytesConfig(load_in_8bit=True, **skip)
    compute = torch.bfloat16 if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else torch.float32
    return BitsAndBytesConfig(
        load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype=compute, **skip
    )


def load_base(auto_cls, path: str, adapter: AdapterConfig, keep_full: list[str] | None = None, **kwargs: Any):
    """``auto_cls.from_pretrained`` with the adapter's quantization, on this rank's device."""
    quant = quantization_config(adapter, keep_full)
    if quant is not None:
        kwargs["quantization_config"] = quant
        if torch.cuda.is_available():
            kwargs["device_map"] = {"": int(os.environ.get("LOCAL_RANK", "0"))}
    return auto_cls.from_pretrained(path, **kwargs)


def enable_activation_checkpointing(model) -> None:
    """Recompute activations in the backward pass (non-reentrant), through whichever method the
    installed transformers offers: ``activation_checkpointing_enable`` where it exists (5.x, where
    ``gradient_checkpointing_enable`` is a deprecated alias removed in v6), else the older name."""
    kwargs = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


def add_adapter(model, adapter: AdapterConfig, task_type: str):
    """Wrap ``model`` with LoRA (no-op for ``type: none``). ``task_type``: SEQ_CLS, SEQ_2_SEQ_LM, CAUSAL_LM."""
    if adapter.type == "none":
        return model
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training

    if adapter.type == "qlora":
        # Checkpointing is switched on here, not by peft: peft calls transformers'
        # gradient_checkpointing_enable, deprecated for v6 in favour of activation_checkpointing_enable.
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)
        enable_activation_checkpointing(model)
    if adapter.path is not None:
        return load_adapter(model, adapter.path)
    config = LoraConfig(
        r=adapter.r,
        lora_alpha=adapter.alpha,  # type: ignore[arg-type]  # peft annotates int; it scales by alpha / r, a float
        lora_dropout=adapter.dropout,
        target_modules=adapter.target_modules,
        task_type=task_type,  # SEQ_CLS keeps the classification head fully trainable (modules_to_save)
    )
    return get_peft_model(model, config)


def trainable_state(module: torch.nn.Module, state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The entries of ``state_dict`` that are trainable parameters of ``module`` (adapter + head)."""
    names = {n for n, p in module.named_parameters() if p.requires_grad}
    return {k: v for k, v in state_dict.items() if k in names}


def load_adapter_state(module: torch.nn.Module, state_dict: dict[str, torch.Tensor], where: str) -> None:
    missing, unexpected = module.load_state_dict(state_dict, strict=False)
    trainable = {n for n, p in module.named_parameters() if p.requires_grad}
    lacking = sorted(trainable - set(state_dict))
    if unexpected or lacking:
        raise ConfigError(
            f"{where}: the adapter checkpoint does not fit this recipe's model "
            f"(unexpected {unexpected[:3]}, missing {lacking[:3]}); was it written by another recipe?"
        )


def merge(module) -> None:
    """Merge LoRA adapters into the base weights of ``module.model`` in place (peft merge_and_unload)."""
    from peft import PeftModel

    if isinstance(module.model, PeftModel):
        module.model = module.model.merge_and_unload()


def save_adapter_config(model, folder: Path) -> None:
    """If ``model`` is a peft model, save its adapter config next to the run's HF config.

    ``fit`` calls this so that ``export`` can rebuild the adapter from the checkpoint.
    """
    peft_config = getattr(model, "peft_config", None)
    if isinstance(peft_config, dict) and peft_config:
        for name, cfg in peft_config.items():
            if name == "default":
                cfg.save_pretrained(str(folder))
