"""What every model family shares: per-epoch evaluation of every configured benchmark, and the
optimizer. A family subclass supplies ``training_loss`` and ``predict``."""

from __future__ import annotations

import contextlib
from abc import abstractmethod
from collections.abc import Sequence
from typing import Any

import lightning.pytorch as pl
import torch
from torch import nn

from negtrain.config import AdapterConfig, EvaluationConfig, ModelSection, Recipe, to_dict
from negtrain.data.eval_set import EvalSet
from negtrain.data.scoring import scored_result
from negtrain.core.errors import ConfigError
from negtrain.models.adapters import trainable_state
# What an eval record says of its precision is its own module, so a card answered by the engine
# (no Lightning) says it in the same words; imported here where the records use it.
from negtrain.models.precision_note import precision_note
from negtrain.models.schedules import lr_schedule


def optimizer_kwargs(impl: str, params: list[torch.Tensor], clip_under_amp: bool = False) -> dict[str, bool]:
    """AdamW implementation flags. 'auto' picks the fused kernel: measured on a 2-core CPU its step
    on MiniLM-L6's 22M parameters takes 0.03 s against 0.11-0.43 s for torch's per-parameter loop.

    ``clip_under_amp``: gradient clipping under a mixed-precision plugin. Lightning cannot clip for
    a fused optimizer there (it unscales gradients inside its step), so 'auto' takes foreach."""
    if impl == "auto":
        # Fused AdamW needs floating-point params on a supported device (CPU and CUDA in torch>=2.4).
        fusable = all(p.is_floating_point() and p.device.type in ("cpu", "cuda") for p in params)
        impl = "fused" if fusable and not clip_under_amp else "foreach"
    elif impl == "fused" and clip_under_amp:
        raise ConfigError(
            "model.optimizer_impl: 'fused' cannot be combined with trainer.gradient_clip_val under a "
            "mixed precision; use 'auto' (foreach here) or drop the clipping"
        )
    return {"fused": {"fused": True}, "foreach": {"foreach": True}, "for-loop": {"foreach": False}}[impl]


def close_calls(logits: torch.Tensor, margin: float | None) -> torch.Tensor | None:
    """Indices of rows whose top two logits are within ``margin``, when autocast to a lower
    precision is on (else None: nothing to recheck). Families rescore those rows in fp32, so
    mixed-precision evaluation reports fp32's predictions (``model.fp32_recheck_margin``)."""
    if margin is None or logits.shape[-1] < 2 or not torch.is_autocast_enabled(logits.device.type):
        return None
    top2 = logits.topk(2, dim=-1).values
    close = ((top2[:, 0] - top2[:, 1]) < margin).nonzero().squeeze(-1)
    return close if close.numel() else None


def _metric_key(name: str) -> str:
    return name.replace(".", "\N{MIDDLE DOT}")


