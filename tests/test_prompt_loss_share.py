"""`model.prompt_loss: share`: the prompt tokens of an example together carry `prompt_loss_weight`
of its loss, as the TINAD authors' training code weighs them (dataset.py: each prompt token weighs
answer_tokens * w / ((1 - w) * prompt_tokens); run.py: sum(loss * weight) / sum(weight) over the
batch's targets). Checked by hand on a tiny Llama-style model."""

from __future__ import annotations

import pytest
import torch

from negtrain.core.errors import ConfigError
from negtrain.recipes import load_recipe
from test_lm_families import _module, _recipe
from tiny_models import write_recipe


def test_share_weighs_each_examples_prompt_as_the_authors_code(lm_env, tmp_path):
    w = 0.05
    built = _module(lm_env, tmp_path, "llama", "causal_lm", prompt_loss_weight=w, prompt_loss="share")
    built.data.trainer = None
    batch = next(iter(built.data.train_dataloader()))
    module = built.module
    got = float(module.training_loss(batch))
    logits = module.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    ids, mask = batch["input_ids"], batch["attention_mask"]
    width = ids.shape[1]
    num = den = 0.0
    prompt_total = answer_total = 0.0
    for row, n in enumerate(batch["answer_len"].tolist()):
        real = int(mask[row].sum())
        prompt_tokens = real - n  # the prompt, its first token included, as the authors count it
        per_prompt_token = n * w / ((1 - w) * prompt_tokens)
        row_prompt = row_answer = 0.0
        for pos in range(width - real + 1, width):  # every target whose context is a real token
            weight = 1.0 if pos >= width - n else per_prompt_token
            ce = float(torch.nn.functional.cross_entropy(logits[row, pos - 1].float()[None], ids[row, pos][None]))
            num += weight * ce
            den += weight
            if pos >= width - n:
                row_answer += weight
            else:
                row_prompt += weight
        prompt_total += row_prompt
        answer_total += row_answer
        # the prompt's weight is (prompt_tokens - 1) / prompt_tokens of w / (1 - w) of the answer's:
        # the first prompt token is never a target, as in the authors' shifted mask
        assert row_prompt == pytest.approx(row_answer * w / (1 - w) * (prompt_tokens - 1) / prompt_tokens)
    assert got == pytest.approx(num / den, rel=1e-4)
    per_token = _module(lm_env, tmp_path, "llama", "causal_lm", prompt_loss_weight=w)
    per_token.module.model.load_state_dict(module.model.state_dict())
    assert float(per_token.module.training_loss(batch)) != pytest.approx(got, rel=1e-3)  # not the per-token weighting


def test_a_share_of_one_is_refused(lm_env, tmp_path):
    recipe = _recipe(lm_env["llama"], "causal_lm", prompt_loss_weight=1.0, prompt_loss="share")
    recipe["data"]["train"] = [{"benchmark": "tinad", "split": "train"}]
    with pytest.raises(ConfigError, match="below 1"):
        load_recipe(str(write_recipe(tmp_path / "r.yaml", recipe)))
