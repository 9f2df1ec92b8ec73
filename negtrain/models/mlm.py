"""The masked-LM family: ``AutoModelForMaskedLM`` trained with a pluggable objective.

One LightningModule (:class:`MaskedLMModule`) serves every MLM objective. The recipe's
``objective:`` section names one in the table :data:`negtrain.objectives.table.OBJECTIVES`; each
objective is one module of :mod:`negtrain.objectives` holding its loss, its batch transform and
what it evaluates itself:

- ``unlikelihood`` (Hosseini et al. 2021): negated-LAMA probes from a ``negated_lama`` or
  ``negated_probes`` training split; see :class:`negtrain.config.UnlikelihoodConfig` for the loss.
- ``cue_masking`` (CueNB, Truong et al. 2022): MLM on a negation-focused corpus where every cue is
  masked; it scores its held-out corpus sentences (``cue_corpus/heldout``: ``mlm_loss``,
  ``cue_recovery_accuracy``).

Evaluation, every epoch: ``negated_probes`` splits in ``data.eval`` report ``negated_top1_error``
and ``affirmative_top1_accuracy``; ``negated_lama`` splits report the metrics of
:mod:`negtrain.metrics.cloze` (P@1, negated top-1 error, rank correlation, top-1 overlap,
mispriming) per source and overall; a cue-masking run also scores its held-out corpus sentences
(``cue_corpus/heldout``: ``mlm_loss``, ``cue_recovery_accuracy``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from negtrain.benchmarks.negated_lama import NegatedLama, common_vocabulary
from negtrain.benchmarks.negated_probes import NEGATED, NegatedProbes
from negtrain.config import MlmModelConfig, Recipe
from negtrain.data.eval_set import EvalSet
from negtrain.core.errors import ConfigError
from negtrain.metrics.cloze import SKIPPED, NegatedLamaMetric, cloze_rows
from negtrain.metrics.probes import ProbeMetric
from negtrain.models.folder_checks import load_tokenizer
from negtrain.models.base import NegtrainModule
from negtrain.models.cloze_vocab import common_vocab, gold_or_skip
from negtrain.models.contract import Built
from negtrain.models.freezing import freeze
from negtrain.models.init_from import load_into, resolve_init
from negtrain.models.mlm_inputs import (
    ClozeTransform,
    MLMData,
    check_one_mask,
    encode_texts,
    object_token,
    prime_token_ids,
    probe_location,
    token_space,
    with_mask_token,
)
from negtrain.models.sources import attention_kwargs, resolve_model_name
from negtrain.objectives.base import Loss, Objective, Prepared
from negtrain.objectives.table import objective_for


# ---------------------------------------------------------------------------------------------
# The module.

#: Attribute names of the position-wise LM head of HF masked-LM classes whose ``base_model``
#: returns the encoder's last hidden states first (BERT, RoBERTa, XLM-R, ALBERT).
_LM_HEADS = ("cls", "lm_head", "predictions")


def lm_head(model):
    """The model's position-wise LM head module, or None when it has none we know to be one."""
    model = getattr(model, "get_base_model", lambda: model)()  # a peft wrapper: the wrapped model
    if getattr(model, "base_model", model) is model:
        return None
    for name in _LM_HEADS:
        head = getattr(model, name, None)
        if isinstance(head, torch.nn.Module):
            return head
    return None



