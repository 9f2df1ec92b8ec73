"""Rejecting trainer/adapter combinations that cannot work, before any model is loaded.

A recipe's ``trainer`` section (devices, strategy, precision) and ``adapter`` section are
configuration only; this is the one place that knows which combinations the installed software and
this machine support, so a run never fails (or silently changes precision) hours in.
"""

from __future__ import annotations

import importlib.util
import os

from negtrain.config import Recipe
from negtrain.core.errors import ConfigError, NegtrainError, unknown_name
from negtrain.models.init_from import resolve_init
from negtrain.models.provenance import cpu_has_native_bf16
from negtrain.models.sources import resolve_model_name


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def native_bf16(gpu: bool) -> bool:
    import torch

    return torch.cuda.is_bf16_supported() if gpu else cpu_has_native_bf16()


def resolve_precision(requested: str, native: bool, device: str) -> tuple[str, str | None]:
    """The precision Lightning gets for ``trainer.precision``, and a line to print about it (or None).

    ``native``: whether ``device`` computes bf16 in hardware (:func:`native_bf16`).
    """
    if requested == "auto":
        if native:
            return "bf16-mixed", f"trainer.precision auto: bf16-mixed ({device} computes bf16 natively)"
        return "32-true", f"trainer.precision auto: 32-true ({device} has no native bf16, which would be emulated and slow)"
    if requested in ("bf16-mixed", "bf16-true") and not native:
        return requested, (
            f"warning: trainer.precision {requested}: {device} has no native bf16, so bf16 matmuls are emulated "
            "and far slower than fp32; use trainer.precision auto (or 32-true) on this machine"
        )
    return requested, None


def trainer_precision(t) -> tuple[str, str | None]:
    """:func:`resolve_precision` for a recipe's trainer section on this machine."""
    gpu = uses_gpu(t)
    return resolve_precision(t.precision, native_bf16(gpu), "this GPU" if gpu else "this CPU")


def evaluation_precision(t) -> tuple[str, str | None]:
    """The precision a model is evaluated in (validate, test, report cards): under ``auto``,
    ``32-true``, which runs the model in the dtype it was loaded in (its checkpoint's) with no
    autocast, on every machine. ``auto`` picks bf16-mixed for *training* where the hardware computes
    bf16 natively; in evaluation that would make the generated texts depend on the machine. An
    explicit precision is kept, and every eval record says so (``models.precision_note.precision_note``)."""
    if t.precision == "auto":
        return "32-true", None
    return trainer_precision(t)


def uses_gpu(t) -> bool:
    """Whether the recipe's trainer section runs on a CUDA GPU on this machine."""
    return cuda_available() and t.accelerator in ("auto", "gpu", "cuda")


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

        layer: torch.nn.Module
        if bits == 4:
            layer = bnb.nn.Linear4bit(64, 64, bias=False, quant_type="nf4", compute_dtype=torch.float32)
        else:
            layer = bnb.nn.Linear8bitLt(64, 64, bias=False, has_fp16_weights=False)
        layer = layer.to(device)
        layer(torch.randn(2, 64, device=device))
    except Exception as exc:  # the library says what it lacks in many ways
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return None


def _bnb_packs_for_cpu() -> bool:
    """Whether bitsandbytes repacks 4-bit weights for its CPU kernel on this machine (AVX512-BF16)."""
    try:
        from bitsandbytes.functional import has_avx512bf16
    except ImportError:
        return False
    return bool(has_avx512bf16())


def check_accelerator(name: str) -> None:
    """``trainer.accelerator`` must be one the installed Lightning knows and this machine has:
    Lightning itself fails with a traceback (a ModuleNotFoundError for 'tpu' without torch_xla)."""
    from lightning.pytorch.accelerators import AcceleratorRegistry

    if name == "auto":
        return
    known = sorted({"auto", "gpu", *AcceleratorRegistry.available_accelerators()})
    if name not in known:
        raise unknown_name("trainer.accelerator", name, known)
    if name == "gpu":
        available = any(AcceleratorRegistry[n]["accelerator"].is_available() for n in ("cuda", "mps") if n in known)
    else:
        available = AcceleratorRegistry[name]["accelerator"].is_available()
    if not available:
        raise ConfigError(f"trainer.accelerator '{name}' is not available on this machine; use 'auto' or 'cpu'")


