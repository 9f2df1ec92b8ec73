"""The language-model families' eval sets: one per recipe entry, its rows put to the model as the
engine's requests (:mod:`negtrain.engine.entry_requests`), whatever the answer mode (generation,
verbalizers, choices, cloze). Built before any weights load, so a prompt that does not fit the
model's context is an error in seconds (:mod:`negtrain.engine.prompts`); during ``fit``,
``validate`` and ``test`` each batch of a set is only its rows' indices (sharded across DDP ranks
by the data module), answered by the in-process backend wrapped round the module's live model
(:meth:`negtrain.models.lm.LMModule.predict`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from negtrain.data.encoded import EncodedSplit
from negtrain.data.eval_set import EvalSet
from negtrain.engine.entry_requests import entry_requests
from negtrain.engine.prompts import prepare_entry


def engine_eval_sets(recipe, loaded, backend) -> list[EvalSet]:
    """One :class:`EvalSet` per eval entry of ``loaded``, with its :class:`EntryRequests` for
    ``backend`` (which at this point need only know its tokenizer and context: the weights load
    after every prompt is checked)."""
    sets = []
    specs: Sequence[Any] = loaded.eval_specs or [None] * len(loaded.eval)
    log = recipe.evaluation.log_samples
    for (bench, split, examples), spec in zip(loaded.eval, specs, strict=True):
        entry = spec if spec is not None else _Entry(bench.name, split)
        examples = list(examples)
        prepared = prepare_entry(recipe, entry, backend, examples)
        built = entry_requests(recipe, entry, backend, prepared, examples)
        if prepared.cut is not None:
            built.mark_cut(prepared.cut)
        # A batch is its rows' indices: one token per row keeps the data module's batching as it is.
        encoded = EncodedSplit.from_lists([[0]] * len(examples), None)
        sets.append(EvalSet(
            bench, split, examples, encoded, metric=built.metric, shot_ids=built.shot_ids, answering=built.answering,
            shots_rule=built.settings.shots_rule, prompts=built.rendered if log else None, variant=built.settings.variant,
            log_samples=log, completions=built.completions, predicted_labels=built.predicted_labels, requests=built,
        ))
    return sets


class _Entry:
    """An eval entry with no settings of its own (a module built outside a recipe's entries)."""

    def __init__(self, benchmark: str, split: str) -> None:
        self.benchmark, self.split = benchmark, split
