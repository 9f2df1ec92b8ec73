"""The masked-LM family: ``AutoModelForMaskedLM`` trained with a pluggable objective.

One LightningModule (:class:`MaskedLMModule`) serves every MLM objective; an objective is a loss
(:class:`UnlikelihoodObjective`, :class:`MLMObjective`) plus the batch transform that feeds it
(:mod:`negtrain.objectives.masking`, :class:`negtrain.models.mlm_inputs.ProbeTransform`; the inputs are
prepared in :mod:`negtrain.models.mlm_inputs`). The recipe's ``objective:`` section
picks one:

- ``unlikelihood`` (Hosseini et al. 2021): negated-LAMA probes from a ``negated_lama`` or
  ``negated_probes`` training split; see :class:`negtrain.config.UnlikelihoodConfig` for the loss.
- ``cue_masking`` (CueNB, Truong et al. 2022): MLM on a negation-focused corpus where every cue is
  masked (see :mod:`negtrain.objectives.masking`).

Evaluation, every epoch: ``negated_probes`` splits in ``data.eval`` report ``negated_top1_error``
and ``affirmative_top1_accuracy``; ``negated_lama`` splits report the metrics of
:mod:`negtrain.metrics.cloze` (P@1, negated top-1 error, rank correlation, top-1 overlap,
mispriming) per source and overall; a cue-masking run also scores its held-out corpus sentences
(``cue_corpus/heldout``: ``mlm_loss``, ``cue_recovery_accuracy``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import torch

from negtrain.benchmarks.base import Example
from negtrain.benchmarks.negated_lama import NegatedLama
from negtrain.benchmarks.negated_probes import NEGATED, NegatedProbes
from negtrain.config import ModelConfig, SourceConfig, to_dict
from negtrain.data.module import EvalSet, TrainSet
from negtrain.errors import ConfigError
from negtrain.metrics.base import ExampleMetric
from negtrain.metrics.cloze import NegatedLamaMetric, spearman
from negtrain.metrics.probes import ProbeMetric
from negtrain.models.base import NegtrainModule
from negtrain.models.contract import Built
from negtrain.models.freezing import freeze
from negtrain.models.init_from import load_into, resolve_init
from negtrain.models.mlm_inputs import (
    ClozeTransform,
    CueCorpus,
    MLMData,
    ProbeTransform,
    build_corpus,
    check_one_mask,
    encode_cue_texts,
    encode_texts,
    object_token,
    prime_token_ids,
    probe_location,
    training_probes,
    read_text_lines,
    token_space,
    with_mask_token,
)
from negtrain.models.sources import attention_kwargs, resolve_model_name
from negtrain.negation.cues import CueDetector
from negtrain.objectives import losses
from negtrain.objectives.masking import IGNORE, CueMaskingTransform, MaskingSpec

CUE_TOKEN = "[CUE]"


# ---------------------------------------------------------------------------------------------
# Objectives: the loss of a training batch.


class MLMObjective:
    """Cross-entropy on the masked tokens of a batch (``labels``, -100 elsewhere): CueNB's loss."""

    def loss(self, module: MaskedLMModule, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        logits = module.logits(batch["input_ids"], batch["attention_mask"])
        return torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), batch["labels"].flatten(), ignore_index=IGNORE)

    def units(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return (batch["labels"] != IGNORE).sum()  # the loss is a mean over masked tokens


class UnlikelihoodObjective:
    """γ·UL(negated) + (1−γ)·LL(affirmative) [+ weight·retention]; see UnlikelihoodConfig."""

    def __init__(self, gamma: float, likelihood: str, retention_weight: float = 0.0, retention_loss: str = "mlm") -> None:
        self.gamma = gamma
        self.likelihood = likelihood
        self.retention_weight = retention_weight
        self.retention_loss = retention_loss

    def units(self, batch: dict[str, torch.Tensor]) -> None:
        # A mean over the batch's probes (the retention term's side batch has a fixed size).
        return None

    def loss(self, module: MaskedLMModule, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        obj = batch["obj"]
        n = len(obj)
        if self.gamma > 0:
            neg = module.mask_logits(batch["neg_input_ids"], batch["neg_attention_mask"])
            ul = losses.unlikelihood(neg, obj)
            module.log("train/unlikelihood", ul.mean(), on_step=False, on_epoch=True, batch_size=n)
        else:
            ul = torch.zeros(n, device=obj.device)
        if self.gamma < 1:
            aff = module.mask_logits(batch["input_ids"], batch["attention_mask"])
            if self.likelihood == "ce":
                ll = losses.likelihood(aff, obj)
            else:
                ref = module.reference_mask_logits(batch["input_ids"], batch["attention_mask"])
                ll = losses.kl_to_reference(aff, ref)
            module.log("train/likelihood", ll.mean(), on_step=False, on_epoch=True, batch_size=n)
        else:
            ll = torch.zeros(n, device=obj.device)
        total = losses.combine(self.gamma, ul, ll)
        if self.retention_weight and "ret_input_ids" in batch:
            ids, att, labels = batch["ret_input_ids"], batch["ret_attention_mask"], batch["ret_labels"]
            logits = module.logits(ids, att)
            where = labels != IGNORE
            if self.retention_loss == "mlm":
                ret = torch.nn.functional.cross_entropy(logits[where].float(), labels[where])
            else:
                with torch.no_grad():
                    ref = module.reference_logits(ids, att)
                ret = losses.kl_to_reference(logits[where], ref[where]).mean()
            module.log("train/retention", ret, on_step=False, on_epoch=True, batch_size=n)
            total = total + self.retention_weight * ret
        return total


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
    def __init__(
        self,
        model,
        config: ModelConfig,
        objective,
        evaluators: Sequence[Callable[[MaskedLMModule, dict[str, torch.Tensor]], torch.Tensor]],
        eval_names: Sequence[str],
        metrics: Sequence[ExampleMetric],
        recipe: dict[str, Any],
        mask_id: int,
        reference=None,
    ) -> None:
        super().__init__(config, eval_names, metrics, recipe)
        self.model = model.train()
        self.objective = objective
        self.evaluators = list(evaluators)
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

    def predict(self, batch: dict[str, torch.Tensor], eval_index: int) -> torch.Tensor:
        return self.evaluators[eval_index](self, batch)


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
    """Per negated-LAMA probe: top-1 space ids at the blank of the affirmative, negated and
    misprimed cloze, and the Spearman correlation of the affirmative and negated vocabulary scores
    (see :mod:`negtrain.metrics.cloze`)."""

    def __init__(self, vocab_to_space: torch.Tensor) -> None:
        self.vocab_to_space = vocab_to_space

    def __call__(self, module: MaskedLMModule, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        aff = module.mask_logits(batch["input_ids"], batch["attention_mask"]).float()
        neg = module.mask_logits(batch["neg_input_ids"], batch["neg_attention_mask"]).float()
        mis = module.mask_logits(batch["mis_input_ids"], batch["mis_attention_mask"]).float()
        space = self.vocab_to_space.to(aff.device)
        tops = torch.stack([space[x.argmax(-1)] for x in (aff, neg, mis)], dim=1).to(torch.float64)
        return torch.cat([tops, spearman(aff, neg).unsqueeze(1)], dim=1)


def heldout_mlm(module: MaskedLMModule, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """(N, 4): summed CE over masked tokens, masked tokens, cues right, cues masked."""
    logits = module.logits(batch["input_ids"], batch["attention_mask"]).float()
    labels = batch["labels"]
    where = labels != IGNORE
    ce = torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE, reduction="none")
    ce = ce.view_as(labels) * where
    cues = batch["cue_positions"]
    right = (logits.argmax(-1) == labels) & cues
    return torch.stack([ce.sum(1), where.sum(1).float(), right.sum(1).float(), cues.sum(1).float()], dim=1)


# ---------------------------------------------------------------------------------------------
# The builder.


def load_mlm(cfg: ModelConfig, tokenizer_hook=None):
    """(tokenizer, model, fresh) for the recipe's model or ``model.init_from`` run; ``fresh``: the
    modules whose weights the source did not have (a sentence encoder has no MLM head)."""
    from transformers import AutoConfig, AutoModelForMaskedLM, AutoTokenizer

    if cfg.init_from:
        source = resolve_init(cfg.init_from)
        tokenizer = AutoTokenizer.from_pretrained(source.model_dir)
        model = AutoModelForMaskedLM.from_config(AutoConfig.from_pretrained(source.model_dir), **attention_kwargs(cfg))
        report = load_into(model, source)
        print(report.summary(source), flush=True)
        missing = report.fresh
    else:
        path = resolve_model_name(cfg.name)
        tokenizer = AutoTokenizer.from_pretrained(path)
        model, info = AutoModelForMaskedLM.from_pretrained(path, output_loading_info=True, **attention_kwargs(cfg))
        missing = info["missing_keys"]
    # position_ids and the like are buffers, not learned weights.
    fresh = sorted({k.rsplit(".", 1)[0] for k in missing if k.endswith((".weight", ".bias"))})
    return tokenizer, model, fresh


def build_mlm(recipe, loaded):
    """The MLM family's builder (see :mod:`negtrain.models.families`)."""
    cfg, objective_cfg = recipe.model, recipe.objective
    ul_cfg, cm_cfg = objective_cfg.unlikelihood, objective_cfg.cue_masking
    probes = (NegatedProbes, NegatedLama)
    for b, split, _ in loaded.eval:
        if not isinstance(b, probes):
            raise ConfigError(f"data.eval: the 'mlm' family scores negated_probes and negated_lama, not {b.name}/{split}")
    if ul_cfg is not None:
        wrong = [f"{b.name}/{s}" for b, s, _ in loaded.train if not isinstance(b, probes)]
        if wrong:
            raise ConfigError(f"data.train: unlikelihood training reads negated_probes or negated_lama splits, not {', '.join(wrong)}")

    tokenizer, model, fresh = load_mlm(cfg)
    if tokenizer.mask_token is None:
        raise ConfigError(f"model {cfg.name}: the tokenizer has no mask token, so it cannot be a masked LM")
    if cm_cfg is not None and cm_cfg.cue_token == "cue" and CUE_TOKEN not in tokenizer.get_vocab():
        tokenizer.add_special_tokens({"additional_special_tokens": [CUE_TOKEN]})
    if model.get_input_embeddings().num_embeddings != len(tokenizer):
        model.resize_token_embeddings(len(tokenizer))
    freeze(model, cfg)  # after the resize, which replaces the embedding parameters
    pad_id = tokenizer.pad_token_id or 0
    policy = ul_cfg.multi_token_objects if ul_cfg is not None else "reject"

    # Per-epoch probe evaluation.
    eval_sets, evaluators, metrics, transforms = [], [], [], []
    space, vocab_to_space = token_space(tokenizer) if loaded.eval else ((), None)
    note = "multi-token objects scored on their first sub-token" if policy == "first_subtoken" else None
    for b, split, examples in loaded.eval:
        if isinstance(b, NegatedLama):
            encoded = []
            for k, what in enumerate(("masked_sentences", "masked_negations", "masked_misprimed")):
                enc = encode_texts(tokenizer, [with_mask_token(e.inputs[k], tokenizer) for e in examples], cfg.max_length)
                check_one_mask(enc, tokenizer.mask_token_id, examples, what, cfg.max_length)
                encoded.append(enc)
            gold = [int(vocab_to_space[object_token(tokenizer, e.inputs[0], e.label, policy, probe_location(e))]) for e in examples]
            primes = [[int(vocab_to_space[i]) for i in prime_token_ids(tokenizer, e.meta["prime"])] for e in examples]
            eval_sets.append(EvalSet(b, split, list(examples), encoded[0], predicted_labels=space))
            evaluators.append(LamaEvaluator(vocab_to_space))
            metrics.append(NegatedLamaMetric(gold, primes, [e.subset for e in examples], [e.group for e in examples], note=note))
            transforms.append(ClozeTransform(encoded[1], encoded[2], pad_id))
            continue
        texts = [with_mask_token(e.inputs[0], tokenizer) for e in examples]
        gold = [int(vocab_to_space[object_token(tokenizer, e.inputs[0], e.label, policy, probe_location(e))]) for e in examples]
        encoded = encode_texts(tokenizer, texts, cfg.max_length)
        check_one_mask(encoded, tokenizer.mask_token_id, examples, "probe", cfg.max_length)
        eval_sets.append(EvalSet(b, split, list(examples), encoded, predicted_labels=space))
        evaluators.append(ProbeEvaluator(vocab_to_space))

        metrics.append(ProbeMetric(gold, [e.subset == NEGATED for e in examples], note=note))
        transforms.append(None)

    reference = None
    train_transform = None
    train = None
    if ul_cfg is not None and not loaded.train:
        # validate / test: score the model; no training set, no frozen reference.
        objective = UnlikelihoodObjective(ul_cfg.gamma, ul_cfg.likelihood)
    elif ul_cfg is not None:
        per_source = [training_probes(ex) for _, _, ex in loaded.train]
        pairs = [p for part in per_source for p in part]
        where = [e for *_, e in pairs]
        obj = torch.tensor([object_token(tokenizer, a, o, policy, probe_location(e)) for a, _, o, e in pairs], dtype=torch.long)
        aff = encode_texts(tokenizer, [with_mask_token(a, tokenizer) for a, *_ in pairs], cfg.max_length)
        neg = encode_texts(tokenizer, [with_mask_token(n, tokenizer) for _, n, *_ in pairs], cfg.max_length)
        check_one_mask(aff, tokenizer.mask_token_id, where, "masked_sentences", cfg.max_length)
        check_one_mask(neg, tokenizer.mask_token_id, where, "masked_negations", cfg.max_length)
        sizes = [len(part) for part in per_source]
        train = TrainSet(aff, {"obj": obj}, [f"{b.name}/{s}" for b, s, _ in loaded.train], sizes)
        retention, spec = None, None
        if ul_cfg.retention is not None:
            lines = [line for path in ul_cfg.retention.text_files for line in read_text_lines(path)]
            retention = encode_texts(tokenizer, lines, cfg.max_length)
            spec = MaskingSpec.for_tokenizer(tokenizer, cue_mask_prob=0.0, mlm_probability=ul_cfg.retention.mlm_probability)
        train_transform = ProbeTransform(neg, pad_id, retention, ul_cfg.retention.batch_size if ul_cfg.retention else 0, spec, recipe.seed)
        needs_reference = ul_cfg.likelihood == "kl" or (ul_cfg.retention is not None and ul_cfg.retention.loss == "kl")
        reference = copy.deepcopy(model) if needs_reference else None
        objective = UnlikelihoodObjective(
            ul_cfg.gamma, ul_cfg.likelihood,
            ul_cfg.retention.weight if ul_cfg.retention else 0.0,
            ul_cfg.retention.loss if ul_cfg.retention else "mlm",
        )
    else:
        detector = CueDetector()
        train_text, held_text = build_corpus(cm_cfg.corpus, loaded, detector, recipe.seed)
        cue_id = tokenizer.convert_tokens_to_ids(CUE_TOKEN) if cm_cfg.cue_token == "cue" else tokenizer.mask_token_id
        spec = MaskingSpec.for_tokenizer(
            tokenizer, cue_id,
            cue_mask_prob=cm_cfg.cue_mask_prob, mlm_probability=cm_cfg.mlm_probability,
            mask_replace_prob=cm_cfg.mask_replace_prob, random_replace_prob=cm_cfg.random_replace_prob,
        )

        train_enc = encode_cue_texts(tokenizer, detector, train_text, cfg.max_length)
        train = TrainSet(train_enc, {}, ["cue_corpus/train"], [len(train_text)])
        train_transform = CueMaskingTransform(train_enc, train_enc.cue_flags, spec, recipe.seed)
        if held_text:
            held_enc = encode_cue_texts(tokenizer, detector, held_text, cfg.max_length)
            examples = [Example(f"cue_corpus/heldout/{i}", (t,), "") for i, t in enumerate(held_text)]
            corpus = CueCorpus(examples)
            eval_sets.append(EvalSet(corpus, "heldout", examples, held_enc, predicted_labels=()))
            evaluators.append(heldout_mlm)
            metrics.append(corpus.metric(examples))
            transforms.append(CueMaskingTransform(held_enc, held_enc.cue_flags, spec, recipe.seed, per_example=True))
        objective = MLMObjective()
        print(f"cue-masking corpus: {len(train_text)} training sentences, {len(held_text)} held out", flush=True)

    module = MaskedLMModule(
        model, cfg, objective, evaluators, [s.name for s in eval_sets], metrics,
        recipe=to_dict(recipe), mask_id=tokenizer.mask_token_id, reference=reference,
    )
    data_config = recipe.data
    if cm_cfg is not None:
        # The corpus is one training source, whatever benchmarks it was built from.
        data_config = data_config.model_copy(update={"train": [SourceConfig(benchmark="cue_corpus", split="train")]})
    data = MLMData(data_config, recipe.seed, pad_id, train, eval_sets, train_transform=train_transform, eval_transforms=transforms)
    return Built(module, data, tokenizer, fresh_head=fresh)