#: What a multi-node launcher sets, by launcher; Lightning reads the same variables.
_LAUNCHER_VARIABLES = {
    "SLURM (srun)": ("SLURM_NTASKS",),
    "torchrun": ("TORCHELASTIC_RUN_ID",),
    "Kubeflow": ("KUBERNETES_PORT", "MASTER_ADDR", "RANK"),
    "LSF": ("LSB_JOBID", "JSM_NAMESPACE_RANK"),
    "MPI": ("OMPI_COMM_WORLD_SIZE",),
    "manual (one command per node)": ("MASTER_ADDR", "NODE_RANK"),
}


def multi_node_launcher(environ=None) -> str | None:
    """The launcher this process was started by, when it can take part in a multi-node run."""
    environ = os.environ if environ is None else environ
    for launcher, names in _LAUNCHER_VARIABLES.items():
        if all(environ.get(n) for n in names):
            return launcher
    return None


def check_num_nodes(num_nodes: int, environ=None) -> str | None:
    """``trainer.num_nodes`` > 1 without a launcher waits forever for nodes nobody starts: an error.
    Under a launcher, the line to print: what this node will wait for."""
    environ = os.environ if environ is None else environ
    if num_nodes <= 1:
        return None
    launcher = multi_node_launcher(environ)
    if launcher is not None:
        where = f"{environ.get('MASTER_ADDR', '?')}:{environ.get('MASTER_PORT', '?')}"
        node = environ.get("NODE_RANK") or environ.get("GROUP_RANK") or environ.get("SLURM_NODEID") or "?"
        return (
            f"trainer.num_nodes {num_nodes} ({launcher}): node {node} waits at {where} until all {num_nodes} "
            "nodes have joined (Lightning gives up after 30 minutes)"
        )
    raise ConfigError(
        f"trainer.num_nodes {num_nodes}: no multi-node launcher found, so this process would wait forever "
        f"for {num_nodes - 1} other node(s) to join it; start the command on every node with torchrun "
        f"(--nnodes {num_nodes} --node_rank N --master_addr HOST) or SLURM's srun, or set MASTER_ADDR, "
        "MASTER_PORT, NODE_RANK and WORLD_SIZE on each node; on one machine use trainer.num_nodes 1"
    )


#: bitsandbytes' CPU kernel for 4-bit layers (used for evaluation on CPUs with AVX512-BF16)
#: repacks each weight in blocks of 64 inputs by 32 outputs: a layer of another size fails with a
#: reshape error at the first evaluation, after a whole epoch of training.
CPU_4BIT_BLOCKS = (64, 32)


def narrow_4bit_layers(recipe: Recipe) -> list[str]:
    """The base model's linear layers that bitsandbytes' CPU 4-bit kernel cannot pack, as
    ``name (in x out)``. Read from the model's config on the meta device (no weights loaded);
    a model whose config cannot be read here is left to the loader to report."""
    import torch
    from transformers import AutoConfig, AutoModel

    try:
        if recipe.model.init_from:
            path = str(resolve_init(recipe.model.init_from).model_dir)
        else:
            path = resolve_model_name(recipe.model.name)
        config = AutoConfig.from_pretrained(path)
        with torch.device("meta"):
            base = AutoModel.from_config(config)  # the body only: heads stay unquantized
    except (NegtrainError, OSError, ValueError, KeyError):
        return []
    k_block, n_block = CPU_4BIT_BLOCKS
    return [
        f"{name} ({m.in_features} x {m.out_features})"
        for name, m in base.named_modules()
        if isinstance(m, torch.nn.Linear) and (m.in_features % k_block or m.out_features % n_block)
    ]


