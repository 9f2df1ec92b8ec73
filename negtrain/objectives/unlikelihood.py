"""Unlikelihood training on negated LAMA probes (Hosseini et al. 2021).

Training data: a ``negated_lama`` training split (each probe holds its affirmative and negated
cloze) or a ``negated_probes`` one (affirmative/negated example pairs sharing an object). The loss is γ·UL(negated) + (1−γ)·LL(affirmative) [+ weight·retention], see
:class:`negtrain.config.UnlikelihoodConfig`; the batch transform adds each pair's negated sentence
and, optionally, a masked retention batch. Evaluation is the family's ``negated_lama`` / ``negated_probes`` scoring.
"""

from __future__ import annotations

import copy

import torch

from negtrain.benchmarks.negated_lama import NegatedLama
from negtrain.benchmarks.negated_probes import NegatedProbes
from negtrain.data.collate import PadCollator
from negtrain.data.encoded import EncodedSplit
from negtrain.data.module import TrainSet
from negtrain.data.sources import source_name
from negtrain.core.errors import ConfigError
from negtrain.models.mlm_inputs import (
    check_one_mask,
    encode_texts,
    object_token,
    probe_location,
    read_text_lines,
    training_probes,
    with_mask_token,
)
from negtrain.objectives import losses
from negtrain.objectives.base import Loss, Objective, Prepared
from negtrain.objectives.masking import MaskingSpec, batch_generator, mask_tokens
from negtrain.data.collate import IGNORE


class UnlikelihoodObjective(Loss):
    """γ·UL(negated) + (1−γ)·LL(affirmative) [+ weight·retention]; see UnlikelihoodConfig."""

    def __init__(self, gamma: float, likelihood: str, retention_weight: float = 0.0, retention_loss: str = "mlm") -> None:
        self.gamma = gamma
        self.likelihood = likelihood
        self.retention_weight = retention_weight
        self.retention_loss = retention_loss

    def units(self, batch: dict[str, torch.Tensor]) -> None:
        # A mean over the batch's probes (the retention term's side batch has a fixed size).
        return None

    def loss(self, module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
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


class ProbeTransform:
    """Adds the negated sentences (``neg_*``) and, optionally, a retention batch to a probe batch."""

    def __init__(self, negated: EncodedSplit, pad_id: int, retention: EncodedSplit | None = None,
                 retention_batch: int = 0, spec: MaskingSpec | None = None, seed: int = 0) -> None:
        self.negated = PadCollator(negated, pad_id)
        self.retention = PadCollator(retention, pad_id) if retention is not None else None
        self.retention_size = len(retention) if retention is not None else 0
        self.retention_batch = retention_batch
        self.spec = spec
        self.seed = seed

    def __call__(self, batch: dict[str, torch.Tensor], epoch: int) -> dict[str, torch.Tensor]:
        neg = self.negated(batch["index"].tolist())
        batch["neg_input_ids"], batch["neg_attention_mask"] = neg["input_ids"], neg["attention_mask"]
        if self.retention is not None and self.retention_batch:
            generator = batch_generator(self.seed, epoch, batch["index"])
            pick = torch.randint(self.retention_size, (self.retention_batch,), generator=generator)
            ret = self.retention(pick.tolist())
            assert self.spec is not None  # given with a retention corpus (Unlikelihood.prepare)
            masked = mask_tokens(ret["input_ids"], ret["attention_mask"], torch.zeros_like(ret["input_ids"], dtype=torch.bool), self.spec, generator)
            batch["ret_input_ids"], batch["ret_attention_mask"], batch["ret_labels"] = masked["input_ids"], ret["attention_mask"], masked["labels"]
        return batch


class Unlikelihood(Objective):
    @property
    def multi_token_objects(self) -> str:  # type: ignore[override]  # the recipe's setting, read-only here; nothing assigns it
        return self.settings.multi_token_objects

    def check(self, loaded) -> None:
        wrong = [f"{b.name}/{s}" for b, s, _ in loaded.train if not isinstance(b, (NegatedProbes, NegatedLama))]
        if wrong:
            raise ConfigError(f"data.train: unlikelihood training reads negated_probes or negated_lama splits, not {', '.join(wrong)}")

    def prepare(self, recipe, loaded, tokenizer, model) -> Prepared:
        ul_cfg, max_length, policy = self.settings, recipe.model.max_length, self.multi_token_objects
        if not loaded.train:
            # validate / test: score the model; no training set, no frozen reference.
            return Prepared(UnlikelihoodObjective(ul_cfg.gamma, ul_cfg.likelihood), None, None)
        per_source = [training_probes(ex) for _, _, ex in loaded.train]
        pairs = [p for part in per_source for p in part]  # (affirmative, negated, object, example)
        where = [e for *_, e in pairs]
        obj = torch.tensor([object_token(tokenizer, a, o, policy, probe_location(e)) for a, _, o, e in pairs], dtype=torch.long)
        aff = encode_texts(tokenizer, [with_mask_token(a, tokenizer) for a, *_ in pairs], max_length)
        neg = encode_texts(tokenizer, [with_mask_token(n, tokenizer) for _, n, *_ in pairs], max_length)
        check_one_mask(aff, tokenizer.mask_token_id, where, "masked_sentences", max_length)
        check_one_mask(neg, tokenizer.mask_token_id, where, "masked_negations", max_length)
        sizes = [len(part) for part in per_source]
        train = TrainSet(aff, {"obj": obj}, [source_name(b, s, ex) for b, s, ex in loaded.train], sizes)
        retention, spec = None, None
        if ul_cfg.retention is not None:
            lines = [line for path in ul_cfg.retention.text_files for line in read_text_lines(path)]
            retention = encode_texts(tokenizer, lines, max_length, num_proc=recipe.data.num_proc)
            spec = MaskingSpec.for_tokenizer(tokenizer, cue_mask_prob=0.0, mlm_probability=ul_cfg.retention.mlm_probability)
        pad_id = tokenizer.pad_token_id or 0
        transform = ProbeTransform(neg, pad_id, retention, ul_cfg.retention.batch_size if ul_cfg.retention else 0, spec, recipe.seed)
        needs_reference = ul_cfg.likelihood == "kl" or (ul_cfg.retention is not None and ul_cfg.retention.loss == "kl")
        loss = UnlikelihoodObjective(
            ul_cfg.gamma, ul_cfg.likelihood,
            ul_cfg.retention.weight if ul_cfg.retention else 0.0,
            ul_cfg.retention.loss if ul_cfg.retention else "mlm",
        )
        return Prepared(loss, train, transform, reference=copy.deepcopy(model) if needs_reference else None)
