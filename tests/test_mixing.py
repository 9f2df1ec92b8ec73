"""Mixing training sources: configured proportions, realised counts, determinism."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from negtrain.config import MixConfig, validate_recipe
from negtrain.data.mixing import MixingBatchSampler, epoch_counts, is_plain, shares
from negtrain.data.sampler import BatchSampler
from negtrain.core.errors import ConfigError

SIZES = [1000, 100, 10]


def drawn(sampler: MixingBatchSampler, epoch: int = 0) -> np.ndarray:
    sampler.set_epoch(epoch)
    return np.concatenate([np.asarray(b) for b in sampler])


def sampler_for(mix: MixConfig, weights=(1, 1, 1), seed=0, **kwargs) -> MixingBatchSampler:
    counts = epoch_counts(SIZES, weights, mix)
    return MixingBatchSampler(
        np.arange(sum(SIZES)) % 17 + 1, 32, source_sizes=SIZES, counts=counts, shuffle=True, bucket=True, seed=seed, **kwargs
    )


def per_source(indices: np.ndarray) -> list[int]:
    return np.bincount(np.searchsorted(np.cumsum(SIZES), indices, side="right"), minlength=3).tolist()


def test_default_mix_is_every_example_once():
    counts = epoch_counts(SIZES, [1, 1, 1], MixConfig())
    assert counts.tolist() == SIZES and is_plain(SIZES, counts)


def test_temperature_shares_and_counts():
    mix = MixConfig(sampling="temperature", temperature=2.0, epoch=1110)
    # p ∝ sqrt(n): sqrt(1000), 10, sqrt(10)
    mass = np.array([1000**0.5, 10.0, 10**0.5])
    assert shares(SIZES, [1, 1, 1], mix) == pytest.approx(mass / mass.sum())
    counts = epoch_counts(SIZES, [1, 1, 1], mix)
    assert counts.sum() == 1110
    # 1110 * p = 783.77, 247.85, 78.38: floors 783, 247, 78 leave 2, which go to the two largest
    # remainders (.85 and .77).
    assert counts.tolist() == [784, 248, 78]


def test_weights_and_largest_epoch():
    mix = MixConfig(epoch="largest")
    # Proportional with weights 1, 2, 10: mass 1000, 200, 100 -> the largest source contributes
    # its 1000 once; the others 1000 * 200/1000 and 1000 * 100/1000.
    assert epoch_counts(SIZES, [1, 2, 10], mix).tolist() == [1000, 200, 100]


@pytest.mark.parametrize("mix", [MixConfig(sampling="temperature", temperature=3.0, epoch="largest"), MixConfig(epoch=500)])
def test_realised_counts_match_configuration_and_seed(mix):
    weights = (1, 3, 5)
    counts = epoch_counts(SIZES, weights, mix).tolist()
    a = drawn(sampler_for(mix, weights, seed=7))
    assert per_source(a) == counts
    assert len(sampler_for(mix, weights)) == -(-sum(counts) // 32)
    # Same seed, same epoch: the same examples in the same order. Another epoch or seed differs.
    assert np.array_equal(a, drawn(sampler_for(mix, weights, seed=7)))
    assert not np.array_equal(a, drawn(sampler_for(mix, weights, seed=7), epoch=1))
    assert not np.array_equal(a, drawn(sampler_for(mix, weights, seed=8)))
    # Realised proportions are the configured shares up to rounding to whole examples.
    realised = np.array(per_source(a)) / len(a)
    if mix.epoch != "largest":
        assert realised == pytest.approx(shares(SIZES, weights, mix), abs=1 / len(a))


def test_oversampling_is_balanced_within_a_source():
    mix = MixConfig(sampling="temperature", temperature=2.0, epoch=1110)
    a = drawn(sampler_for(mix))
    small = np.bincount(a[a >= 1100] - 1100, minlength=10)
    # 78 draws of 10 examples: 7 full passes and 8 more, so every example 7 or 8 times.
    assert small.sum() == 78 and set(small.tolist()) == {7, 8} and (small == 8).sum() == 8
    mid = np.bincount(a[(a >= 1000) & (a < 1100)] - 1000, minlength=100)
    assert set(mid.tolist()) == {2, 3} and (mid == 3).sum() == 48  # 248 draws of 100


def test_ranks_share_one_epoch():
    # A nearly uniform mix of 300: the 10-example source is drawn about ten times over, so examples
    # repeat and only a multiset comparison can tell ranks that share an example apart.
    mix = MixConfig(sampling="temperature", temperature=100.0, epoch=300)
    whole = drawn(sampler_for(mix))
    real, padding = [], []
    for r in (0, 1):
        sampler = sampler_for(mix, num_replicas=2, rank=r)
        sampler.set_epoch(0)
        for batch in sampler:
            (padding if batch.padding else real).extend(batch)
    # The ranks' real batches are the single-process epoch, each example as often as there;
    # the rest is at most one padding batch, repeating real examples.
    assert Counter(real) == Counter(whole.tolist())
    assert Counter(whole.tolist()).most_common(1)[0][1] > 1
    assert len(padding) <= 32 and set(padding) <= set(real)


def test_plain_mix_uses_the_unmixed_sampler_order():
    """With default settings the data module builds the plain BatchSampler: same batches as before."""
    from negtrain.config import DataConfig, SourceConfig
    from negtrain.data.encoded import EncodedSplit
    from negtrain.data.module import NegtrainData, TrainSet

    lengths = [3, 5, 2, 7, 4, 6]
    enc = EncodedSplit.from_lists([[1] * n for n in lengths], None)
    cfg = DataConfig(train=[SourceConfig(benchmark="a", split="s"), SourceConfig(benchmark="b", split="s")], batch_size=2)
    data = NegtrainData(cfg, 5, 0, TrainSet(enc, {}, ["a/s", "b/s"], [4, 2]), [])
    sampler = data.train_dataloader().batch_sampler
    assert type(sampler) is BatchSampler
    assert data.train_shares == pytest.approx([4 / 6, 2 / 6]) and data.train_counts == [4, 2]


def test_an_empty_training_source_is_named():
    # Its share would be 0/0 and its draws a division by zero; say which source it is instead.
    from negtrain.config import DataConfig, SourceConfig
    from negtrain.data.encoded import EncodedSplit
    from negtrain.data.module import NegtrainData, TrainSet
    from negtrain.core.errors import DataError

    enc = EncodedSplit.from_lists([[1] * 3] * 4, None)
    cfg = DataConfig(train=[SourceConfig(benchmark="a", split="s"), SourceConfig(benchmark="b", split="s")], batch_size=2)
    with pytest.raises(DataError, match="data.train: b/s has no training examples"):
        NegtrainData(cfg, 5, 0, TrainSet(enc, {}, ["a/s", "b/s"], [4, 0]), [])


def test_mix_config_is_validated():
    base = {"description": "x", "model": {"name": "m"}, "data": {"train": [{"benchmark": "scone", "split": "train"}]}}

    def with_mix(mix):
        return {**base, "data": {**base["data"], "mix": mix}}

    with pytest.raises(ConfigError, match="needs mix.temperature"):
        validate_recipe(with_mix({"sampling": "temperature"}), "r.yaml")
    with pytest.raises(ConfigError, match="only used with mix.sampling: temperature"):
        validate_recipe(with_mix({"temperature": 2}), "r.yaml")
    with pytest.raises(ConfigError, match="positive"):
        validate_recipe(with_mix({"epoch": 0}), "r.yaml")
    with pytest.raises(ConfigError, match="did you mean 'temperature'"):
        validate_recipe(with_mix({"temprature": 2}), "r.yaml")
    assert validate_recipe(with_mix({"sampling": "temperature", "temperature": 2, "epoch": "largest"}), "r.yaml").data.mix.epoch == "largest"


def test_offline_mixed_recipe_logs_realised_counts(tmp_path, monkeypatch):
    """mnli_negation_mix_minilm for a few steps: the train line logs the per-source counts."""
    from negtrain.recipes import load_recipe
    from negtrain.training.run import fit

    mirror = os.environ.get("NEGTRAIN_DATA_DIR")
    if not mirror:
        pytest.fail("set NEGTRAIN_DATA_DIR to the shared data mirror")
    fixtures = Path(__file__).parent / "fixtures" / "data"
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", f"{fixtures}{os.pathsep}{mirror}")
    monkeypatch.setenv("NEGTRAIN_OFFLINE", "1")
    monkeypatch.setenv("NEGTRAIN_CACHE_DIR", str(tmp_path / "cache"))
    overrides = {
        "trainer.max_epochs": 1,
        "data.mix.epoch": 96,
        "trainer.limit_val_batches": 1,
        "trainer.enable_progress_bar": False,
        "trainer.precision": "32-true",
        "data.eval_batch_size": 16,
    }
    loaded = load_recipe("mnli_negation_mix_minilm", overrides)
    run_dir = fit(loaded, tmp_path / "run")
    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    train = next(x for x in lines if x["benchmark"] == "train")
    sources = train["sources"]
    sizes = [s["size"] for s in sources.values()]
    expected = epoch_counts(sizes, [1] * len(sizes), loaded.recipe.data.mix).tolist()
    assert [s["examples"] for s in sources.values()] == expected and sum(expected) == 96
    assert sources["mnli/train"]["size"] == 48
    nan = next(x for x in lines if x["benchmark"] == "nannli")
    assert "f1" in nan["metrics"] and "note" not in nan