class NegtrainModule(pl.LightningModule):
    def __init__(self, config: ModelSection, eval_sets: Sequence[EvalSet], recipe: Recipe | None = None) -> None:
        super().__init__()
        self.config = config
        #: The transformers model the family wraps, set by the family's module: its config is
        #: recorded in provenance.json and saved beside the weights (model/config.json). None: a
        #: family with no transformers model (a rule), which has no config to record. Any: a
        #: transformers model or its peft wrapper, whose parts are named per architecture.
        self.model: Any = None
        #: The eval sets, in the order of the DataModule's eval dataloaders (``dataloader_idx``).
        self.eval_sets = list(eval_sets)
        names = [s.name for s in self.eval_sets]
        if len(set(names)) != len(names):
            raise ValueError(f"eval sets named twice: {names}")
        # Each set's metric, registered as a child so that Lightning moves it to the device and
        # DDP syncs it; keyed by the set's name ('.' is not allowed in a module name).
        self.metrics = nn.ModuleDict({_metric_key(s.name): s.metric for s in self.eval_sets})
        #: The resolved recipe as saved in every checkpoint (``negtrain_recipe``); empty for a module
        #: built outside a recipe (tests), which takes the sections' defaults.
        self.recipe: dict[str, Any] = to_dict(recipe) if recipe is not None else {}
        adapter = recipe.adapter if recipe is not None else AdapterConfig()
        evaluation = recipe.evaluation if recipe is not None else EvaluationConfig()
        #: Generated answers of the current evaluation, per eval set name: example index -> text.
        self.eval_texts: dict[str, dict[int, str]] = {}
        #: Per eval set name: example index -> the model's response (generated text, or each
        #: label's score), written beside the prediction (``evaluation.log_samples``).
        self.eval_responses: dict[str, dict[int, Any]] = {}
        #: Per eval set name: example index -> tokens generated for it.
        self.eval_tokens: dict[str, dict[int, int]] = {}
        #: Adapter runs checkpoint only their trainable weights (adapter + head).
        self.adapter_only = adapter.type != "none"
        self.strict_loading = not self.adapter_only
        #: Bootstrap resamples (0: none) and seed for every metric's ci95 (recipe `evaluation`).
        self.bootstrap_resamples: int = evaluation.bootstrap
        self.bootstrap_seed: int = evaluation.bootstrap_seed

    @property
    def precision(self) -> str:
        """The recipe's ``trainer.precision`` as written (``auto`` unless set)."""
        return str((self.recipe.get("trainer") or {}).get("precision", "auto"))

    def fp32_scoring(self, device_type: str):
        """The context an evaluator computes scores in. Under ``trainer.precision: auto`` autocast
        is off: multiple-choice log-likelihoods (NeQA) and cloze distributions (negated LAMA's top-1
        and rank correlation over the vocabulary) are computed in fp32, because no margin bounds
        what bf16 changes there (a Spearman correlation depends on every rank). Label scores are
        rechecked near ties instead (:func:`close_calls`). An explicit lower precision is kept,
        and each eval record carries a note saying so (:func:`precision_note`)."""
        if self.precision == "auto":
            return torch.autocast(device_type=device_type, enabled=False)
        return contextlib.nullcontext()

    @abstractmethod
    def training_loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The batch's mean loss (over what :meth:`loss_units` counts)."""

    def loss_units(self, batch: dict[str, torch.Tensor]) -> torch.Tensor | None:
        """How many things ``training_loss`` averages over, when not the batch's examples (None):
        a loss averaged over target tokens returns their count (or total weight), so that under
        DDP the step's loss is the mean over the step's tokens on every rank."""
        return None

    @abstractmethod
    def predict(self, batch: dict[str, torch.Tensor], eval_set: EvalSet) -> torch.Tensor:
        """Predicted label ids (in the eval set's ``predicted_labels``) for a batch of it."""

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor | dict[str, torch.Tensor]:
        mean = self.training_loss(batch)
        world = self.trainer.world_size if self._trainer is not None else 1
        if world == 1:
            # One process: the batch is the step, and its mean is the step's loss.
            self.log("train/loss", mean, on_step=True, on_epoch=True, batch_size=len(batch["index"]))
            return mean
        return self._global_mean(mean, batch, world)

    def _global_mean(self, mean: torch.Tensor, batch: dict[str, torch.Tensor], world: int) -> dict[str, torch.Tensor]:
        """The step's loss under DDP: the mean over every rank's examples (or tokens) of the step.

        DDP averages gradients over ranks, so a rank's mean over its own batch would make a short
        last batch (or a padding batch) count as much as a full one. Instead each rank returns
        ``world * sum_local / count_global``, whose gradient, averaged over ranks, is that of
        ``sum_all / count_global``. A sampler padding batch gets zero weight.
        """
        real = batch["real"]
        examples = real.sum()
        units = self.loss_units(batch)
        count = (examples if units is None else units.to(examples.device) * real.all()).to(torch.float64)
        local = torch.stack([mean.detach().to(torch.float64) * count, count, examples.to(torch.float64)])
        total, global_count, global_examples = self.trainer.strategy.reduce(local, reduce_op="sum")
        global_count = global_count.clamp_min(torch.finfo(torch.float64).tiny)
        loss = mean * (count * world / global_count).to(mean.dtype)
        # Every rank logs the same step mean, weighted by the step's real examples over the epoch,
        # as one process logs its batch mean.
        step_mean = (total / global_count).float()
        self.log("train/loss", step_mean, on_step=True, on_epoch=True, batch_size=int(global_examples.item()), sync_dist=True)
        # step_mean: what the run recorder averages into the epoch's loss (the returned loss is
        # this rank's scaled share, not a mean).
        return {"loss": loss, "step_mean": step_mean}

    def validation_step(self, batch: dict[str, torch.Tensor], batch_idx: int, dataloader_idx: int = 0) -> None:
        eval_set = self.eval_sets[dataloader_idx]
        eval_set.metric.update(batch["index"], self.predict(batch, eval_set))

    test_step = validation_step

    def on_validation_epoch_end(self) -> None:
        self._finish_evaluation()

    def on_test_epoch_end(self) -> None:
        self._finish_evaluation()

    def _gathered(self, texts: dict[str, dict[int, Any]]) -> dict[str, dict[int, Any]]:
        """Per-example values of every rank, merged."""
        if torch.distributed.is_available() and torch.distributed.is_initialized() and torch.distributed.get_world_size() > 1:
            parts: list[Any] = [None] * torch.distributed.get_world_size()
            torch.distributed.all_gather_object(parts, texts)
            texts = {}
            for part in parts:
                for name, per_set in part.items():
                    texts.setdefault(name, {}).update(per_set)
        return texts

    def _finish_evaluation(self) -> None:
        texts = self._gathered(self.eval_texts)
        responses = self._gathered(self.eval_responses)
        tokens = self._gathered(self.eval_tokens)
        self.eval_texts, self.eval_responses, self.eval_tokens = {}, {}, {}
        for eval_set in self.eval_sets:
            metric, name = eval_set.metric, eval_set.name
            per_example: list[str | None] | None = None
            if name in texts:
                per_example = [None] * metric.num_examples
                for idx, text in texts[name].items():
                    per_example[idx] = text
            eval_set.result = scored_result(metric, name, per_example, also_note=precision_note(self.precision))
            values = eval_set.result.metrics
            if name in responses:
                eval_set.result.responses = [responses[name].get(i) for i in range(metric.num_examples)]
            if name in tokens:
                eval_set.result.tokens_generated = int(sum(tokens[name].values()))
            for key, value in values.items():
                # Already synced over ranks by the metric, so no further reduction.
                self.log(f"{name}/{key}", value, add_dataloader_idx=False, sync_dist=False)
            metric.reset()

    def configure_optimizers(self):
        decay, no_decay = [], []
        for param in self.parameters():
            if not param.requires_grad:
                continue
            # Biases and norm weights are conventionally not decayed (BERT, RoBERTa, DeBERTa).
            (no_decay if param.ndim < 2 else decay).append(param)
        trainer = self.trainer
        clip_under_amp = bool(trainer.gradient_clip_val) and "mixed" in str(trainer.precision)
        kwargs = optimizer_kwargs(self.config.optimizer_impl, decay + no_decay, clip_under_amp)
        optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": self.config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
            lr=self.config.learning_rate,
            **kwargs,
        )
        total = int(self.trainer.estimated_stepping_batches)
        scheduler = lr_schedule(self.config.scheduler, optimizer, int(self.config.warmup_ratio * total), total)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["negtrain_recipe"] = self.recipe
        if self.adapter_only:
            checkpoint["state_dict"] = trainable_state(self, checkpoint["state_dict"])
            checkpoint["negtrain_adapter_only"] = True
