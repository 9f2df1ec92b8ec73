"""Which labels a classification head has, and how they meet a benchmark's labels.

Training targets are *sets* of head classes: a two-way "not_entailment" gold label on a
three-way head is satisfied by neutral or contradiction, so the loss is the negative log of the
probability mass on {neutral, contradiction}. Predictions are the head's argmax, coarsened into the
benchmark's label set. Both directions use only :func:`negtrain.core.labels.coarsen`.

A benchmark may accept predictions in more than one label space (``Benchmark.prediction_spaces``,
finest first): NaN-NLI is 3-way, but its paper also scores a binary view. A head is scored in the
finest space all of its classes can be expressed in, so a 2-way head gets NaN-NLI's binary view,
and the metric says so. Nothing here knows any benchmark by name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from negtrain.core import labels as nli
from negtrain.core.errors import ConfigError

if TYPE_CHECKING:  # annotations; the functions that compute with torch import it (a head's labels are read without it)
    import torch


def checkpoint_labels(id2label: Mapping[int, str] | None) -> list[str] | None:
    """The checkpoint's head labels in head order, if they are all recognisable NLI labels."""
    if not id2label:
        return None
    names = [nli.normalize(id2label[i]) for i in sorted(id2label)]
    known = [n for n in names if n]
    return known if len(known) == len(names) and len(set(known)) == len(known) else None


#: Where a sequence classifier keeps its head (BERT/DeBERTa/RoBERTa: classifier; decoder-style: score).
HEAD_MODULES = ("classifier", "score")


def reset_loaded_head(model: torch.nn.Module, missing_keys: Sequence[str]) -> list[str]:
    """Re-initialize head weights that came from the checkpoint; returns their names.

    Called when the checkpoint's head has no NLI label names: it was trained for another task (or
    is a placeholder), and from_pretrained keeps it whenever its size happens to match the new
    head's. Linear layers get BERT's init (normal with ``initializer_range``, zero bias), drawn
    from the seeded global RNG like the weights from_pretrained initializes itself.
    """
    import torch

    std = getattr(model.config, "initializer_range", 0.02)
    missing = set(missing_keys)
    reset = []
    for head in HEAD_MODULES:
        module = getattr(model, head, None)
        if module is None:
            continue
        for name, layer in module.named_modules():
            if not isinstance(layer, torch.nn.Linear):
                continue
            prefix = ".".join(p for p in (head, name) if p)
            if f"{prefix}.weight" in missing:
                continue  # freshly initialized already
            with torch.no_grad():
                layer.weight.normal_(0.0, std)
                if layer.bias is not None:
                    layer.bias.zero_()
            reset.append(prefix)
    return reset


def choose_head_labels(
    configured: Sequence[str] | None,
    from_checkpoint: Sequence[str] | None,
    train_label_sets: Iterable[Sequence[str]],
) -> list[str]:
    if configured:
        normalized = [nli.normalize(x) for x in configured]
        if not all(normalized):
            raise ConfigError(f"model.head_labels: {list(configured)} contains a label that is not an NLI label")
        if len(set(normalized)) != len(normalized):
            raise ConfigError(f"model.head_labels: {list(configured)} names one label twice (labels are matched by meaning, not spelling)")
        return [x for x in normalized if x]  # every one is a label (checked above): typed as such
    if from_checkpoint:
        return list(from_checkpoint)
    sets = [tuple(s) for s in train_label_sets]
    return list(nli.NLI3 if any(len(s) == 3 for s in sets) else nli.NLI2)


def target_mask(gold: Sequence[str], head: Sequence[str]) -> torch.Tensor:
    """(N, H) bool: which head classes count as right for each gold label."""
    labels: dict[str, int] = {}
    codes = np.fromiter((labels.setdefault(g, len(labels)) for g in gold), dtype=np.int32, count=len(gold))
    return coded_target_mask(codes, list(labels), head)


def coded_target_mask(codes: np.ndarray, labels: Sequence[str], head: Sequence[str]) -> torch.Tensor:
    """(N, H) bool, as :func:`target_mask`, from each gold label's code (its index in ``labels``):
    one row per label looked up by the codes, so a source of millions of pairs makes no Python
    object per pair."""
    import torch

    table = torch.zeros((len(labels), len(head)), dtype=torch.bool)
    for code in np.unique(codes).tolist():  # only the labels present must fit the head
        label = labels[code]
        row = [h == label or nli.coarsen(h) == label or nli.coarsen(label) == h for h in head]
        if not any(row):
            raise ConfigError(f"gold label '{label}' cannot be expressed by a head with labels {list(head)}")
        table[code] = torch.tensor(row)
    return table[torch.from_numpy(np.asarray(codes, dtype=np.int64))]


def prediction_space(head: Sequence[str], spaces: Sequence[Sequence[str]], benchmark: str) -> tuple[str, ...]:
    """The finest of a benchmark's prediction spaces that every head class can be expressed in."""
    for space in spaces:
        if all(nli.into(h, space) is not None for h in head):
            return tuple(space)
    raise ConfigError(
        f"benchmark '{benchmark}' scores predictions in {[list(s) for s in spaces]}; a head with labels "
        f"{list(head)} cannot be expressed in any of them"
    )


def head_to_benchmark(head: Sequence[str], benchmark_labels: Sequence[str], benchmark: str) -> torch.Tensor:
    """For each head class, the benchmark label id its prediction means."""
    import torch

    mapped = []
    for h in head:
        label = nli.into(h, benchmark_labels)
        if label is None:
            raise ConfigError(
                f"benchmark '{benchmark}' has labels {list(benchmark_labels)}; a head with labels "
                f"{list(head)} cannot predict them (its '{h}' has no counterpart)"
            )
        mapped.append(benchmark_labels.index(label))
    return torch.tensor(mapped, dtype=torch.long)


def set_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean of -log P(head class in target set)."""
    import torch

    logp = torch.log_softmax(logits.float(), dim=-1)
    return -(torch.logsumexp(logp.masked_fill(~targets, float("-inf")), dim=-1)).mean()
