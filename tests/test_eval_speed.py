"""Evaluation speed settings that must not change a prediction: length-sorted evaluation batches
and the attention kernel (`model.attn_implementation`)."""

from __future__ import annotations

import pytest
import torch

from negtrain.recipes import load_recipe
from negtrain.training.build import build


def _built(**overrides):
    base = {"data.eval": [{"benchmark": "scone", "split": "test"}], "selection.metric": None, "logger": "none"}
    return build(load_recipe("scone_minilm", base | overrides).recipe, stage="validate")


@pytest.mark.parametrize("bucket", [True, False])
def test_evaluation_batches_are_length_sorted_whatever_training_does(data_dir, bucket):
    built = _built(**{"data.bucket_by_length": bucket, "data.eval_batch_size": 64})
    lengths = built.data.eval_sets[0].encoded.lengths
    batches = list(built.data.val_dataloader()[0].batch_sampler)
    seen = sorted(i for b in batches for i in b)
    assert seen == list(range(len(lengths)))  # every example once
    per_batch = [lengths[b].tolist() for b in batches]
    flat = [n for b in per_batch for n in b]
    assert flat == sorted(flat, reverse=True)
    # Sorted batches carry little padding: under 10% of the padded tokens on ScoNe test.
    padded = sum(max(b) * len(b) for b in per_batch)
    assert 1 - sum(flat) / padded < 0.10


@torch.inference_mode()
def _predictions(built, every: int = 1) -> torch.Tensor:
    """Predictions on ScoNe test (-1 where skipped); ``every``: score only every n-th batch, for
    the bf16 checks, which a CPU without native bf16 runs emulated and tens of times slower."""
    module = built.module.eval()
    out = torch.full((len(built.data.eval_sets[0].examples),), -1, dtype=torch.long)
    for k, batch in enumerate(built.data.val_dataloader()[0]):
        if k % every == 0:
            out[batch["index"]] = module.predict(batch, module.eval_sets[0])
    return out


def test_attention_kernels_agree(data_dir):
    eager = _built(**{"model.attn_implementation": "eager"})
    sdpa = _built(**{"model.attn_implementation": "sdpa"})
    assert eager.module.model.config._attn_implementation == "eager"
    assert sdpa.module.model.config._attn_implementation == "sdpa"
    # The head is new (random), so give both the same one before comparing.
    sdpa.module.model.load_state_dict(eager.module.model.state_dict())
    assert torch.equal(_predictions(eager), _predictions(sdpa))


def test_close_calls_are_the_rows_within_the_margin_under_autocast_only():
    from negtrain.models.base import close_calls

    logits = torch.tensor([[1.0, 0.5], [3.0, 0.0], [0.2, 0.1], [-1.0, 2.5]])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert close_calls(logits, 1.0).tolist() == [0, 2]
        assert close_calls(logits, None) is None
        assert close_calls(logits, 0.05) is None
    assert close_calls(logits, 1.0) is None  # fp32 already: nothing to recheck


EVERY = 5  # 4 of ScoNe test's 19 evaluation batches: 256 examples of every length


@torch.inference_mode()
def _bf16_predictions(built) -> torch.Tensor:
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return _predictions(built, EVERY)


def _near_tie_head(built, seed: int = 0) -> None:
    """A two-way head whose rows differ by a little noise, so its two logits are large and close:
    their difference (~0.02) is the size of bf16's rounding of them, and bf16 flips many calls.

    Deterministic on purpose. With the fresh head from_pretrained draws from the global RNG, whether
    bf16 flipped any of these 256 predictions depended on what ran before in the process: over
    seeds 0-6, heads 0, 2, 4 and 5 gave no flip at all, so the test failed in a full run (another
    RNG state) and passed alone.
    """
    g = torch.Generator().manual_seed(seed)
    head = built.module.model.classifier
    base = torch.randn(head.weight.shape[1], generator=g) * 0.5
    with torch.no_grad():
        head.weight.copy_(torch.stack([base, base + 1e-3 * torch.randn(base.shape, generator=g)]))
        head.bias.zero_()


def test_bf16_evaluation_reports_fp32_predictions(data_dir):
    built = _built()
    _near_tie_head(built)
    module = built.module
    module.config = module.config.model_copy(update={"fp32_recheck_margin": None})
    fp32 = _predictions(built, EVERY)
    assert (fp32 >= 0).sum() == 256
    assert 0 < (fp32 == 0).sum() < 256  # both labels: the head is not a constant
    raw = _bf16_predictions(built)
    assert (raw != fp32).sum() >= 10  # without the recheck bf16 disagrees on many near ties
    module.config = module.config.model_copy(update={"fp32_recheck_margin": 1.0})
    assert torch.equal(_bf16_predictions(built), fp32)
