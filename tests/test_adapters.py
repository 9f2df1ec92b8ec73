"""LoRA and 4-bit QLoRA on the CPU: only adapter and head weights train, adapter-only checkpoints
reload and reproduce the predictions, and a merge changes nothing. Plus the run checks."""

from __future__ import annotations

import json
import warnings

import pytest
import torch

from negtrain.core.errors import ConfigError
from negtrain.models.adapters import merge
from negtrain.recipes import load_recipe
from negtrain.training.build import build, reload_weights
from negtrain.training.run import _prepare_run_dir, _trainer
from tiny_models import save_tiny_bert_nli, write_recipe


@pytest.fixture(scope="module")
def tiny_nli(tmp_path_factory):
    return save_tiny_bert_nli(tmp_path_factory.mktemp("nli") / "bert")


def _recipe(model, adapter, **trainer):
    return {
        "description": "adapter test",
        "model": {"name": str(model), "family": "nli", "max_length": 64, "learning_rate": 5e-3, "head_labels": ["entailment", "not_entailment"]},
        "adapter": adapter,
        "data": {"train": [{"benchmark": "monli", "split": "test"}], "eval": [{"benchmark": "monli", "split": "test"}], "batch_size": 16, "eval_batch_size": 64,
                 "allow_test_rows": True},  # fits the rows it is scored on, knowingly
        "selection": {"epoch": "last"},  # the test reads last.ckpt; nothing is selected
        "trainer": {"max_epochs": 1, "limit_train_batches": 4, "enable_progress_bar": False, "accelerator": "cpu", "torch_threads": 1, **trainer},
    }


def _eval_predictions(module, data):
    data.trainer = None
    module.eval()
    out = {}
    with torch.no_grad():
        for batch in data.val_dataloader()[0]:
            for i, p in zip(batch["index"].tolist(), module.predict(batch, module.eval_sets[0]).tolist(), strict=False):
                out[i] = p
    return out


def _logits(module, data):
    data.trainer = None
    batch = next(iter(data.val_dataloader()[0]))
    with torch.no_grad():
        return module._logits(batch)


@pytest.mark.parametrize("adapter", [{"type": "lora", "r": 4, "alpha": 8}, {"type": "qlora", "r": 4, "alpha": 8, "bits": 4}], ids=["lora", "qlora4"])
def test_adapter_training_checkpoint_and_merge(tiny_nli, tmp_path, monkeypatch, one_thread, adapter):
    monkeypatch.setenv("NEGTRAIN_CACHE_DIR", str(tmp_path / "cache"))
    loaded = load_recipe(str(write_recipe(tmp_path / "r.yaml", _recipe(tiny_nli, adapter))))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        built = build(loaded.recipe)
    module = built.module
    if adapter["type"] == "qlora":
        import bitsandbytes as bnb

        assert any(isinstance(m, bnb.nn.Linear4bit) for m in module.modules())
        # QLoRA recomputes activations, switched on without transformers' deprecated v6-removed name.
        flag = "is_activation_checkpointing" if hasattr(module.model, "is_activation_checkpointing") else "is_gradient_checkpointing"
        assert any(getattr(m, flag, False) for m in module.modules())
        assert not [w for w in caught if "gradient_checkpointing_enable" in str(w.message)]
    before = {n: p.detach().clone() for n, p in module.named_parameters()}
    trainable = {n for n, p in module.named_parameters() if p.requires_grad}
    assert any("lora_" in n for n in trainable) and any("classifier" in n for n in trainable)
    assert all("lora_" in n or "classifier" in n for n in trainable)

    run_dir = _prepare_run_dir(loaded, tmp_path / "run")
    trainer = _trainer(loaded, built, run_dir, "fit")
    trainer.fit(module, datamodule=built.data)

    changed = {n for n, p in module.named_parameters() if not torch.equal(before[n], p.detach())}
    assert changed, "nothing trained"
    assert changed <= trainable, sorted(changed - trainable)[:5]
    assert any("lora_B" in n for n in changed) and any("classifier" in n for n in changed)

    # The checkpoint holds the adapter and the head only.
    ckpt = torch.load(run_dir / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    assert ckpt["negtrain_adapter_only"] is True
    assert set(ckpt["state_dict"]) == trainable
    full = sum(p.numel() for p in module.parameters())
    assert sum(v.numel() for v in ckpt["state_dict"].values()) < 0.5 * full

    # Reloaded into a fresh model it reproduces the run's predictions (as written to the file).
    written = [json.loads(x) for x in (run_dir / "predictions" / "monli-test-epoch0.jsonl").read_text().splitlines()]
    fresh = build(loaded.recipe)
    reload_weights(fresh.module, str(run_dir / "checkpoints" / "last.ckpt"))
    preds = _eval_predictions(fresh.module, fresh.data)
    labels = fresh.data.eval_sets[0].benchmark.labels
    assert [labels[preds[i]] for i in range(len(written))] == [r["prediction"] for r in written]
    if adapter["type"] == "lora":
        assert torch.allclose(_logits(fresh.module, fresh.data), _logits(module.eval(), built.data), atol=1e-5)
    # (Not for QLoRA: bitsandbytes' CPU 4-bit inference repacks the base weights on first use and
    # unpacks them, slightly altered, when a checkpoint reads the state dict, so the trained
    # in-memory model drifts after saving. The run's own predictions, above, are reproduced exactly.)

    if adapter["type"] == "lora":
        before_merge = _logits(fresh.module, fresh.data)
        merge(fresh.module)
        assert not any("lora_" in n for n, _ in fresh.module.named_parameters())
        assert torch.allclose(_logits(fresh.module, fresh.data), before_merge, atol=1e-5)
        assert _eval_predictions(fresh.module, fresh.data) == preds

        # `export --merge-adapter` of the adapter-only checkpoint: a plain from_pretrained folder
        # with the adapters merged into the base model, which the recipe names.
        from transformers import AutoModelForSequenceClassification

        from negtrain.release.export import export
        from negtrain.models.adapters import save_adapter_config

        built.tokenizer.save_pretrained(run_dir / "model")  # what `fit` writes before training
        module.model.config.save_pretrained(run_dir / "model")
        save_adapter_config(module.model, run_dir / "model")
        done = export(run_dir, tmp_path / "merged", checkpoint="last", merge_adapter=True)
        assert done.merged and not done.adapter
        plain = AutoModelForSequenceClassification.from_pretrained(done.path).eval()
        fresh.data.trainer = None
        batch = next(iter(fresh.data.val_dataloader()[0]))
        with torch.no_grad():
            exported = plain(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], token_type_ids=batch["token_type_ids"]).logits
        assert torch.allclose(exported, before_merge, atol=1e-5)
        # Without --merge-adapter the export is the adapter alone, loadable with peft.
        adapter_only = export(run_dir, tmp_path / "adapter", checkpoint="last")
        assert adapter_only.adapter and (adapter_only.path / "adapter_config.json").is_file()
        assert not (adapter_only.path / "model.safetensors").exists()