def available_cores() -> int:
    """The CPU cores this process may run on (its affinity, e.g. a cgroup or taskset, where known)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def check_cpu_devices(t) -> None:
    """``trainer.devices`` on a CPU: at most one process per available core.

    Each DDP rank on a CPU is a process that loads the model and the data: 64 of them on a 2-core
    machine stall it (and exhaust its memory) long before they train. One process per core is the
    most that can compute at once, so more is refused before any process starts."""
    if t.accelerator not in ("cpu", "auto") or (t.accelerator == "auto" and cuda_available()):
        return
    if isinstance(t.devices, int) and t.devices > 1:
        cores = available_cores()
        if t.devices > cores:
            raise ConfigError(
                f"trainer.devices {t.devices}: a CPU run starts one process per device, and this machine has "
                f"{cores} core{'s' if cores != 1 else ''} available; use at most {cores} (each process loads the model and the data)"
            )


def check_run(recipe: Recipe) -> None:
    t, adapter = recipe.trainer, recipe.adapter
    check_accelerator(t.accelerator)
    check_cpu_devices(t)
    waiting = check_num_nodes(t.num_nodes)
    if waiting and os.environ.get("LOCAL_RANK", "0") == "0":
        print(waiting, flush=True)  # once per node: each node's log says what it waits for
    strategies = known_strategies()
    if t.strategy not in strategies:
        raise unknown_name("trainer.strategy (for the installed Lightning)", t.strategy, strategies)
    deepspeed = t.strategy.startswith("deepspeed")
    if deepspeed and importlib.util.find_spec("deepspeed") is None:
        raise ConfigError(f"trainer.strategy '{t.strategy}' needs DeepSpeed, which is not installed (pip install deepspeed)")
    if adapter.path is not None:
        from pathlib import Path

        if adapter.type == "none":
            raise ConfigError("adapter.path: loading a trained adapter needs adapter.type lora or qlora")
        if not (Path(adapter.path).expanduser() / "adapter_config.json").is_file():
            raise ConfigError(f"adapter.path: {adapter.path} holds no adapter_config.json (a peft adapter folder)")
    gpu = uses_gpu(t)
    if recipe.model.attn_implementation == "flash_attention_2":
        # transformers raises ImportError from deep inside from_pretrained, after the data is read.
        if importlib.util.find_spec("flash_attn") is None:
            raise ConfigError("model.attn_implementation 'flash_attention_2' needs the flash-attn package, which is not "
                              "installed (pip install flash-attn); or use sdpa")
        if not gpu:
            raise ConfigError("model.attn_implementation 'flash_attention_2' runs on CUDA GPUs only; on this machine use sdpa or eager")
    if t.precision == "16-mixed" and not gpu:
        # Lightning would silently switch to bf16-mixed on a CPU.
        raise ConfigError("trainer.precision '16-mixed' needs a GPU; on a CPU use 'auto' (bf16-mixed where the CPU has bf16) or '32-true'")
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
        if adapter.bits == 4 and device == "cpu" and _bnb_packs_for_cpu():
            narrow = narrow_4bit_layers(recipe)
            if narrow:
                k_block, n_block = CPU_4BIT_BLOCKS
                raise ConfigError(
                    f"adapter.type 'qlora' (4-bit): model '{recipe.model.name}' has {len(narrow)} linear layer(s) "
                    f"that bitsandbytes' 4-bit CPU kernel cannot pack (it needs inputs in multiples of {k_block} "
                    f"and outputs in multiples of {n_block}): {', '.join(narrow[:3])}"
                    f"{', ...' if len(narrow) > 3 else ''}; use adapter.bits 8, adapter.type lora, or a wider model"
                )
    if adapter.type != "none" and recipe.model.has_head and adapter.target_modules != "all-linear" and not adapter.target_modules:
        raise ConfigError("adapter.target_modules: name at least one module, or 'all-linear'")
