"""What the masked-LM family feeds its model: probes and corpus sentences encoded once (and
cached), and the DataModule that passes batches through the objective's transforms. The module
and builder are in :mod:`negtrain.models.mlm`, the objectives in :mod:`negtrain.objectives`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import torch
from torch.utils.data import DataLoader

from negtrain.benchmarks.base import Example
from negtrain.benchmarks.negated_probes import AFFIRMATIVE, MASK, NEGATED
from negtrain.data.collate import PadCollator
from negtrain.data.encoded import EncodedSplit, build_split, in_chunks
from negtrain.data.encoded_columns import Columns, columns
from negtrain.data.store_keys import fingerprint, tokenizer_signature
from negtrain.data.module import NegtrainData
from negtrain.data.sampler import SampledBatch
from negtrain.core.errors import DataError
from negtrain.negation.cues import CueDetector

# ---------------------------------------------------------------------------------------------
# Data: batch transforms on top of the padding collator.


class _Then:
    """Pads a batch, then hands it to a transform with the epoch the batch was drawn for."""

    def __init__(self, first, then) -> None:
        self.first, self.then = first, then

    def __call__(self, indices: SampledBatch):
        return self.then(self.first(indices), indices.epoch)


class MLMData(NegtrainData):
    """NegtrainData whose batches pass through the objective's transform after padding (and an
    eval set's through its own ``transform``, if it has one)."""

    def __init__(self, *args, train_transform=None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.train_transform = train_transform

    def train_dataloader(self) -> DataLoader:
        loader = super().train_dataloader()
        if self.train_transform is not None:
            loader.collate_fn = _Then(loader.collate_fn, self.train_transform)
        return loader

    def val_dataloader(self) -> list[DataLoader]:
        loaders = super().val_dataloader()
        for loader, eval_set in zip(loaders, self.eval_sets, strict=False):  # val_dataloader makes one per set, in order
            if eval_set.transform is not None:
                loader.collate_fn = _Then(loader.collate_fn, eval_set.transform)
        return loaders

    test_dataloader = val_dataloader


# ---------------------------------------------------------------------------------------------
# Encoding.


def with_mask_token(text: str, tokenizer) -> str:
    return text.replace(MASK, tokenizer.mask_token)


def object_token(tokenizer, sentence: str, obj: str, policy: str, where: str) -> int:
    """The token id of ``obj`` where it fills the sentence's mask, found through offsets.

    A multi-token object is a DataError unless ``policy`` is 'first_subtoken'.
    """
    start = sentence.index(MASK)
    filled = sentence.replace(MASK, obj, 1)
    enc = tokenizer(filled, return_offsets_mapping=True, add_special_tokens=False)
    end = start + len(obj)
    ids = [i for i, (s, e) in zip(enc["input_ids"], enc["offset_mapping"], strict=False) if e > s and s < end and start < e]
    if not ids:
        raise DataError(f"{where}: obj_label {obj!r} produced no tokens")
    if len(ids) > 1 and policy != "first_subtoken":
        pieces = tokenizer.convert_ids_to_tokens(ids)
        raise DataError(
            f"{where}: obj_label {obj!r} is {len(ids)} tokens {pieces} for this tokenizer; a mask predicts one "
            "token. Drop the probe, or set objective.unlikelihood.multi_token_objects: first_subtoken"
        )
    return ids[0]


def _text_key(kind: str, tokenizer, max_length: int, texts: Iterable[str], *extra: Iterable[str]) -> str:
    return fingerprint(kind, tokenizer_signature(tokenizer), str(max_length), texts, *extra)


def encode_texts(tokenizer, texts: Iterable[str], max_length: int, *, key: str | None = None,
                 num_proc: int | None = None) -> EncodedSplit:
    """Single texts (probes, a retention corpus), tokenized in chunks and stored like NLI pairs.
    ``texts`` may be a stream when ``key`` is given (see :func:`negtrain.models.nli.encode_pairs`)."""
    if key is None:
        texts = texts if isinstance(texts, Sequence) else list(texts)
        key = _text_key("texts", tokenizer, max_length, texts)

    def encode(chunk: list[str]) -> Columns:
        return columns(tokenizer(chunk, truncation=True, max_length=max_length, return_attention_mask=False)["input_ids"])

    return build_split(key, in_chunks(texts), encode, num_proc, rows=len(texts) if isinstance(texts, Sequence) else None)


def encode_cue_texts(tokenizer, detector: CueDetector, texts: Iterable[str], max_length: int, *, key: str | None = None,
                     num_proc: int | None = None) -> EncodedSplit:
    """A cue-masking corpus: token ids with the negation-cue flag of every token (``cue_flags``),
    in chunks and stored, so a large corpus is neither held as Python lists nor tokenized twice.
    ``texts`` may be a stream when ``key`` is given; ``key`` must then cover the detector's
    :meth:`~negtrain.negation.cues.CueDetector.signature` too."""
    if key is None:
        texts = texts if isinstance(texts, Sequence) else list(texts)
        key = _text_key("cue-texts", tokenizer, max_length, texts, detector.signature())

    def encode(chunk: list[str]) -> Columns:
        ids, flags = detector.tokenize(tokenizer, chunk, truncation=True, max_length=max_length)
        return columns(ids, None, flags)

    return build_split(key, in_chunks(texts), encode, num_proc, rows=len(texts) if isinstance(texts, Sequence) else None)


def token_space(tokenizer) -> tuple[tuple[str, ...], torch.Tensor]:
    """Deduplicated token strings of the vocabulary, and the map vocabulary id -> space id."""
    tokens = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    strings = [tokenizer.convert_tokens_to_string([t]).strip() if t is not None else "" for t in tokens]
    lookup: dict[str, int] = {}
    vocab_to_space = torch.tensor([lookup.setdefault(s, len(lookup)) for s in strings], dtype=torch.long)
    return tuple(lookup), vocab_to_space


def probe_pairs(examples: Sequence[Example]) -> list[tuple[Example, Example]]:
    by_group: dict[str | None, dict[str | None, Example]] = {}
    for e in examples:
        by_group.setdefault(e.group, {})[e.subset] = e
    return [(g[AFFIRMATIVE], g[NEGATED]) for g in by_group.values()]


def training_probes(examples: Sequence[Example]) -> list[tuple[str, str, str, Example]]:
    """(affirmative, negated, object, example) per probe of a training split: a negated-LAMA
    probe holds both sentences; a ``negated_probes`` probe is an affirmative/negated example pair."""
    if examples and len(examples[0].inputs) >= 2:  # negated_lama: (affirmative, negated, misprimed)
        return [(e.inputs[0], e.inputs[1], e.label, e) for e in examples]
    return [(a.inputs[0], n.inputs[0], a.label, a) for a, n in probe_pairs(examples)]


def prime_token_ids(tokenizer, prime: str) -> list[int]:
    """Vocabulary ids a misprime can win as: the prime and its lower-cased form, where each is one token."""
    ids = set()
    for word in {prime, prime.lower()}:
        pieces = tokenizer(word, add_special_tokens=False)["input_ids"] if word else []
        if len(pieces) == 1:
            ids.add(pieces[0])
    return sorted(ids)


class ClozeTransform:
    """Adds the negated (``neg_*``) and misprimed (``mis_*``) clozes of each probe to an eval batch
    whose ``input_ids`` are the affirmative clozes."""

    def __init__(self, negated: EncodedSplit, misprimed: EncodedSplit, pad_id: int) -> None:
        self.negated = PadCollator(negated, pad_id)
        self.misprimed = PadCollator(misprimed, pad_id)

    def __call__(self, batch: dict[str, torch.Tensor], epoch: int) -> dict[str, torch.Tensor]:
        rows = batch["index"].tolist()
        for prefix, collate in (("neg", self.negated), ("mis", self.misprimed)):
            part = collate(rows)
            batch[f"{prefix}_input_ids"], batch[f"{prefix}_attention_mask"] = part["input_ids"], part["attention_mask"]
        return batch


def probe_location(e: Example) -> str:
    """Where a probe came from, for errors: file:line (or its id)."""
    return f"{e.meta.get('file', e.id)}:{e.meta.get('line', '?')}"


def check_one_mask(encoded: EncodedSplit, mask_id: int, examples: Sequence[Example], what: str, max_length: int) -> None:
    """Every encoded probe must hold exactly one mask token (the one its object is scored at)."""
    counts = torch.zeros(len(encoded), dtype=torch.long).index_add_(
        0, torch.repeat_interleave(torch.arange(len(encoded)), encoded.lengths), (encoded.input_ids == mask_id).long()
    )
    bad = (counts != 1).nonzero()
    if len(bad):
        row = int(bad[0])
        found = int(counts[row])
        why = f"the mask is cut off at model.max_length={max_length}" if found == 0 else f"it holds {found} mask tokens, not one"
        raise DataError(f"{probe_location(examples[row])}: field '{what}': {why}")


def read_text_lines(path: str) -> list[str]:
    p = Path(path).expanduser()
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise DataError(f"text file not found: {p}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataError(f"{p}: not UTF-8 ({exc.reason} at byte {exc.start})") from exc
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        raise DataError(f"{p}: no text lines")
    return lines