def test_adapter_checkpoint_from_another_model_is_refused(tiny_nli, tmp_path, monkeypatch):
    monkeypatch.setenv("NEGTRAIN_CACHE_DIR", str(tmp_path / "cache"))
    built = build(load_recipe(str(write_recipe(tmp_path / "r.yaml", _recipe(tiny_nli, {"type": "lora", "r": 4})))).recipe)
    torch.save({"state_dict": {"model.bogus": torch.zeros(1)}, "negtrain_adapter_only": True, "negtrain_recipe": {}}, tmp_path / "x.ckpt")
    with pytest.raises(ConfigError, match="does not fit"):
        reload_weights(built.module, str(tmp_path / "x.ckpt"))


@pytest.mark.parametrize(
    "adapter,trainer,message",
    [
        ({"type": "qlora"}, {"strategy": "deepspeed_stage_3"}, "DeepSpeed|deepspeed"),
        ({"type": "none"}, {"strategy": "dpp"}, r"unknown trainer.strategy .* 'dpp' \(did you mean 'ddp'\?\)"),
        ({"type": "none"}, {"precision": "16-mixed"}, "16-mixed' needs a GPU"),
        ({"type": "qlora"}, {"strategy": "fsdp"}, "FSDP"),
    ],
)
def test_impossible_combinations_rejected_before_loading(tiny_nli, tmp_path, adapter, trainer, message):
    from negtrain.training.checks import check_run

    recipe = load_recipe(str(write_recipe(tmp_path / "r.yaml", _recipe(tmp_path / "no-such-model", adapter, **trainer)))).recipe
    with pytest.raises(ConfigError, match=message):
        check_run(recipe)
    with pytest.raises(ConfigError, match=message):
        build(recipe)  # before any model or data is loaded: the model path does not even exist


def test_quantization_under_zero3_rejected_even_with_deepspeed(monkeypatch, tmp_path):
    import importlib.util

    from negtrain.training import checks

    real = importlib.util.find_spec
    monkeypatch.setattr(checks.importlib.util, "find_spec", lambda name, *a: object() if name == "deepspeed" else real(name, *a))
    recipe = load_recipe(str(write_recipe(tmp_path / "r.yaml", _recipe("x", {"type": "qlora"}, strategy="deepspeed_stage_3")))).recipe
    with pytest.raises(ConfigError, match="ZeRO-3"):
        checks.check_run(recipe)


def test_bitsandbytes_without_support_is_reported(monkeypatch, tmp_path):
    from negtrain.training import checks

    monkeypatch.setattr(checks, "bnb_supports", lambda bits, device: "no 4-bit kernels for this device")
    recipe = load_recipe(str(write_recipe(tmp_path / "r.yaml", _recipe("x", {"type": "qlora", "bits": 4})))).recipe
    with pytest.raises(ConfigError, match=r"adapter.bits 4: bitsandbytes cannot run 4-bit layers on cpu .*no 4-bit kernels"):
        checks.check_run(recipe)


def test_nli_family_refuses_a_generative_benchmark(tiny_nli, tmp_path, monkeypatch):
    monkeypatch.setenv("NEGTRAIN_CACHE_DIR", str(tmp_path / "cache"))
    recipe = _recipe(tiny_nli, {"type": "none"})
    recipe["data"]["eval"] = [{"benchmark": "condaqa", "split": "dev"}]
    with pytest.raises(ConfigError, match="free-text answers"):
        build(load_recipe(str(write_recipe(tmp_path / "r.yaml", recipe))).recipe)
