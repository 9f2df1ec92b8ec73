"""Rejecting trainer/adapter combinations that cannot work, before any model is loaded.

A recipe's ``trainer`` section (devices, strategy, precision) and ``adapter`` section are
configuration only; this is the one place that knows which combinations the installed software and
this machine support, so a run never fails (or silently changes precision) hours in.
"""

from __future__ import annotations

import importlib.util

from negtrain.config import Recipe
from negtrain.errors import ConfigError, unknown_name


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def known_strategies() -> list[str]:
    from lightning.pytorch.strategies import StrategyRegistry

    return ["auto", *StrategyRegistry.available_strategies()]


def bnb_supports(bits: int, device: str) -> str | None:
    """None if bitsandbytes can run a ``bits``-bit linear layer on ``device``, else why not."""
    if importlib.util.find_spec("bitsandbytes") is None:
        return "bitsandbytes is not installed"
    try:
        import torch
        import bitsandbytes as bnb

        if bits == 4:
            layer = bnb.nn.Linear4bit(64, 64, bias=False, quant_type="nf4", compute_dtype=torch.float32)
        else:
            layer = bnb.nn.Linear8bitLt(64, 64, bias=False, has_fp16_weights=False)
        layer = layer.to(device)
        layer(torch.randn(2, 64, device=device))
    except Exception as exc:  # the library says what it lacks in many ways
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return None


def check_run(recipe: Recipe) -> None:
    t, adapter = recipe.trainer, recipe.adapter
    strategies = known_strategies()
    if t.strategy not in strategies:
        raise unknown_name("trainer.strategy (for the installed Lightning)", t.strategy, strategies)
    deepspeed = t.strategy.startswith("deepspeed")
    if deepspeed and importlib.util.find_spec("deepspeed") is None:
        raise ConfigError(f"trainer.strategy '{t.strategy}' needs DeepSpeed, which is not installed (pip install deepspeed)")
    gpu = cuda_available() and t.accelerator in ("auto", "gpu", "cuda")
    if t.precision == "16-mixed" and not gpu:
        # Lightning would silently switch to bf16-mixed on a CPU.
        raise ConfigError("trainer.precision '16-mixed' needs a GPU; on a CPU use 'bf16-mixed' or '32-true'")
    if adapter.type == "qlora":
        if deepspeed and "stage_3" in t.strategy:
            raise ConfigError(
                "adapter.type 'qlora' cannot run under DeepSpeed ZeRO-3: it would shard the quantized "
                "bitsandbytes weights; use ddp or deepspeed_stage_2"
            )
        if t.strategy.startswith("fsdp"):
            raise ConfigError("adapter.type 'qlora' is not supported under FSDP here (quantized weights are not sharded); use ddp")
        if "bf16-true" == t.precision:
            raise ConfigError("adapter.type 'qlora' keeps adapters in float32; use trainer.precision bf16-mixed, not bf16-true")
        device = "cuda" if gpu else "cpu"
        why = bnb_supports(adapter.bits, device)
        if why is not None:
            raise ConfigError(
                f"adapter.bits {adapter.bits}: bitsandbytes cannot run {adapter.bits}-bit layers on {device} "
                f"on this machine ({why})"
            )
    if adapter.type != "none" and recipe.model.family == "nli" and adapter.target_modules != "all-linear" and not adapter.target_modules:
        raise ConfigError("adapter.target_modules: name at least one module, or 'all-linear'")
