"""The cue-masking collator: cues always masked at prob 1, other tokens near their rate, labels right."""

from __future__ import annotations

import pytest
import torch

from negtrain.negation.cues import CueDetector
from negtrain.objectives.masking import CueMaskingTransform, MaskingSpec, mask_tokens
from negtrain.data.collate import IGNORE

TEXTS = [
    "I do not think that nothing is wrong with the plan.",
    "Nobody came, and the house was never cleaned without help.",
    "The weather was fine and the sea was calm all day long.",
    "In the absence of evidence, they failed to convince anyone at all.",
] * 8


@pytest.fixture(scope="module")
def setup(minilm_path):
    from transformers import AutoTokenizer

    from negtrain.data.encoded import EncodedSplit

    tok = AutoTokenizer.from_pretrained(minilm_path)
    tok.add_special_tokens({"additional_special_tokens": ["[CUE]"]})
    ids, flags = CueDetector().tokenize(tok, TEXTS)
    encoded = EncodedSplit.from_lists(ids, None, flags)
    return tok, encoded, encoded.cue_flags


def batch_of(setup, spec, seed=0, per_example=False):
    from negtrain.data.collate import PadCollator

    tok, encoded, flags = setup
    raw = PadCollator(encoded, tok.pad_token_id)(list(range(len(encoded))))
    original = raw["input_ids"].clone()
    out = CueMaskingTransform(encoded, flags, spec, seed, per_example=per_example)(raw, 0)
    from negtrain.objectives.masking import pad_flags

    cue = pad_flags(flags, encoded, torch.arange(len(encoded)), original.shape[1])
    return original, out, cue


def spec_for(tok, **rates):
    return MaskingSpec.for_tokenizer(tok, tok.convert_tokens_to_ids("[CUE]"), **rates)


def test_every_cue_is_masked_with_cue_token_and_labels_are_the_originals(setup):
    tok = setup[0]
    original, out, cue = batch_of(setup, spec_for(tok, cue_mask_prob=1.0, mlm_probability=0.15))
    cue_id = tok.convert_tokens_to_ids("[CUE]")
    assert cue.sum() > 0
    assert (out["input_ids"][cue] == cue_id).all()
    assert out["cue_positions"].equal(cue)
    labelled = out["labels"] != IGNORE
    assert (out["labels"][labelled] == original[labelled]).all()
    assert labelled[cue].all()
    # [CUE] appears only where a cue was
    assert ((out["input_ids"] == cue_id) == cue).all()
    # the cue tokens are the words the detector names
    first = tok.convert_ids_to_tokens(original[0][cue[0]].tolist())
    assert first == ["not", "nothing"]


def test_special_and_padding_tokens_are_never_masked(setup):
    tok = setup[0]
    spec = spec_for(tok, cue_mask_prob=1.0, mlm_probability=1.0, mask_replace_prob=0.5, random_replace_prob=0.5)
    original, out, _ = batch_of(setup, spec)
    special = torch.isin(original, spec.special_ids)
    assert special.any() and (original == tok.pad_token_id).any()
    assert (out["input_ids"][special] == original[special]).all()
    assert (out["labels"][special] == IGNORE).all()
    # with rate 1 every other token is masked, and random replacements are never special
    assert (out["labels"][~special] != IGNORE).all()
    replaced = (out["input_ids"] != original) & ~special
    assert not torch.isin(out["input_ids"][replaced & (out["input_ids"] != spec.mask_id) & (out["input_ids"] != spec.cue_id)], spec.special_ids).any()


def test_non_cue_rate_and_80_10_10_split_over_many_samples(setup):
    tok = setup[0]
    spec = spec_for(tok, cue_mask_prob=1.0, mlm_probability=0.15)
    gen = torch.Generator().manual_seed(123)
    _, encoded, flags = setup
    from negtrain.data.collate import PadCollator
    from negtrain.objectives.masking import pad_flags

    raw = PadCollator(encoded, tok.pad_token_id)(list(range(len(encoded))))
    cue = pad_flags(flags, encoded, torch.arange(len(encoded)), raw["input_ids"].shape[1])
    other = raw["attention_mask"].bool() & ~cue & ~torch.isin(raw["input_ids"], spec.special_ids)
    masked = total = to_mask = to_keep = 0
    for _ in range(200):
        out = mask_tokens(raw["input_ids"], raw["attention_mask"], cue, spec, gen)
        m = (out["labels"] != IGNORE) & other
        masked += int(m.sum())
        total += int(other.sum())
        to_mask += int((out["input_ids"][m] == spec.mask_id).sum())
        to_keep += int((out["input_ids"][m] == raw["input_ids"][m]).sum())
    assert masked / total == pytest.approx(0.15, abs=0.01)
    assert to_mask / masked == pytest.approx(0.8, abs=0.02)
    # kept = the 10% left alone, plus the rare random draw of the same token
    assert to_keep / masked == pytest.approx(0.1, abs=0.02)


