"""The NLI family: sequence classification on (premise, hypothesis) pairs.

Works with any ``AutoModelForSequenceClassification`` checkpoint (DeBERTa, RoBERTa, BERT, ...).
A three-way MNLI head is scored on two-way benchmarks by coarsening its prediction, and trained on
two-way data through the probability mass of the matching classes (see :mod:`negtrain.models.heads`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch

from negtrain.benchmarks.base import Example
from negtrain.config import NliModelConfig, Recipe
from negtrain.data.encoded import EncodedSplit, build_split, in_chunks
from negtrain.data.encoded_columns import Columns, columns
from negtrain.data.store_keys import fingerprint, tokenizer_signature
from negtrain.data.eval_set import EvalSet
from negtrain.data.module import NegtrainData, TrainSet
from negtrain.data.sources import data_key, label_codes, source_name
from negtrain.core.errors import ConfigError
from negtrain.models.adapters import add_adapter, load_base
from negtrain.models.base import NegtrainModule, close_calls
from negtrain.models.contract import Built
from negtrain.models.first_token import first_position_only
from negtrain.models.folder_checks import load_tokenizer
from negtrain.models.freezing import freeze
from negtrain.models.heads import (
    HEAD_MODULES,
    coded_target_mask,
    head_to_benchmark,
    prediction_space,
    reset_loaded_head,
    set_loss,
)
from negtrain.models.init_from import load_into, resolve_init
from negtrain.models.nli_head import head_labels, model_folder
from negtrain.models.sources import attention_kwargs


def pairs_key(tokenizer, examples: Iterable[Example], max_length: int) -> str:
    """The store key of ``examples`` encoded as pairs: tokenizer, max_length and every text, or,
    for a training source, the fingerprint of its data files instead of the texts (not read)."""
    if (data := data_key(examples)) is not None:
        return fingerprint("nli-pairs", tokenizer_signature(tokenizer), str(max_length), "data", data)
    examples = examples if isinstance(examples, Sequence) else list(examples)
    return fingerprint(
        "nli-pairs",
        tokenizer_signature(tokenizer),
        str(max_length),
        (e.inputs[0] for e in examples),
        (e.inputs[1] for e in examples),
    )


def encode_pairs(tokenizer, examples: Iterable[Example], max_length: int, *, key: str | None = None,
                 num_proc: int | None = None) -> EncodedSplit:
    """(premise, hypothesis) pairs tokenized in chunks on ``num_proc`` processes, stored and mapped.

    ``examples`` may be a stream when the caller gives ``key`` (e.g. from the data files'
    fingerprint): it is then read only if the store lacks the split. Without ``key`` the key is
    the texts themselves, read first.
    """
    if key is None:
        examples = examples if isinstance(examples, Sequence) else list(examples)
        key = pairs_key(tokenizer, examples, max_length)

    def encode(texts: tuple[list[str], list[str]]) -> Columns:
        # No attention mask: the collator makes it; converting it costs a third of the call.
        enc = tokenizer(*texts, truncation=True, max_length=max_length, return_attention_mask=False)
        return columns(enc["input_ids"], enc.get("token_type_ids"))

    # Only the texts go to the tokenizing processes: pickling whole Examples costs a tenth as much
    # as tokenizing them.
    chunks = (([e.inputs[0] for e in chunk], [e.inputs[1] for e in chunk]) for chunk in in_chunks(examples))
    # The rows the benchmark has: a stored entry of any other size is not this split.
    rows = len(examples) if isinstance(examples, Sequence) else None
    return build_split(key, chunks, encode, num_proc, rows=rows)


class NLIModule(NegtrainModule):
    config: NliModelConfig

    def __init__(
        self,
        model,
        config: NliModelConfig,
        head_labels: Sequence[str],
        eval_sets: Sequence[EvalSet],
        recipe: Recipe | None = None,
    ) -> None:
        super().__init__(config, eval_sets, recipe)
        # from_pretrained returns the model in eval mode; Lightning keeps modules' modes, so
        # without this dropout would be off during training.
        self.model = model.train()
        self.head_labels = list(head_labels)

    def _logits(self, batch: dict[str, torch.Tensor], first_token_only: bool = False) -> torch.Tensor:
        inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in batch}
        with first_position_only(self.model, first_token_only):
            return self.model(**inputs).logits

    def training_loss(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return set_loss(self._logits(batch), batch["targets"])

    def predict(self, batch: dict[str, torch.Tensor], eval_set: EvalSet) -> torch.Tensor:
        first_only = self.config.first_token_only
        logits = self._logits(batch, first_only).float()
        close = close_calls(logits, self.config.fp32_recheck_margin)
        if close is not None:
            # Under bf16 autocast a near-tie can come out the other way than in fp32; score those
            # rows again in fp32, so bf16 evaluation reports fp32's predictions.
            with torch.autocast(device_type=logits.device.type, enabled=False):
                logits[close] = self._logits({k: v[close] for k, v in batch.items() if torch.is_tensor(v)}, first_only).float()
        # The eval set's label map: head class id -> id in its predicted labels.
        return eval_set.label_map_on(logits.device)[logits.argmax(-1)]


def _head(recipe, loaded):
    """(init_from source or None, model path, its HF config, the checkpoint's NLI head labels or
    None, the head's labels): everything about the head that is known before weights load."""
    from transformers import AutoConfig

    cfg = recipe.model
    # model.init_from: tokenizer (with any added [CUE]), config and weights of a previous run.
    init = resolve_init(cfg.init_from) if cfg.init_from else None
    path = model_folder(recipe)
    hf_config = AutoConfig.from_pretrained(path)
    # A fresh head is sized to the training data; with none (evaluation only, e.g. a report card),
    # to the eval sets, so a 3-way benchmark among them can still be scored.
    sized_by = loaded.train or loaded.eval
    ckpt_labels, head = head_labels(recipe, getattr(hf_config, "id2label", None), [b.labels for b, _, _ in sized_by])
    return init, path, hf_config, ckpt_labels, head


def build_nli(recipe, loaded):
    """The NLI family's builder (see :mod:`negtrain.models.families`)."""
    from transformers import AutoConfig, AutoModelForSequenceClassification

    cfg = recipe.model
    # What the family can score and train on was decided by the scoring matrix (resolve_benchmarks).
    init, path, hf_config, ckpt_labels, head = _head(recipe, loaded)
    tokenizer = load_tokenizer(path, "model", getattr(hf_config, "vocab_size", None))
    eval_sets = []
    specs = loaded.eval_specs or [None] * len(loaded.eval)
    for (b, split, ex), spec in zip(loaded.eval, specs, strict=False):
        space = prediction_space(head, b.spaces(), b.name)
        eval_sets.append(EvalSet(
            b, split, ex, encode_pairs(tokenizer, ex, cfg.max_length, num_proc=recipe.data.num_proc), predicted_labels=space,
            metric=b.scorer(ex, space), label_map=head_to_benchmark(head, space, b.name),
            variant=getattr(spec, "variant", None),  # a protocol's variant names its record and predictions file
        ))

    train = None
    if loaded.train:
        # A training source's labels come from its compact cached codes and its tokens from the
        # store, both keyed by its data files: a warm start reads no text (negtrain.data.sources).
        targets = torch.cat([coded_target_mask(*label_codes(ex), head) for _, _, ex in loaded.train])
        train = TrainSet(
            encoded=EncodedSplit.concat([encode_pairs(tokenizer, ex, cfg.max_length, num_proc=recipe.data.num_proc) for _, _, ex in loaded.train]),
            extras={"targets": targets},
            sources=[source_name(b, split, ex) for b, split, ex in loaded.train],
            source_sizes=[len(ex) for _, _, ex in loaded.train],
        )

    head_args = dict(num_labels=len(head), id2label=dict(enumerate(head)), label2id={label: i for i, label in enumerate(head)})
    if init is not None:
        model = AutoModelForSequenceClassification.from_config(
            AutoConfig.from_pretrained(path, **head_args), **attention_kwargs(cfg)
        )
        report = load_into(model, init)
        print(report.summary(init), flush=True)
        fresh = head_parts(report.fresh)
    else:
        model, info = load_base(
            AutoModelForSequenceClassification,
            path,
            recipe.adapter,
            keep_full=list(HEAD_MODULES),  # the head is never quantized
            **attention_kwargs(cfg),
            **head_args,
            ignore_mismatched_sizes=ckpt_labels is None or len(ckpt_labels) != len(head),
            output_loading_info=True,
        )
        mismatched = [k for k, *_ in info.get("mismatched_keys", [])]
        # ignore_mismatched_sizes is for the head; any other weight re-initialised would be scored as trained.
        body = [k for k in mismatched if k.split(".")[0] not in HEAD_MODULES]
        if body:
            raise ConfigError(f"model: {path}: config.json does not describe its weights ({len(body)} tensors of another "
                              f"shape, e.g. {body[0]}); was config.json edited or copied from another model?")
        fresh = head_parts([*info["missing_keys"], *mismatched])
        if ckpt_labels is None and (reset := reset_loaded_head(model, info["missing_keys"])):
            print(f"model: {path}'s classification head has no NLI label names; a fresh {len(head)}-way head replaces {reset}", flush=True)
            fresh = sorted(set(fresh) | set(reset))
    model = add_adapter(model, recipe.adapter, cfg.peft_task_type)  # the head stays fully trainable
    freeze(model, cfg)
    module = NLIModule(model, cfg, head, eval_sets, recipe=recipe)
    data = NegtrainData(recipe.data, recipe.seed, tokenizer.pad_token_id or 0, train, eval_sets)
    return Built(module, data, tokenizer, fresh_head=fresh)


def head_parts(weight_names) -> list[str]:
    """The head modules (``classifier``, ``classifier.out_proj``) among weight names, sorted."""
    return sorted({name.rsplit(".", 1)[0] for name in weight_names if name.split(".")[0] in HEAD_MODULES})
