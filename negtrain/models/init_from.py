"""Starting a model from a previous negtrain run (``model.init_from``).

A run directory holds ``model/`` (the tokenizer, with any added ``[CUE]`` token, and the model
config) and ``checkpoints/`` (Lightning checkpoints whose ``state_dict`` keys are the family
module's ``model.`` attribute followed by the Hugging Face parameter names). ``init_from`` names
the run directory, which uses its single ``best-epoch<N>.ckpt`` (picked by the run's
``selection.metric``) or else ``last.ckpt``, or a ``.ckpt`` file inside ``<run>/checkpoints/``.

Weights are matched by Hugging Face parameter name and shape, so an MLM run's encoder (``bert.*``,
``roberta.*``, ...) loads into a sequence classifier of the same architecture; the parts the
source lacks (a classification head, BERT's pooler) keep their fresh initialisation, and the parts
the target lacks (the MLM head) are dropped. Every encoder (base-model) weight must be found, except
a pooler; anything else is an error, never a silent partial load.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

from negtrain.core.errors import ConfigError
from negtrain.io.checkpoint_reading import read_checkpoint

MODULE_PREFIX = "model."


@dataclass(frozen=True)
class InitSource:
    model_dir: Path  # tokenizer + config
    checkpoint: Path


@dataclass
class LoadReport:
    loaded: list[str] = field(default_factory=list)
    fresh: list[str] = field(default_factory=list)  # target weights not in the source
    dropped: list[str] = field(default_factory=list)  # source weights the target has no place for

    def summary(self, source: InitSource) -> str:
        def short(names: list[str]) -> str:
            heads = sorted({".".join(n.split(".")[:2]) for n in names})
            return ", ".join(heads) or "none"

        return (
            f"init_from {source.checkpoint}: loaded {len(self.loaded)} tensors; "
            f"fresh: {short(self.fresh)}; not used: {short(self.dropped)}"
        )


def resolve_init(value: str) -> InitSource:
    path = Path(value).expanduser()
    if path.is_file():
        if path.suffix != ".ckpt":
            raise ConfigError(f"model.init_from: {path} is not a run directory or a .ckpt file")
        run = path.parent.parent if path.parent.name == "checkpoints" else path.parent
        checkpoint = path
    elif path.is_dir():
        run = path
        best = sorted((path / "checkpoints").glob("best-epoch*.ckpt"))
        checkpoint = best[0] if len(best) == 1 else path / "checkpoints" / "last.ckpt"
        if not checkpoint.is_file():
            raise ConfigError(f"model.init_from: {path} holds no checkpoints/best-epoch*.ckpt or checkpoints/last.ckpt")
    else:
        raise ConfigError(f"model.init_from: {path} does not exist (give a negtrain run directory or a .ckpt in one)")
    model_dir = run / "model"
    if not (model_dir / "config.json").is_file():
        raise ConfigError(f"model.init_from: {model_dir} has no config.json; is {run} a negtrain run directory?")
    return InitSource(model_dir, checkpoint)


def checkpoint_weights(checkpoint: Path) -> dict[str, torch.Tensor]:
    # One clear error for a truncated, foreign or pickled file, as for --checkpoint.
    state = read_checkpoint(checkpoint, "model.init_from", require_recipe=False)
    weights = {k[len(MODULE_PREFIX) :]: v for k, v in state.get("state_dict", {}).items() if k.startswith(MODULE_PREFIX)}
    if not weights:
        raise ConfigError(f"model.init_from: {checkpoint} holds no model weights (no 'model.' keys in its state_dict)")
    return weights


def load_into(model: torch.nn.Module, source: InitSource) -> LoadReport:
    """Copy the checkpoint's weights into ``model`` by name and shape; see the module docstring."""
    weights = checkpoint_weights(source.checkpoint)
    own = model.state_dict()
    report = LoadReport()
    usable = {}
    for name, value in weights.items():
        if name in own and own[name].shape == value.shape:
            usable[name] = value
            report.loaded.append(name)
        elif name in own and not name.startswith(f"{model.base_model_prefix}."):
            report.dropped.append(name)  # a head of another size (e.g. 3-way -> 2-way): fresh here
        elif name in own:
            raise ConfigError(
                f"model.init_from: {name} has shape {tuple(value.shape)} in {source.checkpoint} but "
                f"{tuple(own[name].shape)} here; the architectures differ"
            )
        else:
            report.dropped.append(name)
    report.fresh = [n for n in own if n not in usable]
    base = f"{model.base_model_prefix}."
    missing = [n for n in report.fresh if n.startswith(base) and ".pooler." not in n and not n.endswith("position_ids")]
    if missing or not any(n.startswith(base) for n in report.loaded):
        raise ConfigError(
            f"model.init_from: {source.checkpoint} lacks encoder weights {missing[:5] or '(all)'}; "
            f"it was not trained from a {type(model).__name__.replace('ForSequenceClassification', '')} model"
        )
    model.load_state_dict(usable, strict=False)
    return report
