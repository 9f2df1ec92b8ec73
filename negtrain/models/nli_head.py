"""An NLI model's head labels, decided before any weights load, in one place: from
``model.head_labels``, else the checkpoint's own head (its config's ``id2label``), else the
training data's label sets. ``fit``/``validate``/``test`` build the head with it
(negtrain.models.nli), and ``sweep`` asks it which label space each benchmark will be scored in,
reading the model's ``config.json`` as a file: no transformers, torch or Lightning to answer."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from negtrain.core.errors import ConfigError
from negtrain.models.heads import checkpoint_labels, choose_head_labels, prediction_space
from negtrain.models.sources import resolve_model_name


def head_labels(recipe, id2label: Mapping[int, str] | None, label_sets: Iterable[Sequence[str]]) -> tuple[list[str] | None, list[str]]:
    """(the checkpoint's head labels or None, the head's labels) for a model whose config has
    ``id2label``; ``label_sets``: the training data's (else the eval sets') labels, which size a
    fresh head."""
    cfg = recipe.model
    ckpt_labels = checkpoint_labels(id2label)
    head = choose_head_labels(cfg.head_labels, ckpt_labels, label_sets)
    if ckpt_labels and cfg.head_labels and head != ckpt_labels and len(head) == len(ckpt_labels):
        raise ConfigError(
            f"model.head_labels {head} disagrees with the checkpoint's head {ckpt_labels}; "
            "drop model.head_labels to use the checkpoint's head as it is"
        )
    return ckpt_labels, head


def model_folder(recipe) -> str:
    """The folder (or Hub id) the model's tokenizer and config come from: a previous run's
    ``model/`` under ``model.init_from``, else ``model.name`` resolved."""
    cfg = recipe.model
    if cfg.init_from:
        from negtrain.models.init_from import resolve_init  # torch: only for a chained run

        return str(resolve_init(cfg.init_from).model_dir)
    return resolve_model_name(cfg.name)


def prediction_spaces(recipe, train_benches: Sequence, eval_benches: Sequence) -> list[tuple[str, ...]]:
    """The label space each eval benchmark's predictions will be in (what its metric scores), from
    the model's ``config.json`` read as a file (OSError where there is none here, e.g. a Hub id
    offline)."""
    path = Path(model_folder(recipe)) / "config.json"
    if not path.is_file():
        raise OSError(f"{path}: no such file")
    id2label = json.loads(path.read_text(encoding="utf-8")).get("id2label")
    id2label = {int(k): v for k, v in id2label.items()} if isinstance(id2label, dict) else None
    _, head = head_labels(recipe, id2label, [b.labels for b in (train_benches or eval_benches)])
    return [prediction_space(head, b.spaces(), b.name) for b in eval_benches]