class MaskedLMModule(NegtrainModule):
    config: MlmModelConfig

    def __init__(
        self,
        model,
        config: MlmModelConfig,
        objective: Loss,
        eval_sets: Sequence[EvalSet],
        mask_id: int,
        recipe: Recipe | None = None,
        reference=None,
    ) -> None:
        super().__init__(config, eval_sets, recipe)
        self.model = model.train()
        self.objective = objective
        self.mask_id = mask_id
        # The frozen starting model for KL terms: kept in a list so it is neither trained, nor
        # saved in checkpoints, nor counted as a submodule.
        self._reference = [reference.eval().requires_grad_(False)] if reference is not None else []

    def on_fit_start(self) -> None:
        for ref in self._reference:
            ref.to(self.device)

    def logits(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, attention_mask=attention_mask).logits

    def _at_mask(self, input_ids: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        # One mask token per row: checked once when the probes are encoded (check_one_mask), so
        # no per-step host sync here.
        return logits[input_ids == self.mask_id]

    def mask_logits(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """(N, V) logits at each row's single mask token.

        Where the model is an encoder plus a separate LM head (BERT's ``cls``, RoBERTa's
        ``lm_head``, ALBERT's ``predictions``), the head runs on the mask positions only: it is a
        position-wise function, so the logits are the same, and on MiniLM-L6 the vocabulary
        projection over every position costs more than the encoder itself."""
        head = lm_head(self.model)
        if head is None:
            return self._at_mask(input_ids, self.logits(input_ids, attention_mask))
        hidden = self.model.base_model(input_ids=input_ids, attention_mask=attention_mask)[0]
        return head(hidden[input_ids == self.mask_id])

    def reference_logits(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        if not self._reference:
            raise RuntimeError("this objective has no frozen reference model")
        ref = self._reference[0]
        if next(ref.parameters()).device != input_ids.device:
            ref.to(input_ids.device)
        with torch.no_grad():
            return ref(input_ids=input_ids, attention_mask=attention_mask).logits

    def reference_mask_logits(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        if self._reference and lm_head(self._reference[0]) is not None:
            ref = self._reference[0]
            if next(ref.parameters()).device != input_ids.device:
                ref.to(input_ids.device)
            with torch.no_grad():
                hidden = ref.base_model(input_ids=input_ids, attention_mask=attention_mask)[0]
                return lm_head(ref)(hidden[input_ids == self.mask_id])
        return self._at_mask(input_ids, self.reference_logits(input_ids, attention_mask))

    def training_loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.objective.loss(self, batch)

    def loss_units(self, batch: dict[str, torch.Tensor]) -> torch.Tensor | None:
        return self.objective.units(batch)

    def predict(self, batch: dict[str, torch.Tensor], eval_set: EvalSet) -> torch.Tensor:
        assert eval_set.evaluator is not None, f"{eval_set.name}: an eval set of the MLM family without its evaluator"
        with self.fp32_scoring(batch["input_ids"].device.type):
            return eval_set.evaluator(self, batch)


# ---------------------------------------------------------------------------------------------
# Evaluators: per-example predictions for a metric.


class ProbeEvaluator:
    """Top-1 token at the mask, as an id into the eval set's token space."""

    def __init__(self, vocab_to_space: torch.Tensor) -> None:
        self.vocab_to_space = vocab_to_space

    def __call__(self, module: MaskedLMModule, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        top = module.mask_logits(batch["input_ids"], batch["attention_mask"]).argmax(-1)
        return self.vocab_to_space.to(top.device)[top]


class LamaEvaluator:
    """Per negated-LAMA probe, the row of :func:`negtrain.metrics.cloze.cloze_rows` from the scores
    at the blank of its affirmative, negated and misprimed cloze. ``common``: LAMA's common
    vocabulary as vocabulary ids; ``gold``: per probe its object's vocabulary id (-1: skipped)."""

    def __init__(self, vocab_to_space: torch.Tensor, common: torch.Tensor, gold: torch.Tensor) -> None:
        self.vocab_to_space, self.common, self.gold = vocab_to_space, common, gold

    def __call__(self, module: MaskedLMModule, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        aff = module.mask_logits(batch["input_ids"], batch["attention_mask"])
        neg = module.mask_logits(batch["neg_input_ids"], batch["neg_attention_mask"])
        mis = module.mask_logits(batch["mis_input_ids"], batch["mis_attention_mask"])
        return cloze_rows(aff, neg, mis, self.vocab_to_space, self.common, self.gold[batch["index"].cpu()])


# ---------------------------------------------------------------------------------------------
# The builder.


def load_mlm(cfg: MlmModelConfig, tokenizer_hook=None):
    """(tokenizer, model, fresh) for the recipe's model or ``model.init_from`` run; ``fresh``: the
    modules whose weights the source did not have (a sentence encoder has no MLM head)."""
    from transformers import AutoConfig, AutoModelForMaskedLM

    if cfg.init_from:
        source = resolve_init(cfg.init_from)
        tokenizer = load_tokenizer(str(source.model_dir), "model.init_from")
        model = AutoModelForMaskedLM.from_config(AutoConfig.from_pretrained(source.model_dir), **attention_kwargs(cfg))
        report = load_into(model, source)
        print(report.summary(source), flush=True)
        missing = report.fresh
    else:
        path = resolve_model_name(cfg.name)
        tokenizer = load_tokenizer(path, "model")
        model, info = AutoModelForMaskedLM.from_pretrained(path, output_loading_info=True, **attention_kwargs(cfg))
        missing = info["missing_keys"]
    # position_ids and the like are buffers, not learned weights.
    fresh = sorted({k.rsplit(".", 1)[0] for k in missing if k.endswith((".weight", ".bias"))})
    return tokenizer, model, fresh


class EvaluationOnly(Loss):
    """The loss of an mlm recipe without an objective (a report card): it only evaluates."""

    def loss(self, module: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        raise RuntimeError("this masked-LM recipe has no objective section, so it cannot train")


class _NoObjective(Objective):
    """Evaluation alone: no training data, no added tokens; multi-token objects are scored on
    their first sub-token (the note on the metric says so), as the offline recipe trains them."""

    multi_token_objects = "first_subtoken"

    def prepare(self, recipe, loaded, tokenizer, model) -> Prepared:
        return Prepared(loss=EvaluationOnly(), train=None, train_transform=None)


def build_mlm(recipe, loaded):
    """The MLM family's builder (see :mod:`negtrain.models.families`)."""
    cfg = recipe.model
    objective = objective_for(recipe.objective) if recipe.objective is not None else _NoObjective(None)
    for b, split, _ in loaded.eval:
        if not isinstance(b, (NegatedProbes, NegatedLama)):
            raise ConfigError(f"data.eval: the 'mlm' family scores negated_probes and negated_lama, not {b.name}/{split}")
    objective.check(loaded)

    tokenizer, model, fresh = load_mlm(cfg)
    if tokenizer.mask_token is None:
        raise ConfigError(f"model {cfg.name}: the tokenizer has no mask token, so it cannot be a masked LM")
    objective.add_tokens(tokenizer)
    if model.get_input_embeddings().num_embeddings != len(tokenizer):
        model.resize_token_embeddings(len(tokenizer))
    freeze(model, cfg)  # after the resize, which replaces the embedding parameters
    pad_id = tokenizer.pad_token_id or 0
    policy = objective.multi_token_objects

    # Per-epoch probe evaluation.
    eval_sets = []
    space, vocab_to_space = token_space(tokenizer) if loaded.eval else ((), None)
    note = "multi-token objects scored on their first sub-token" if policy == "first_subtoken" else None
    for b, split, examples in loaded.eval:
        if isinstance(b, NegatedLama):
            encoded = []
            for k, what in enumerate(("masked_sentences", "masked_negations", "masked_misprimed")):
                enc = encode_texts(tokenizer, [with_mask_token(e.inputs[k], tokenizer) for e in examples], cfg.max_length)
                check_one_mask(enc, tokenizer.mask_token_id, examples, what, cfg.max_length)
                encoded.append(enc)
            # Scored over LAMA's common vocabulary, as K&S score it: a probe whose object is not a
            # one-token word of it for this model is skipped (multi_token_objects is for training).
            common = common_vocab(tokenizer, common_vocabulary(), causal=False)
            gold_ids, reasons = gold_or_skip(common, [e.label for e in examples])
            gold = [int(vocab_to_space[g]) if g >= 0 else SKIPPED for g in gold_ids]
            primes = [[int(vocab_to_space[i]) for i in prime_token_ids(tokenizer, e.meta["prime"])] for e in examples]
            metric = NegatedLamaMetric(
                gold, primes, [e.subset for e in examples], [e.group for e in examples],
                files=[e.meta["relation_file"] for e in examples], space=space, common_vocab_left_out=common.left_out,
                skip_reasons=reasons,
            )
            eval_sets.append(EvalSet(
                b, split, list(examples), encoded[0], predicted_labels=space, metric=metric,
                evaluator=LamaEvaluator(vocab_to_space, common.ids, torch.tensor(gold_ids, dtype=torch.long)),
                transform=ClozeTransform(encoded[1], encoded[2], pad_id),
            ))
            continue
        texts = [with_mask_token(e.inputs[0], tokenizer) for e in examples]
        gold = [int(vocab_to_space[object_token(tokenizer, e.inputs[0], e.label, policy, probe_location(e))]) for e in examples]
        encoded = encode_texts(tokenizer, texts, cfg.max_length)
        check_one_mask(encoded, tokenizer.mask_token_id, examples, "probe", cfg.max_length)
        # A probe's two sentences are one bootstrap unit, as when its predictions file is scored.
        metric = ProbeMetric(gold, [e.subset == NEGATED for e in examples], note=note, groups=[e.group for e in examples])
        eval_sets.append(EvalSet(
            b, split, list(examples), encoded, predicted_labels=space, metric=metric, evaluator=ProbeEvaluator(vocab_to_space),
        ))

    prepared = objective.prepare(recipe, loaded, tokenizer, model)
    eval_sets += prepared.eval_sets
    module = MaskedLMModule(
        model, cfg, prepared.loss, eval_sets, recipe=recipe, mask_id=tokenizer.mask_token_id, reference=prepared.reference,
    )
    data_config = recipe.data
    if prepared.train_sources is not None:
        data_config = data_config.model_copy(update={"train": prepared.train_sources})
    data = MLMData(data_config, recipe.seed, pad_id, prepared.train, eval_sets, train_transform=prepared.train_transform)
    return Built(module, data, tokenizer, fresh_head=fresh)
