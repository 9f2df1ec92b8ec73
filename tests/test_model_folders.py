"""A broken model folder is one clear error naming the file, before anything is scored
(negtrain/models/folder_checks.py), and an unwritable --out fails before the model loads."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import minilm_dir
from negtrain import cli


def _copy(src: str | Path, dst: Path) -> Path:
    """A copy of a model folder; its (large) weights linked, not copied."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("model.safetensors"))
    (dst / "model.safetensors").symlink_to(Path(src) / "model.safetensors")
    return dst


def _edit_config(folder: Path, change) -> None:
    config = json.loads((folder / "config.json").read_text())
    change(config)
    (folder / "config.json").write_text(json.dumps(config))


def _card(capsys, model, tmp_path, *extra, family="nli") -> tuple[int, str]:
    capsys.readouterr()
    code = cli.main(["evaluate", "--model", str(model), "--family", family, "--benchmarks", "monli",
                     "--out", str(tmp_path / "card"), "--trainer.precision=32-true", *extra])
    return code, capsys.readouterr().err


def _broken_minilm(kind: str, root: Path) -> tuple[Path, str]:
    """A MiniLM folder broken one way, and what its error must say."""
    folder = _copy(minilm_dir(), root / kind)
    weights = folder / "model.safetensors"
    if kind == "config_missing":
        (folder / "config.json").unlink()
        return folder, "config.json is missing"
    if kind == "config_list":
        (folder / "config.json").write_text("[1, 2]")
        return folder, "config.json holds a JSON list, not an object"
    if kind == "config_garbage":
        (folder / "config.json").write_text("{garbage")
        return folder, "config.json is not readable JSON"
    if kind == "no_model_type":
        _edit_config(folder, lambda c: c.pop("model_type"))
        return folder, "config.json has no model_type"
    if kind == "unknown_type":
        _edit_config(folder, lambda c: c.update(model_type="bertt"))
        return folder, "model_type 'bertt' is not a model type the installed transformers knows (did you mean 'bert'?)"
    if kind == "zero_heads":
        _edit_config(folder, lambda c: c.update(num_attention_heads=0))
        return folder, "num_attention_heads is 0; it must be a positive integer"
    if kind == "small_vocabulary":
        _edit_config(folder, lambda c: c.update(vocab_size=100))
        return folder, "config.json does not describe these weights"
    if kind == "wrong_width":
        _edit_config(folder, lambda c: c.update(hidden_size=768))
        return folder, "config.json does not describe these weights"
    if kind == "no_tokenizer":
        for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
            (folder / name).unlink()
        return folder, "has no tokenizer files (looked for tokenizer.json, vocab.txt"
    if kind == "tokenizer_garbage":
        (folder / "tokenizer.json").write_text("garbage{")
        return folder, "does not load (JSONDecodeError"
    if kind == "tokenizer_empty":
        (folder / "tokenizer.json").write_text("{}")
        return folder, "the tokenizer in"
    if kind in ("weights_truncated", "weights_garbage"):
        data = weights.read_bytes()
        weights.unlink()
        weights.write_bytes(data[: len(data) // 3] if kind == "weights_truncated" else b"garbage" * 100)
        return folder, "model.safetensors is truncated or not a safetensors file"
    if kind == "weights_missing":
        weights.unlink()
        return folder, "holds no weights (looked for model.safetensors"
    raise AssertionError(kind)


KINDS = ["config_missing", "config_list", "config_garbage", "no_model_type", "unknown_type", "zero_heads",
         "small_vocabulary", "wrong_width", "no_tokenizer", "tokenizer_garbage", "tokenizer_empty",
         "weights_truncated", "weights_garbage", "weights_missing"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_broken_model_folder_is_one_error_line(kind, tmp_path, capsys, data_dir):
    folder, says = _broken_minilm(kind, tmp_path)
    code, err = _card(capsys, folder, tmp_path)
    assert code == 2, err[-3000:]
    lines = err.strip().splitlines()
    assert lines[-1].startswith("error: ") and says in lines[-1], lines[-1]
    assert "Traceback" not in err and not (tmp_path / "card" / "metrics.jsonl").exists()


def test_ignore_mismatched_sizes_never_reaches_the_encoder(tmp_path):
    """The check after loading too (a .bin checkpoint is not read before): a config of another width
    re-initialises the encoder, which is an error, not a score."""
    import torch
    from transformers import AutoModelForSequenceClassification

    folder = tmp_path / "bin"
    model = AutoModelForSequenceClassification.from_pretrained(minilm_dir(), num_labels=2)
    folder.mkdir()
    torch.save(model.state_dict(), folder / "pytorch_model.bin")  # the pre-safetensors format
    model.config.save_pretrained(folder)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt"):
        shutil.copy(Path(minilm_dir()) / name, folder)
    _edit_config(folder, lambda c: c.update(intermediate_size=768))
    from negtrain.core.errors import ConfigError
    from negtrain.models.folder_checks import check_model_folder

    check_model_folder(str(folder), "nli", "model")  # a .bin: shapes are not read before loading
    with pytest.raises(ConfigError, match="config.json does not describe its weights"):
        _build_nli(folder)


def _build_nli(folder: Path):
    from negtrain.config import validate_recipe
    from negtrain.training.build import build

    recipe = validate_recipe({"description": "d", "model": {"name": str(folder), "family": "nli"},
                              "data": {"eval": [{"benchmark": "monli", "split": "test"}]}, "logger": "none"}, "t")
    return build(recipe, "validate")


def test_a_run_directory_without_checkpoints_is_named(tmp_path, capsys, fake_run, data_dir):
    run = tmp_path / "run"
    shutil.copytree(fake_run, run, ignore=shutil.ignore_patterns("checkpoints"))
    code, err = _card(capsys, run, tmp_path)
    assert code == 2 and "holds a recipe.yaml but no checkpoints/ folder" in err.strip().splitlines()[-1]


# ---- the causal-LM family: a Llama without its tokenizer, or loaded as seq2seq ----------------


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from tiny_models import save_tiny_llama

    return save_tiny_llama(tmp_path_factory.mktemp("llama") / "llama", None)


def test_a_llama_without_its_tokenizer_or_as_seq2seq(llama, tmp_path, capsys, data_dir):
    bare = tmp_path / "bare"
    shutil.copytree(llama, bare, ignore=shutil.ignore_patterns("tokenizer*", "special_tokens_map.json"))
    code, err = _card(capsys, bare, tmp_path, family="causal_lm")
    assert code == 2 and "Traceback" not in err, err[-3000:]
    assert "has no tokenizer files (looked for tokenizer.json" in err.strip().splitlines()[-1], err[-500:]
    code, err = _card(capsys, llama, tmp_path / "second", family="seq2seq")
    assert code == 2, err[-3000:]
    assert "a 'llama' model, which family 'seq2seq' cannot load (AutoModelForSeq2SeqLM has no class for it); it fits" in err
    assert "causal_lm" in err.strip().splitlines()[-1]


# ---- adapters ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def adapters(tmp_path_factory):
    """LoRA folders for MiniLM: a good one, one trained on a wider BERT, one whose config targets
    other modules than its weights, one for Llama-style modules, one with a garbage config, and one
    without weights."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForSequenceClassification, BertConfig

    root = tmp_path_factory.mktemp("adapters")
    lora = dict(r=4, target_modules=["query", "value"], task_type="SEQ_CLS")
    good = get_peft_model(AutoModelForSequenceClassification.from_pretrained(minilm_dir(), num_labels=2), LoraConfig(**lora))
    # The good adapter decides every answer: its saved head (peft keeps a SEQ_CLS head with the
    # adapter) ignores the input and always picks head position 1. A card that loaded the folder
    # but not its weights would answer as the untrained head does, with both labels.
    import torch
    with torch.no_grad():
        for name, param in good.named_parameters():
            if "modules_to_save" in name and "classifier" in name:
                param.copy_(torch.tensor([-20.0, 20.0]) if name.endswith("bias") else torch.zeros_like(param))
    good.save_pretrained(root / "good")
    wide = BertConfig(hidden_size=128, num_attention_heads=4, num_hidden_layers=6, intermediate_size=256, num_labels=2)
    get_peft_model(AutoModelForSequenceClassification.from_config(wide), LoraConfig(**lora)).save_pretrained(root / "width")
    for name, targets in (("targets", ["key"]), ("architecture", ["q_proj", "v_proj"])):
        shutil.copytree(root / "good", root / name)
        config = json.loads((root / name / "adapter_config.json").read_text())
        config["target_modules"] = targets
        (root / name / "adapter_config.json").write_text(json.dumps(config))
    shutil.copytree(root / "good", root / "garbage_config")
    (root / "garbage_config" / "adapter_config.json").write_text("garbage{")
    shutil.copytree(root / "good", root / "no_weights")
    (root / "no_weights" / "adapter_model.safetensors").unlink()
    return root


@pytest.mark.parametrize("kind,says", [
    ("width", "does not fit the model (RuntimeError: Error(s) in loading state_dict"),
    ("targets", "adapter weights in"),
    ("architecture", "does not fit the model (NoMatchingPeftModuleError"),
    ("garbage_config", "adapter_config.json is not readable JSON"),
    ("no_weights", "holds no adapter weights (looked for adapter_model.safetensors, adapter_model.bin)"),
])
def test_an_adapter_that_does_not_fit_is_one_error_line(adapters, kind, says, tmp_path, capsys, data_dir):
    code, err = _card(capsys, minilm_dir(), tmp_path, "--adapter", str(adapters / kind))
    assert code == 2, err[-3000:]
    assert says in err.strip().splitlines()[-1] and "Traceback" not in err


def test_a_fitting_adapter_loads_and_its_weights_answer(adapters, tmp_path, capsys, data_dir):
    code, err = _card(capsys, minilm_dir(), tmp_path, "--adapter", str(adapters / "good"), "--trainer.limit_val_batches=1")
    assert code == 0, err[-3000:]
    rows = [json.loads(line) for line in (tmp_path / "card" / "predictions" / "monli-test-validate.jsonl").read_text().splitlines()]
    # MoNLI's first batch holds both gold labels; the adapter's head answers one of them always.
    assert len({r["label"] for r in rows}) == 2
    assert len({r["prediction"] for r in rows}) == 1, "the adapter's head weights were not applied"


# ---- --out that cannot be written fails before the model loads -------------------------------


@pytest.mark.parametrize("kind", ["onto_a_file", "under_a_file", "proc", "dev_null"])
def test_an_unwritable_out_fails_before_the_model_loads(kind, tmp_path, capsys, monkeypatch, fake_run, data_dir):
    import negtrain.evaluation.card_run as card_run

    # Where the card loads the model and writes its directory: never reached.
    monkeypatch.setattr(card_run, "_write_card_dir", lambda *a, **k: pytest.fail("the model was loaded"))
    afile = tmp_path / "afile"
    afile.write_text("x")
    out = {"onto_a_file": afile, "under_a_file": afile / "card", "proc": Path("/proc/x"), "dev_null": Path("/dev/null")}[kind]
    capsys.readouterr()
    code = cli.main(["evaluate", "--model", minilm_dir(), "--family", "nli", "--benchmarks", "monli", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: --out "), err[-2000:]
    if kind in ("onto_a_file", "dev_null"):
        return  # compare --out writes OUT.md and OUT.json beside OUT: for these, writable files
    import negtrain.evaluation.compare as compare

    monkeypatch.setattr(compare, "compare", lambda *a, **k: pytest.fail("compared before checking --out"))
    code = cli.main(["compare", str(fake_run), str(fake_run), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: --out "), err[-2000:]
