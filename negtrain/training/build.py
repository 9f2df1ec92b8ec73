"""Turning a validated recipe into a LightningModule and a LightningDataModule.

All checks that can fail on the user's input (benchmark names, splits, the selection metric, the
data files) run before the model is loaded, so a mistake costs seconds, not a model download.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from negtrain.benchmarks.base import Benchmark, Example
from negtrain.benchmarks.registry import get_benchmark
from negtrain.config import EvalConfig, Recipe, to_dict
from negtrain.data.encoded import EncodedSplit
from negtrain.data.module import EvalSet, NegtrainData, TrainSet
from negtrain.errors import ConfigError, did_you_mean
from negtrain.metrics.base import MISSING, ExampleMetric
from negtrain.models.base import NegtrainModule
from negtrain.models.heads import checkpoint_labels, choose_head_labels, head_to_benchmark, target_mask
from negtrain.models.nli import NLIModule, encode_pairs
from negtrain.models.sources import resolve_model_name


@dataclass
class Selection:
    """The checkpoint-selection metric and its direction, from the metric's declaration."""

    monitor: str
    higher_is_better: bool

    @property
    def mode(self) -> str:
        return "max" if self.higher_is_better else "min"


@dataclass
class Built:
    module: NegtrainModule
    data: NegtrainData
    tokenizer: Any
    selection: Selection | None


def _benchmark_split(name: str, split: str) -> Benchmark:
    bench = get_benchmark(name)
    bench.check_split(split)
    return bench


def metric_names(metric: ExampleMetric) -> list[str]:
    """The names a metric reports, read off a scoring of no predictions."""
    return list(metric.score(np.full(metric.num_examples, MISSING)))


def resolve_selection(recipe: Recipe, eval_sets: list[EvalSet], metrics: list[ExampleMetric]) -> Selection | None:
    if not eval_sets:
        return None
    available = {}
    for s, m in zip(eval_sets, metrics):
        for key in metric_names(m):
            available[f"{s.name}/{key}"] = m.is_higher_better(key)
    wanted = recipe.selection.metric or f"{eval_sets[0].name}/{metric_names(metrics[0])[0]}"
    if wanted not in available:
        raise ConfigError(f"selection.metric: '{wanted}' is not reported by the eval benchmarks{did_you_mean(wanted, available)}")
    return Selection(wanted, available[wanted])


def _load_eval_sets(specs: list[EvalConfig]) -> list[tuple[Benchmark, str, list[Example]]]:
    seen = set()
    for spec in specs:
        if (spec.benchmark, spec.split) in seen:
            raise ConfigError(f"data.eval lists {spec.benchmark}/{spec.split} twice")
        seen.add((spec.benchmark, spec.split))
    benches = [(_benchmark_split(s.benchmark, s.split), s.split) for s in specs]
    return [(b, split, b.load(split)) for b, split in benches]


def build(recipe: Recipe, stage: str = "fit") -> Built:
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

    cfg = recipe.model
    train_specs = recipe.data.train if stage == "fit" else []
    eval_specs = recipe.data.test if stage == "test" and recipe.data.test is not None else recipe.data.eval
    if stage == "fit" and not train_specs:
        raise ConfigError("data.train: `fit` needs at least one training source")

    # 1. Names and splits, then the data files: cheap checks first.
    train_benches = [(_benchmark_split(s.benchmark, s.split), s.split) for s in train_specs]
    eval_loaded = _load_eval_sets(eval_specs)
    train_loaded = [(b, split, b.load(split)) for b, split in train_benches]

    # 2. Tokenizer, head labels, model.
    path = resolve_model_name(cfg.name)
    tokenizer = AutoTokenizer.from_pretrained(path)
    hf_config = AutoConfig.from_pretrained(path)
    ckpt_labels = checkpoint_labels(getattr(hf_config, "id2label", None))
    head = choose_head_labels(cfg.head_labels, ckpt_labels, [b.labels for b, _, _ in train_loaded])
    if ckpt_labels and cfg.head_labels and head != ckpt_labels and len(head) == len(ckpt_labels):
        raise ConfigError(
            f"model.head_labels {head} disagrees with the checkpoint's head {ckpt_labels}; "
            "drop model.head_labels to use the checkpoint's head as it is"
        )
    eval_sets = [EvalSet(b, split, ex, encode_pairs(tokenizer, ex, cfg.max_length)) for b, split, ex in eval_loaded]
    head_maps = [head_to_benchmark(head, s.benchmark.labels, s.benchmark.name) for s in eval_sets]
    metrics = [s.benchmark.metric(s.examples) for s in eval_sets]
    selection = resolve_selection(recipe, eval_sets, metrics)

    train = None
    if train_loaded:
        encoded = [encode_pairs(tokenizer, ex, cfg.max_length) for _, _, ex in train_loaded]
        gold = [e.label for _, _, ex in train_loaded for e in ex]
        train = TrainSet(
            encoded=EncodedSplit.concat(encoded),
            extras={"targets": target_mask(gold, head)},
            sources=[f"{b.name}/{split}" for b, split, _ in train_loaded],
            source_sizes=[len(ex) for _, _, ex in train_loaded],
        )

    model = AutoModelForSequenceClassification.from_pretrained(
        path,
        num_labels=len(head),
        id2label=dict(enumerate(head)),
        label2id={l: i for i, l in enumerate(head)},
        ignore_mismatched_sizes=ckpt_labels is None or len(ckpt_labels) != len(head),
    )
    module = NLIModule(
        model,
        cfg,
        head,
        [s.name for s in eval_sets],
        metrics,
        head_maps,
        recipe=to_dict(recipe),
    )
    data = NegtrainData(recipe.data, recipe.seed, tokenizer.pad_token_id or 0, train, eval_sets)
    return Built(module, data, tokenizer, selection)


def reload_weights(module: NegtrainModule, checkpoint: str) -> None:
    state = torch.load(checkpoint, map_location="cpu", weights_only=True)
    module.load_state_dict(state["state_dict"])
