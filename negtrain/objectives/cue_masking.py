"""Cue masking (CueNB, Truong et al. 2022): masked-LM training on a negation-focused corpus in
which every negation cue is masked.

The corpus is built from text files and the recipe's training benchmarks (see
:class:`negtrain.config.CorpusConfig`); a part of it is held out and scored every epoch
(``cue_corpus/heldout``: ``mlm_loss``, ``cue_recovery_accuracy``). The batch transform is
:class:`negtrain.objectives.masking.CueMaskingTransform`, the loss cross-entropy on the masked
tokens.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from negtrain.benchmarks.base import Benchmark, Example
from negtrain.config import SourceConfig
from negtrain.data.corpus_stream import CorpusStream, check_not_empty, index_corpus
from negtrain.data.eval_set import EvalSet
from negtrain.data.module import TrainSet
from negtrain.core.errors import DataError
from negtrain.metrics.cue_corpus import CUE_CORPUS_METRICS, CUE_CORPUS_NAME
from negtrain.metrics.mlm import HeldOutMLMMetric
from negtrain.models.mlm_inputs import encode_cue_texts, read_text_lines
from negtrain.negation.cues import CueDetector, split_sentences
from negtrain.objectives.base import Loss, Objective, Prepared
from negtrain.objectives.masking import CueMaskingTransform, MaskingSpec, batch_generator, mask_tokens
from negtrain.data.collate import IGNORE

CUE_TOKEN = "[CUE]"


class MLMObjective(Loss):
    """Cross-entropy on the masked tokens of a batch (``labels``, -100 elsewhere): CueNB's loss."""

    def loss(self, module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        logits = module.logits(batch["input_ids"], batch["attention_mask"])
        return torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), batch["labels"].flatten(), ignore_index=IGNORE)

    def units(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return (batch["labels"] != IGNORE).sum()  # the loss is a mean over masked tokens


def heldout_mlm(module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """The held-out sentences' evaluator. (N, 4): summed CE over masked tokens, masked tokens,
    cues right, cues masked."""
    logits = module.logits(batch["input_ids"], batch["attention_mask"]).float()
    labels = batch["labels"]
    where = labels != IGNORE
    ce = torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE, reduction="none")
    ce = ce.view_as(labels) * where
    cues = batch["cue_positions"]
    right = (logits.argmax(-1) == labels) & cues
    return torch.stack([ce.sum(1), where.sum(1).float(), right.sum(1).float(), cues.sum(1).float()], dim=1)


class CueCorpus(Benchmark):
    """The held-out sentences of a cue-masking corpus, evaluated like a benchmark split (not registered)."""

    name = CUE_CORPUS_NAME
    splits = ("heldout",)
    labels = ()
    reported_metrics = CUE_CORPUS_METRICS
    citation = "Truong, Baldwin, Cohn, Verspoor (2022). Improving negation detection with negation-focused pre-training. NAACL 2022."

    def __init__(self, examples: Sequence[Example] = ()) -> None:
        self.examples = list(examples)

    def files(self, split: str) -> list:
        return []

    def read(self, split: str) -> list[Example]:
        return self.examples

    def metric(self, examples: Sequence[Example]):
        return HeldOutMLMMetric(num_examples=len(examples))




def build_corpus(cfg, loaded, detector, seed: int) -> tuple[list[str], list[str]]:
    """(training sentences, held-out sentences) for cue masking; see CorpusConfig."""
    texts: list[str] = []
    for path in cfg.text_files:
        texts.extend(read_text_lines(path))
    if cfg.from_train_benchmarks:
        for _, _, examples in loaded.train:
            for e in examples:
                for field in e.inputs:
                    texts.extend(split_sentences(field))
    sentences = list(dict.fromkeys(t for t in texts if t))
    if cfg.keep == "cue_sentences":
        sentences = [s for s in sentences if detector.has_cue(s)]
    if len(sentences) <= cfg.held_out:
        raise DataError(f"the cue-masking corpus has {len(sentences)} sentences, not more than objective.cue_masking.corpus.held_out={cfg.held_out}")
    order = np.random.default_rng([seed, 7]).permutation(len(sentences))
    held = [sentences[i] for i in order[: cfg.held_out]]
    train = [sentences[i] for i in order[cfg.held_out :]]
    if cfg.max_sentences is not None:
        train = train[: cfg.max_sentences]
    return train, held


class StreamCueMasking:
    """The batch transform of a streamed corpus: its batches carry their cue flags already
    padded (``cue_flags``); masks are drawn as :class:`CueMaskingTransform` draws them, from
    (seed, epoch, the lines' positions in the epoch)."""

    def __init__(self, spec: MaskingSpec, seed: int) -> None:
        self.spec = spec
        self.seed = seed

    def __call__(self, batch: dict[str, torch.Tensor], epoch: int) -> dict[str, torch.Tensor]:
        flags = batch.pop("cue_flags")
        generator = batch_generator(self.seed, epoch, batch["index"])
        batch.update(mask_tokens(batch["input_ids"], batch["attention_mask"], flags, self.spec, generator))
        return batch


def heldout_eval_set(tokenizer, detector, texts: Sequence[str], max_length: int, spec: MaskingSpec, seed: int) -> EvalSet:
    """``cue_corpus/heldout``: the held-out sentences, scored every epoch with fixed masks."""
    held_enc = encode_cue_texts(tokenizer, detector, texts, max_length)
    assert held_enc.cue_flags is not None  # encode_cue_texts stores every token's flag
    examples = [Example(f"cue_corpus/heldout/{i}", (t,), "") for i, t in enumerate(texts)]
    corpus = CueCorpus(examples)
    return EvalSet(
        corpus, "heldout", examples, held_enc, predicted_labels=(), metric=corpus.metric(examples),
        evaluator=heldout_mlm,
        transform=CueMaskingTransform(held_enc, held_enc.cue_flags, spec, seed, per_example=True),
    )


class CueMasking(Objective):
    def add_tokens(self, tokenizer) -> None:
        if self.settings.cue_token == "cue" and CUE_TOKEN not in tokenizer.get_vocab():
            tokenizer.add_special_tokens({"additional_special_tokens": [CUE_TOKEN]})

    def prepare(self, recipe, loaded, tokenizer, model) -> Prepared:
        cm_cfg, max_length = self.settings, recipe.model.max_length
        detector = CueDetector()
        cue_id = tokenizer.convert_tokens_to_ids(CUE_TOKEN) if cm_cfg.cue_token == "cue" else tokenizer.mask_token_id
        spec = MaskingSpec.for_tokenizer(
            tokenizer, cue_id,
            cue_mask_prob=cm_cfg.cue_mask_prob, mlm_probability=cm_cfg.mlm_probability,
            mask_replace_prob=cm_cfg.mask_replace_prob, random_replace_prob=cm_cfg.random_replace_prob,
        )

        # The corpus is one training source, whatever benchmarks it was built from.
        sources = [SourceConfig(benchmark="cue_corpus", split="train")]
        if cm_cfg.corpus.streaming:
            return self._prepare_stream(recipe, tokenizer, detector, spec, sources)
        train_text, held_text = build_corpus(cm_cfg.corpus, loaded, detector, recipe.seed)
        train_enc = encode_cue_texts(tokenizer, detector, train_text, max_length, num_proc=recipe.data.num_proc)
        train = TrainSet(train_enc, {}, ["cue_corpus/train"], [len(train_text)])
        assert train_enc.cue_flags is not None  # encode_cue_texts stores every token's flag
        transform = CueMaskingTransform(train_enc, train_enc.cue_flags, spec, recipe.seed)
        eval_sets = [heldout_eval_set(tokenizer, detector, held_text, max_length, spec, recipe.seed)] if held_text else []
        print(f"cue-masking corpus: {len(train_text)} training sentences, {len(held_text)} held out", flush=True)
        return Prepared(MLMObjective(), train, transform, eval_sets=eval_sets, train_sources=sources)

    def _prepare_stream(self, recipe, tokenizer, detector: CueDetector, spec: MaskingSpec, sources) -> Prepared:
        """``corpus.streaming``: the corpus stays on disk (negtrain/data/corpus_stream.py)."""
        cfg = self.settings.corpus
        index = index_corpus(
            cfg.text_files, detector, keep=cfg.keep, held_out_rate=cfg.held_out_rate, held_out=cfg.held_out, window=cfg.shuffle_buffer
        )
        check_not_empty(index, cfg.keep, cfg.held_out_rate)
        if cfg.held_out and cfg.held_out_rate and not index.held_out:
            raise DataError(
                f"the streamed cue-masking corpus has {index.n_kept} sentences and none fell into the held-out "
                f"part (held_out_rate={cfg.held_out_rate}); raise objective.cue_masking.corpus.held_out_rate, "
                "or set held_out: 0 to train without the held-out evaluation"
            )
        pad_id = tokenizer.pad_token_id or 0
        stream = CorpusStream(
            index, tokenizer, detector, recipe.model.max_length, recipe.seed, pad_id, StreamCueMasking(spec, recipe.seed),
            batch_size=recipe.data.batch_size,
        )
        train = TrainSet(None, {}, ["cue_corpus/train"], [index.n_train], stream=stream)
        held = index.held_out if cfg.held_out else []
        eval_sets = [heldout_eval_set(tokenizer, detector, held, recipe.model.max_length, spec, recipe.seed)] if held else []
        print(
            f"cue-masking corpus (streamed): {index.n_train} training sentences of {index.n_lines} lines; "
            f"{index.n_held_out} held out by hash, {len(held)} of them evaluated",
            flush=True,
        )
        return Prepared(MLMObjective(), train, None, eval_sets=eval_sets, train_sources=sources)