def test_cue_mask_prob_below_one_and_mask_token_alternative(setup):
    tok = setup[0]
    spec = MaskingSpec.for_tokenizer(tok, None, cue_mask_prob=0.5, mlm_probability=0.0)
    original, out, cue = batch_of(setup, spec)
    rate = out["cue_positions"][cue].float().mean().item()
    assert 0.3 < rate < 0.7
    assert (out["input_ids"][out["cue_positions"]] == tok.mask_token_id).all()
    assert (out["labels"][~cue] == IGNORE).all()  # mlm_probability 0: nothing else masked


def test_fixed_seed_is_deterministic_and_eval_masks_repeat(setup):
    tok = setup[0]
    spec = spec_for(tok)
    _, a, _ = batch_of(setup, spec, seed=5)
    _, b, _ = batch_of(setup, spec, seed=5)
    _, c, _ = batch_of(setup, spec, seed=6)
    assert a["labels"].equal(b["labels"]) and not a["labels"].equal(c["labels"])
    _, e1, _ = batch_of(setup, spec, seed=5, per_example=True)
    _, e2, _ = batch_of(setup, spec, seed=5, per_example=True)
    assert e1["input_ids"].equal(e2["input_ids"])


def test_held_out_masks_repeat_every_epoch_and_ignore_how_examples_are_batched(setup):
    # Held-out masks are drawn per example (seeded by its index), so one transform applied in two
    # epochs, or to the rows dealt out over two ranks, masks every example the same way; a single
    # batch-level draw would differ on both counts.
    from negtrain.data.collate import PadCollator

    tok, encoded, flags = setup
    collate = PadCollator(encoded, tok.pad_token_id)
    n = len(encoded)
    assert n >= 4
    transform = CueMaskingTransform(encoded, flags, spec_for(tok, mlm_probability=0.3), 5, per_example=True)

    def masked(indices):
        out = transform(collate(indices), 0)
        return {i: (out["input_ids"][r], out["labels"][r]) for r, i in enumerate(indices)}

    whole = masked(list(range(n)))
    again = masked(list(range(n)))  # the next epoch, same transform object
    halves = masked(list(range(0, n, 2))) | masked(list(range(1, n, 2)))  # rank 0 and rank 1
    for i in range(n):
        length = int(encoded.lengths[i])
        for other in (again, halves):
            assert whole[i][0][:length].equal(other[i][0][:length]), (i, other is again)
            assert whole[i][1][:length].equal(other[i][1][:length]), (i, other is again)
    # And the masks do mask something, so the equalities above are not of untouched inputs.
    assert any((whole[i][1] != IGNORE).any() for i in range(n))

    batch_level = CueMaskingTransform(encoded, flags, spec_for(tok, mlm_probability=0.3), 5, per_example=False)
    first = batch_level(collate(list(range(n))), 0)["labels"]
    second = batch_level(collate(list(range(n))), 1)["labels"]
    assert not first.equal(second)  # the training transform draws anew each epoch


def test_training_masks_are_a_function_of_seed_epoch_and_batch_in_any_worker(setup):
    # One shared generator would be copied into each dataloader worker (two workers, the same
    # masks) and restart from the seed on resume. Through a real two-worker loader over two
    # epochs, every batch's masks must equal a fresh transform's for (seed, epoch, indices).
    from torch.utils.data import DataLoader

    from negtrain.data.collate import BatchIndices, PadCollator
    from negtrain.data.sampler import BatchSampler
    from negtrain.models.mlm_inputs import _Then

    tok, encoded, flags = setup
    spec = spec_for(tok, mlm_probability=0.5)
    sampler = BatchSampler(encoded.lengths, 1, shuffle=True, bucket=False, seed=3)
    collate = PadCollator(encoded, tok.pad_token_id)
    loader = DataLoader(
        BatchIndices(len(encoded)), batch_sampler=sampler, num_workers=2,
        collate_fn=_Then(collate, CueMaskingTransform(encoded, flags, spec, 9)),
    )
    seen = {}
    for epoch in (0, 1):
        sampler.set_epoch(epoch)
        for batch in loader:
            index = int(batch["index"][0])
            fresh = CueMaskingTransform(encoded, flags, spec, 9)(collate([index]), epoch)
            assert batch["input_ids"].equal(fresh["input_ids"]) and batch["labels"].equal(fresh["labels"])
            seen[epoch, index] = batch["labels"]
    n = len(encoded)
    assert len(seen) == 2 * n
    # Workers draw different masks for different examples of equal length, and epochs differ.
    assert any(not seen[0, i].equal(seen[1, i]) for i in range(n))
