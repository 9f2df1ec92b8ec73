"""Tokenizing once into flat storage: chunked encoding equals one call, and padding is per batch."""

from __future__ import annotations

import pytest
import torch

from negtrain.benchmarks.base import Example
from negtrain.data import encoded
from negtrain.data.collate import PadCollator
from negtrain.models import mlm_inputs, nli
from negtrain.negation.cues import CueDetector


def _examples():
    words = "no one ever said the cat was not on a mat".split()
    return [Example(id=f"x/{i}", inputs=(" ".join(words[: 2 + i % 9]), " ".join(words[i % 5 :])), label="entailment") for i in range(11)]


def test_chunked_encoding_equals_one_call(monkeypatch, minilm_path):
    from transformers import AutoTokenizer

    monkeypatch.setenv("NEGTRAIN_NO_TOKEN_CACHE", "1")
    tok = AutoTokenizer.from_pretrained(minilm_path)
    examples = _examples()
    whole = nli.encode_pairs(tok, examples, 64)
    monkeypatch.setattr(encoded, "TOKENIZE_CHUNK", 3)
    chunked = nli.encode_pairs(tok, examples, 64)
    assert torch.equal(whole.input_ids, chunked.input_ids)
    assert torch.equal(whole.offsets, chunked.offsets)
    assert torch.equal(whole.token_type_ids, chunked.token_type_ids)
    # Each example's ids are exactly what the tokenizer gives for it alone.
    for i in (0, 4, 10):
        alone = tok(examples[i].inputs[0], examples[i].inputs[1], truncation=True, max_length=64)["input_ids"]
        assert chunked.input_ids[chunked.offsets[i] : chunked.offsets[i + 1]].tolist() == alone
    assert len(nli.encode_pairs(tok, [], 64)) == 0


CUE_TEXTS = [
    "Nobody came.", "The sea was calm.", "I do not think so, and I never will.", "Without help it failed.",
    "They weren't there.", "A plain sentence with no cue at all, but a long one.", "No.",
]


def test_cue_corpus_chunked_and_cached_equals_one_call(monkeypatch, minilm_path):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(minilm_path)
    detector = CueDetector()
    ids, flags = detector.tokenize(tok, CUE_TEXTS, truncation=True, max_length=12)
    monkeypatch.setattr(encoded, "TOKENIZE_CHUNK", 2)
    split = mlm_inputs.encode_cue_texts(tok, detector, CUE_TEXTS, 12)
    for i, (row_ids, row_flags) in enumerate(zip(ids, flags, strict=False)):
        a, b = int(split.offsets[i]), int(split.offsets[i + 1])
        assert split.input_ids[a:b].tolist() == row_ids
        assert split.cue_flags[a:b].tolist() == row_flags
    assert split.cue_flags.sum() >= 6  # nobody, not, never, without, n't, no

    # A second build with the same inputs is read from the cache: the tokenizer is not called.
    monkeypatch.setattr(CueDetector, "tokenize", lambda *a, **k: (_ for _ in ()).throw(AssertionError("tokenized again")))
    again = mlm_inputs.encode_cue_texts(tok, detector, CUE_TEXTS, 12)
    assert torch.equal(again.input_ids, split.input_ids) and torch.equal(again.cue_flags, split.cue_flags)
    # Another cue lexicon or max_length is another cache entry.
    for changed in (lambda: mlm_inputs.encode_cue_texts(tok, CueDetector(cues=["never"]), CUE_TEXTS, 12),
                    lambda: mlm_inputs.encode_cue_texts(tok, detector, CUE_TEXTS, 13)):
        with pytest.raises(AssertionError, match="tokenized again"):
            changed()


def test_single_texts_chunked_equal_one_call(monkeypatch, minilm_path):
    from transformers import AutoTokenizer

    monkeypatch.setenv("NEGTRAIN_NO_TOKEN_CACHE", "1")
    tok = AutoTokenizer.from_pretrained(minilm_path)
    whole = mlm_inputs.encode_texts(tok, CUE_TEXTS, 12)
    monkeypatch.setattr(encoded, "TOKENIZE_CHUNK", 3)
    chunked = mlm_inputs.encode_texts(tok, CUE_TEXTS, 12)
    assert torch.equal(whole.input_ids, chunked.input_ids) and torch.equal(whole.offsets, chunked.offsets)
    assert chunked.input_ids[chunked.offsets[2] : chunked.offsets[3]].tolist() == tok(CUE_TEXTS[2], truncation=True, max_length=12)["input_ids"]
    assert len(mlm_inputs.encode_texts(tok, [], 12)) == 0


def test_batches_pad_to_their_longest_member(minilm_path, monkeypatch):
    from transformers import AutoTokenizer

    monkeypatch.setenv("NEGTRAIN_NO_TOKEN_CACHE", "1")
    tok = AutoTokenizer.from_pretrained(minilm_path)
    encoded = nli.encode_pairs(tok, _examples(), 64)
    batch = PadCollator(encoded, tok.pad_token_id)([0, 1])
    lengths = encoded.lengths[[0, 1]]
    assert batch["input_ids"].shape == (2, int(lengths.max()))
    assert batch["attention_mask"].sum(1).tolist() == lengths.tolist()
    left = PadCollator(encoded, tok.pad_token_id, pad_left=True)([0, 1])
    assert left["attention_mask"][:, -1].tolist() == [1, 1]


def test_optimizer_choice():
    """Fused AdamW by default; foreach when Lightning must clip gradients under mixed precision."""
    import pytest

    from negtrain.core.errors import ConfigError
    from negtrain.models.base import optimizer_kwargs

    params = [torch.zeros(3, requires_grad=True)]
    assert optimizer_kwargs("auto", params) == {"fused": True}
    assert optimizer_kwargs("auto", params, clip_under_amp=True) == {"foreach": True}
    assert optimizer_kwargs("for-loop", params) == {"foreach": False}
    with pytest.raises(ConfigError, match="cannot be combined with trainer.gradient_clip_val"):
        optimizer_kwargs("fused", params, clip_under_amp=True)
