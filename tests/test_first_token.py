"""`model.first_token_only`: the last layer computes only the position the head reads, and the
logits stay those of the full forward."""

from __future__ import annotations

import pytest
import torch

from negtrain.models.first_token import first_position_only, last_layer

PAIRS = [
    ("A dog is not running in the park.", "An animal is running."),
    ("Nobody here likes cold soup.", "Someone likes soup."),
    ("The cat sat.", "The cat did not sit on the mat that was red."),
]


def _batch(tokenizer):
    # Three lengths, so two rows are padded and the mask matters.
    return tokenizer([p for p, _ in PAIRS], [h for _, h in PAIRS], padding=True, return_tensors="pt")


def _minilm(minilm_path, attn):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(minilm_path, num_labels=3, attn_implementation=attn)
    return model.eval(), AutoTokenizer.from_pretrained(minilm_path)


def _last_hidden_length(model, batch, enabled: bool) -> tuple[torch.Tensor, int]:
    seen = {}
    encoder = last_layer(model)
    hook = encoder.register_forward_hook(lambda m, a, out: seen.update(shape=out.shape))  # returns None: output kept
    try:
        with torch.no_grad(), first_position_only(model, enabled) as active:
            logits = model(**batch).logits
    finally:
        hook.remove()
    assert active == enabled
    return logits, seen["shape"][1]


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_bert_logits_match_the_full_forward(minilm_path, attn):
    model, tok = _minilm(minilm_path, attn)
    batch = _batch(tok)
    full, full_len = _last_hidden_length(model, batch, enabled=False)
    first, first_len = _last_hidden_length(model, batch, enabled=True)
    assert full_len == batch["input_ids"].shape[1] and first_len == 1  # only position 0 computed
    assert torch.allclose(first, full, atol=1e-5), (first - full).abs().max()
    # Leaving the block restores the ordinary layer.
    again, again_len = _last_hidden_length(model, batch, enabled=False)
    assert again_len == full_len and torch.equal(again, full)


def test_roberta_and_a_lora_wrapper_take_the_path_too(minilm_path):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoTokenizer, RobertaConfig, RobertaForSequenceClassification

    tok = AutoTokenizer.from_pretrained(minilm_path)
    torch.manual_seed(0)
    cfg = RobertaConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                        num_labels=3, pad_token_id=0, attn_implementation="eager")
    model = RobertaForSequenceClassification(cfg).eval()
    batch = _batch(tok)
    batch.pop("token_type_ids")
    full, _ = _last_hidden_length(model, batch, enabled=False)
    first, n = _last_hidden_length(model, batch, enabled=True)
    assert n == 1 and torch.allclose(first, full, atol=1e-5)

    lora = get_peft_model(model, LoraConfig(task_type="SEQ_CLS", r=4, target_modules=["query", "value"])).eval()
    for p in lora.parameters():  # LoRA's B starts at zero; make the adapter change the output
        if p.requires_grad:
            torch.nn.init.normal_(p, std=0.1)
    full, _ = _last_hidden_length(lora, batch, enabled=False)
    first, n = _last_hidden_length(lora, batch, enabled=True)
    assert n == 1 and torch.allclose(first, full, atol=1e-5)


def test_an_unknown_architecture_runs_in_full():
    from transformers import DebertaV2Config, DebertaV2ForSequenceClassification

    model = DebertaV2ForSequenceClassification(
        DebertaV2Config(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, num_labels=3)
    )
    assert last_layer(model) is None
    with first_position_only(model) as active:
        assert active is False


def test_the_layer_is_restored_after_an_error(minilm_path):
    model, tok = _minilm(minilm_path, "eager")
    layer = last_layer(model)
    with pytest.raises(RuntimeError, match="boom"):
        with first_position_only(model):
            assert "forward" in vars(layer)
            raise RuntimeError("boom")
    assert "forward" not in vars(layer)


def test_predictions_on_scone_are_unchanged(data_dir):
    """Through the NLI module's predict, under bf16 autocast with its fp32 recheck."""
    from negtrain.recipes import load_recipe
    from negtrain.training.build import build

    base = {"data.eval": [{"benchmark": "scone", "split": "test"}], "selection.metric": None, "logger": "none"}
    built = build(load_recipe("scone_minilm", base).recipe, stage="validate")
    module = built.module.eval()

    @torch.inference_mode()
    def predictions(first_only: bool) -> torch.Tensor:
        # Every 5th of the 19 length-sorted batches (256 examples of every length): a CPU without
        # native bf16 emulates it, tens of times slower than fp32.
        module.config.first_token_only = first_only
        out = torch.full((len(built.data.eval_sets[0].examples),), -1, dtype=torch.long)
        for k, batch in enumerate(built.data.val_dataloader()[0]):
            if k % 5 == 0:
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    out[batch["index"]] = module.predict(batch, module.eval_sets[0])
        return out

    assert built.module.config.first_token_only  # on by default
    first_only = predictions(True)
    assert (first_only >= 0).sum() == 256
    assert torch.equal(first_only, predictions(False))
