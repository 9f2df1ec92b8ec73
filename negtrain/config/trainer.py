"""The ``trainer:`` section: the Lightning Trainer arguments a recipe may set."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from negtrain.config.section import MAX_TORCH_THREADS, Section


class TrainerConfig(Section):
    """A typed subset of Lightning's Trainer arguments: what a recipe may set."""

    max_epochs: int = Field(3, gt=0)
    max_steps: int = Field(
        -1, ge=-1, description="Stop after this many optimizer steps (-1: no limit). Under DDP a step takes one batch on every rank."
    )
    accumulate_grad_batches: int = Field(1, gt=0)
    gradient_clip_val: float | None = Field(None, ge=0)
    precision: Literal["auto", "32", "32-true", "bf16-mixed", "16-mixed", "bf16-true"] = Field(
        "32-true",
        description="'bf16-mixed' autocasts matmuls to bf16: several times faster where the hardware computes "
        "bf16 (CUDA GPUs with bf16, CPUs with AVX512-BF16 or AMX, Arm CPUs with BF16), but on a CPU without "
        "bf16 units it is emulated and far slower than fp32. 'auto': bf16-mixed where bf16 is native, "
        "32-true elsewhere; the run prints which. Under 'auto' every benchmark number is fp32's: label "
        "scores are rechecked in fp32 near ties (model.fp32_recheck_margin), multiple-choice and cloze "
        "scores are computed in fp32. An explicit lower precision is kept for scoring too, may change the "
        "numbers, and every evaluation line of the run says so in its note.",
    )
    accelerator: str = Field(
        "auto",
        description="Lightning accelerator: auto, cpu, gpu/cuda, mps, ... ; checked against the installed "
        "Lightning and this machine before any model is loaded.",
    )
    devices: int | Literal["auto"] = Field(1, description="Number of devices (processes, at least 1) per node, or 'auto'.")
    strategy: str = Field(
        "auto",
        description="Lightning strategy: auto, ddp, ddp_spawn, fsdp, deepspeed_stage_2, "
        "deepspeed_stage_3, ... (any name the installed Lightning registers). Checked against the "
        "adapter and the machine before any model is loaded.",
    )
    num_nodes: int = Field(
        1,
        gt=0,
        description="Machines taking part. More than 1 needs a multi-node launcher (torchrun, SLURM's "
        "srun, ...) or MASTER_ADDR, MASTER_PORT, NODE_RANK and WORLD_SIZE set on every node; "
        "without one a run would wait forever for the other nodes, so it is refused. Under a launcher "
        "each node prints where it waits and for how many nodes.",
    )
    limit_train_batches: int | float = Field(
        1.0,
        description="Fraction (float) or number (int) of training batches per epoch, counted in batches of "
        "data.batch_size as one device takes them: the same examples on any number of devices (under DDP "
        "they are dealt out to the ranks; Lightning's own limit would count per rank). 0 skips training.",
    )
    limit_val_batches: int | float = Field(
        1.0,
        description="Fraction (float) or number (int) of each evaluation set's batches (of data.eval_batch_size, "
        "longest inputs first), counted as one device takes them: the same examples on any number of devices. "
        "Also limits `test`. 0 skips evaluation.",
    )
    log_every_n_steps: int = Field(50, gt=0)
    deterministic: bool | Literal["warn"] = False
    torch_threads: int | None = Field(
        None, gt=0, le=MAX_TORCH_THREADS, description="torch.set_num_threads (1 to 1024); unset leaves torch's default."
    )
    enable_progress_bar: bool = True
    progress_every_s: float = Field(
        60.0,
        ge=0,
        description="The progress line (epoch, step of total, examples/s, elapsed, an ETA that counts evaluation): "
        "in a log (nohup, SLURM, CI, a redirect) a new line every this many seconds while training and evaluating; "
        "in a terminal the same line redrawn every second. 0: none (Lightning's progress bar instead, if "
        "enable_progress_bar).",
    )
    checkpoint_every_n_steps: int | None = Field(
        None,
        gt=0,
        description="Also write checkpoints/last.ckpt inside an epoch, every this many optimizer steps, so a "
        "killed run loses at most that many steps: `fit --resume` continues mid-epoch with the next batch "
        "and ends with the numbers of an uninterrupted run. Unset: at epoch ends only (and on SIGTERM/SIGUSR1, "
        "which always write one). Each write is a full checkpoint (weights and optimizer state): on a large "
        "model keep it to every few minutes.",
    )
    ema_decay: float | None = Field(
        None,
        gt=0,
        lt=1,
        description="Keep an exponential moving average of the weights (Lightning's WeightAveraging with "
        "torch's multi-tensor EMA, updated every optimizer step): evaluation, checkpoints and the final model use the average, "
        "and resume restores both. About 1/(1-decay) steps are averaged. Unset: no averaging.",
    )

    @field_validator("devices", mode="before")
    @classmethod
    def _devices(cls, v: Any) -> Any:
        if isinstance(v, bool) or not (v == "auto" or (isinstance(v, int) and v >= 1)):
            raise ValueError("must be a number of devices (1 or more) or 'auto'")
        return v

    @field_validator("limit_train_batches", "limit_val_batches")
    @classmethod
    def _limit(cls, v: int | float) -> int | float:
        if v < 0 or (isinstance(v, float) and v > 1.0):
            raise ValueError("must be a fraction in [0.0, 1.0] (float) or a number of batches >= 0 (int)")
        return v

    @field_validator("precision", mode="before")
    @classmethod
    def _precision_as_str(cls, v: Any) -> Any:
        return str(v) if isinstance(v, int) else v
