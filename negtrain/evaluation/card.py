"""The negation report card: any model's accuracy and consistency on every negation benchmark its
family can score, with no recipe to write.

``python -m negtrain evaluate --model NAME --family F [--adapter DIR] [--benchmarks all|a,b]
[--shots K] [--out DIR] [--strict]`` builds an evaluation-only recipe, runs it like ``validate``
(the same Trainer, so ``--trainer.devices`` / ``--trainer.strategy`` spread a large model over
several GPUs, and ``--trainer.precision`` defaults to ``auto``), and writes into ``DIR``:

- ``recipe.yaml`` (the resolved benchmarks, prompts and verbalizers), ``metrics.jsonl`` and
  ``predictions/<benchmark>-<split>-validate.jsonl``, in the run-directory format, so
  ``evaluate --predictions`` re-scores every file to the same numbers and ``report --run`` reads
  a card like a one-epoch run;
- ``card.md``: benchmarks x (accuracy, every consistency metric), with the wall time and
  examples/s per benchmark, and the benchmarks skipped (data not found) with the reason;
- ``card.png``: accuracy against consistency, one point per benchmark.

``NAME`` is a Hub id, a local folder, ``pkg:<package>/<dir>``, or a negtrain run directory or
``.ckpt`` (then the run's own recipe.yaml gives the model and family, and its checkpoint the
weights). With ``all``, a benchmark whose data cannot be read is skipped and listed (``--strict``:
an error instead); a benchmark named in ``--benchmarks`` must be readable. The same holds for the
split its shots come from.

A card survives a kill: benchmarks are scored one at a time and each is kept as soon as it is
done (``parts/<benchmark>-<split>.json``, after its predictions file), and the same command into
the same ``DIR`` continues from there; ``metrics.jsonl`` and the card are assembled from the parts.
``--backend openai`` (or any row of the backends table, :mod:`negtrain.config.backends`) scores a
served model instead of loading one (:mod:`negtrain.evaluation.served`).

The card is three modules: :mod:`negtrain.evaluation.card_plan` (the typed request and the plan, resolved
once before any model is loaded), :mod:`negtrain.evaluation.card_run` (scoring and the card's directory) and
:mod:`negtrain.evaluation.card_render` (card.md and card.png); this module names what they offer.
"""

from negtrain.evaluation.card_plan import (
    CardPlan,
    CardRequest,
    card_recipe,
    check_model_exists,
    default_out,
    family_from_config,
    head_cannot_score,
    plan_card,
    run_head_labels,
)
from negtrain.evaluation.card_render import SAME_SPOT, SMALL_PART, card_markdown, chat_template_line, plot_card, scored_count, write_card
from negtrain.evaluation.card_run import FRESH_HEAD_NOTE, FRESH_HEAD_REMEDY, PARTS, make_card, part_path, set_name

__all__ = [
    "FRESH_HEAD_NOTE", "FRESH_HEAD_REMEDY", "PARTS", "SAME_SPOT", "SMALL_PART", "CardPlan", "CardRequest", "card_markdown",
    "card_recipe", "chat_template_line", "check_model_exists", "default_out", "family_from_config", "head_cannot_score",
    "make_card", "part_path", "plan_card", "plot_card", "run_head_labels", "scored_count", "set_name", "write_card",
]
