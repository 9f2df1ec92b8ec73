"""`model.freeze` / `model.freeze_embeddings` on the packaged MiniLM, through a real Trainer fit."""

from __future__ import annotations

import lightning.pytorch as pl
import pytest
import torch

from negtrain.core.errors import ConfigError
from negtrain.recipes import load_recipe
from negtrain.training.build import build

BOTTOM_TWO = ["*.encoder.layer.0.*", "*.encoder.layer.1.*"]


def _built(data_dir, **overrides):
    small = {"data.train": [{"benchmark": "scone", "split": "train"}], "data.eval": [], "selection.metric": None, "logger": "none"}
    return build(load_recipe("scone_minilm", small | overrides).recipe)


def test_frozen_parameters_stay_put_and_the_rest_train(data_dir):
    built = _built(data_dir, **{"model.freeze": BOTTOM_TWO})
    before = {n: p.detach().clone() for n, p in built.module.model.named_parameters()}
    trainer = pl.Trainer(
        max_steps=3, precision="bf16-mixed", logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False, use_distributed_sampler=False, limit_val_batches=0,
    )
    trainer.fit(built.module, datamodule=built.data)
    after = dict(built.module.model.named_parameters())
    frozen = {n for n in before if ".encoder.layer.0." in n or ".encoder.layer.1." in n}
    frozen.add("bert.embeddings.word_embeddings.weight")  # the recipe's freeze_embeddings
    assert len(frozen) == 1 + 2 * 16  # 16 tensors per BERT layer
    for name in before:
        moved = not torch.equal(before[name], after[name].detach())
        assert moved != (name in frozen), name
    # The optimizer holds exactly the trainable parameters.
    in_optimizer = {id(p) for group in trainer.optimizers[0].param_groups for p in group["params"]}
    assert in_optimizer == {id(p) for n, p in after.items() if n not in frozen}


def test_a_pattern_that_matches_nothing_names_the_parameters(data_dir):
    with pytest.raises(ConfigError, match=r"'\*\.encoder\.layers\.0\.\*' matches no parameter .*bert\.embeddings"):
        _built(data_dir, **{"model.freeze": ["*.encoder.layers.0.*"]})


def test_freezing_everything_is_refused(data_dir):
    with pytest.raises(ConfigError, match="no parameter to train"):
        _built(data_dir, **{"model.freeze": ["*"]})
