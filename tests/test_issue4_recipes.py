"""The CondaQA / TINAD recipes validate and carry the papers' settings."""

from __future__ import annotations

from negtrain.recipes import load_recipe


def test_condaqa_unifiedqa_is_the_paper_setup():
    r = load_recipe("condaqa_unifiedqa").recipe
    assert r.model.name == "allenai/unifiedqa-v2-t5-large-1363200" and r.model.family == "seq2seq"
    assert r.model.learning_rate == 5e-5 and r.trainer.max_epochs == 5
    assert r.selection.metric == "condaqa/dev/accuracy" and r.model.normalize_input == "unifiedqa"
    lora = load_recipe("condaqa_unifiedqa_3b_lora").recipe
    assert "3b" in lora.model.name and lora.adapter.type == "lora"


def test_tinad_repo_llama2_qlora_is_the_authors_repository_setup():
    r = load_recipe("tinad_repo_llama2_qlora").recipe
    a = r.adapter
    assert (a.type, a.bits, a.r, a.alpha, a.dropout) == ("qlora", 4, 8, 16, 0.05)
    assert a.target_modules == ["q_proj", "v_proj"] and r.selection.metric == "tinad/validation/accuracy"
    assert (r.model.learning_rate, r.model.scheduler, r.model.warmup_ratio) == (3e-4, "cosine", 0.03)
    assert r.trainer.max_epochs == 3 and r.data.batch_size == 32 and r.model.family == "causal_lm"
    assert r.data.eval[0].benchmark == "tinad" and r.data.eval[0].split == "validation"
    assert load_recipe("tinad_flant5").recipe.model.family == "seq2seq"
