"""model.init_from: an MLM run's output initialises an NLI run, encoder weights and [CUE] included."""

from __future__ import annotations


import pytest
import torch

from negtrain.config import validate_recipe
from negtrain.core.errors import ConfigError
from negtrain.recipes import LoadedRecipe

SENTENCES = [
    "The cat did not sit on the mat.",
    "Nobody knew the answer to the question.",
    "She never goes to the market on Sunday.",
    "There is nothing in the box.",
    "He left without saying goodbye.",
    "They don't like the cold weather.",
    "No one answered the phone.",
    "The plan failed to impress the board.",
] * 4


@pytest.fixture(scope="module")
def mlm_run(tmp_path_factory, minilm_path):
    """A two-step cue-masking run of a tiny BERT on a text corpus."""
    from mlm_helpers import save_tiny_mlm

    from negtrain.training.run import fit

    root = tmp_path_factory.mktemp("chain")
    model = save_tiny_mlm(root / "tiny", minilm_path)
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(f"{s[:-1]} number {i}." for i, s in enumerate(SENTENCES)) + "\n")
    recipe = validate_recipe(
        {
            "description": "tiny cue masking",
            "model": {"name": model, "family": "mlm", "max_length": 32, "learning_rate": 1e-2},
            "objective": {"cue_masking": {"corpus": {"text_files": [str(corpus)], "held_out": 8}}},
            "data": {"batch_size": 8, "eval_batch_size": 8},
            "trainer": {"max_epochs": 1, "limit_train_batches": 2, "enable_progress_bar": False},
        },
        "test",
    )
    run = fit(LoadedRecipe("tiny_cuemask", root / "tiny_cuemask.yaml", recipe), output_dir=root / "mlm-run")
    return model, run


def nli_recipe(model: str, init_from: str | None):
    return validate_recipe(
        {
            "description": "chained NLI",
            "model": {"name": model, "family": "nli", "init_from": init_from, "max_length": 64},
            "data": {"eval": [{"benchmark": "scone", "split": "test"}]},
        },
        "test",
    )


def test_mlm_run_writes_the_run_directory(mlm_run):
    import json

    _, run = mlm_run
    assert (run / "checkpoints" / "last.ckpt").is_file() and (run / "model" / "config.json").is_file()
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    held = [r for r in lines if r["benchmark"] == "cue_corpus"]
    assert held and held[0]["split"] == "heldout"
    assert held[0]["metrics"]["mlm_loss"] > 0 and 0 <= held[0]["metrics"]["cue_recovery_accuracy"] <= 1
    assert held[0]["metrics"]["n_cues"] >= 8  # every held-out sentence has at least one cue
    # The run records which way is better, so report can rank an eval set no registry knows.
    assert held[0]["lower_is_better"] == ["mlm_loss"]


def test_mlm_run_initialises_an_nli_model(mlm_run, data_dir):
    from transformers import AutoModelForMaskedLM

    from negtrain.models.init_from import checkpoint_weights, resolve_init
    from negtrain.training.build import build

    model, run = mlm_run
    built = build(nli_recipe(model, str(run)), stage="validate")
    tok, nli = built.tokenizer, built.module.model
    # the tokenizer and its added [CUE] token come along, and the embeddings have room for it
    assert "[CUE]" in tok.get_vocab()
    assert nli.get_input_embeddings().num_embeddings == len(tok)
    source = resolve_init(str(run))
    trained = checkpoint_weights(source.checkpoint)
    start = AutoModelForMaskedLM.from_pretrained(model).state_dict()
    own = nli.state_dict()
    encoder = [k for k in trained if k.startswith("bert.")]
    assert len(encoder) > 20
    for k in encoder:
        assert torch.equal(own[k], trained[k]), k
    # training moved the encoder, so the equality is not that of two copies of the start model
    assert any(not torch.equal(trained[k], start[k]) for k in encoder if k in start and trained[k].shape == start[k].shape)
    assert "classifier.weight" in own and "classifier.weight" not in trained


def test_init_from_a_checkpoint_file_and_errors(mlm_run, tmp_path):
    from negtrain.models.init_from import resolve_init

    _, run = mlm_run
    src = resolve_init(str(run / "checkpoints" / "last.ckpt"))
    assert src.model_dir == run / "model"
    assert resolve_init(str(run)).checkpoint.name.startswith("best-epoch")
    with pytest.raises(ConfigError, match="does not exist"):
        resolve_init(str(tmp_path / "nope"))
    with pytest.raises(ConfigError, match="no checkpoints"):
        resolve_init(str(tmp_path))


def test_a_damaged_init_from_checkpoint_is_one_clear_error(tmp_path):
    from negtrain.core.errors import NegtrainError
    from negtrain.models.init_from import checkpoint_weights

    good = tmp_path / "good.ckpt"
    torch.save({"state_dict": {"model.w": torch.ones(64, 64)}}, good)
    assert torch.equal(checkpoint_weights(good)["w"], torch.ones(64, 64))
    cut = tmp_path / "cut.ckpt"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(NegtrainError, match=r"model.init_from .*cut.ckpt: (truncated or damaged|not a PyTorch checkpoint)"):
        checkpoint_weights(cut)
