"""--chat means the same on every path, and a card says what shaped the prompt.

- NeQA is scored by the log-likelihood of its choices after its own question, which no chat
  template shapes: --chat with it is refused before anything runs, in the same words on the hf
  and transformers backends (before, hf scored it as written under a card naming the template).
- A chat template that adds its own system message when none is given (SmolLM2's "You are a
  helpful AI assistant named SmolLM...") is named and quoted on the card, and the prompts in the
  sample log hold it; a template that adds none gets no such line.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from negtrain.cli import main
from negtrain.models.chat_template import default_system_message
from tiny_models import cut_world

#: SmolLM2-135M-Instruct's chat template (its tokenizer_config.json), which inserts a system message.
SMOLLM_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
    "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SMOLLM_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def _error_line(capsys) -> str:
    lines = [line for line in capsys.readouterr().err.replace("\r", "\n").splitlines() if line.startswith("error:")]
    assert len(lines) == 1, lines
    return lines[0]


def test_chat_with_neqa_is_refused_in_the_same_words_on_hf_and_transformers(lm_env, tmp_path, capsys):
    model = str(lm_env["llama_chat"])
    said = {}
    for backend in ("hf", "transformers"):
        code = main(["evaluate", "--model", model, "--family", "causal_lm", "--backend", backend, "--benchmarks", "neqa",
                     "--chat", "--out", str(tmp_path / backend)])
        assert code == 2
        said[backend] = _error_line(capsys)
        assert not (tmp_path / backend / "metrics.jsonl").exists()
    assert said["hf"] == said["transformers"]
    assert "--chat: neqa is scored by the log-likelihood of its answers after its own context" in said["hf"]
    assert said["hf"].endswith("drop --chat, or score it in a card without --chat")


def test_the_default_system_message_of_a_template_is_found():
    from transformers import PreTrainedTokenizerFast
    from tokenizers import Tokenizer, models

    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"a": 0}, unk_token="a")))
    tok.chat_template = SMOLLM_TEMPLATE
    assert default_system_message(tok) == SMOLLM_SYSTEM
    tok.chat_template = "{% for m in messages %}<s>[INST] {{ m['content'] }} [/INST]{% endfor %}"
    assert default_system_message(tok) is None
    tok.chat_template = "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}{% endfor %}"
    assert default_system_message(tok) is None  # a system turn only where one is given
    tok.chat_template = "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}x"
    assert default_system_message(tok) is None  # refuses a system role: adds none of its own


@pytest.fixture()
def smollm_styled(lm_env, tmp_path, monkeypatch):
    """The tiny chat Llama with SmolLM2's template, on a few ScoNe rows."""
    import shutil

    from transformers import AutoTokenizer

    folder = tmp_path / "llama_smollm_template"
    shutil.copytree(lm_env["llama_chat"], folder)
    tok = AutoTokenizer.from_pretrained(folder)
    tok.chat_template = SMOLLM_TEMPLATE
    tok.save_pretrained(folder)
    data = cut_world(lm_env["data"], tmp_path / "data", 1, 2)
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(data))
    return folder


@pytest.mark.parametrize("backend", ["hf", "transformers"])
def test_a_template_that_adds_a_system_message_is_named_on_the_card(smollm_styled, tmp_path, backend):
    import json

    out = tmp_path / "card"
    assert main(["evaluate", "--model", str(smollm_styled), "--family", "causal_lm", "--backend", backend, "--benchmarks", "scone",
                 "--strategy", "conditional_q", "--chat", "--model.max_new_tokens=2", "--out", str(out)]) == 0
    card = (out / "card.md").read_text()
    assert "Chat template: the tokenizer's, applied to every prompt (--chat)." in card
    assert f"The template adds its own system message to every prompt (no --system was given): \"{SMOLLM_SYSTEM}\"." in card
    rows = [json.loads(line) for line in (out / "predictions" / "scone-test-validate.jsonl").read_text().splitlines()]
    # The sample log is the text the model was given, the template's system turn in it.
    assert all(r["prompt"].startswith(f"<|im_start|>system\n{SMOLLM_SYSTEM}<|im_end|>\n<|im_start|>user\n") for r in rows)
    # With a system message of its own (--system), the template adds none, and the card says nothing of it.
    assert main(["evaluate", "--model", str(smollm_styled), "--family", "causal_lm", "--backend", backend, "--benchmarks", "scone",
                 "--strategy", "conditional_q", "--chat", "--system", "Answer yes or no.", "--model.max_new_tokens=2",
                 "--out", str(tmp_path / "system")]) == 0
    assert "adds its own system message" not in (tmp_path / "system" / "card.md").read_text()


def test_a_served_protocol_cards_request_table_names_each_variant():
    from negtrain.evaluation.card_render import card_markdown
    from negtrain.io.records import EvalRecord

    def record(variant):
        return EvalRecord({"epoch": 0, "stage": "validate", "benchmark": "scone", "split": "test", "variant": variant,
                           "metrics": {"accuracy": 0.5, "n": 2},
                           "requests": {"sent": 2, "cached": 0, "tokens_in": 10, "tokens_out": 3}})

    text = card_markdown([record("zero-shot"), record("few-shot")], "m", "causal_lm", [])
    assert "| scone (zero-shot) | test | 2 | 10 | 3 |" in text and "| scone (few-shot) | test | 2 | 10 | 3 |" in text


def test_the_card_names_a_gguf_files_quantization():
    from negtrain.evaluation.card_render import card_markdown
    from negtrain.io.records import EvalRecord

    rec = EvalRecord({"epoch": 0, "stage": "validate", "benchmark": "neqa", "split": "test", "metrics": {"accuracy": 0.5, "n": 2}})
    text = card_markdown([rec], "m.gguf", "causal_lm", [], record={"model": {"name": "m.gguf", "gguf": {"quantization": "Q4_1", "dtype": "float32"}}})
    assert "Weights: a Q4_1 GGUF file, dequantized to float32 by transformers' GGUF loader" in text


def test_a_file_that_is_not_gguf_is_one_error(tmp_path, capsys):
    bad = tmp_path / "model.gguf"
    bad.write_bytes(b"not a gguf file at all")
    monkey = pytest.MonkeyPatch()
    monkey.setenv("NEGTRAIN_CACHE_DIR", str(tmp_path / "cache"))
    try:
        assert main(["evaluate", "--model", str(bad), "--family", "causal_lm", "--benchmarks", "scone", "--out", str(tmp_path / "o")]) == 2
    finally:
        monkey.undo()
    line = _error_line(capsys)
    assert f"model '{bad}': not a readable GGUF file" in line, line
    assert not (tmp_path / "cache" / "gguf").exists() or not any((tmp_path / "cache" / "gguf").iterdir())
    assert Path(bad).read_bytes() == b"not a gguf file at all"


def test_an_empty_system_message_is_sent_and_recorded(smollm_styled, tmp_path):
    """Issue 55: ``--system ''`` was taken for no --system, so SmolLM's template still put its own
    system message before every prompt while the card said none was given."""
    import json

    out = tmp_path / "card"
    assert main(["evaluate", "--model", str(smollm_styled), "--family", "causal_lm", "--benchmarks", "scone",
                 "--strategy", "conditional_q", "--chat", "--system", "", "--model.max_new_tokens=2", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in (out / "predictions" / "scone-test-validate.jsonl").read_text().splitlines()]
    assert rows and all(r["prompt"].startswith("<|im_start|>system\n<|im_end|>\n<|im_start|>user\n") for r in rows)
    assert not any(SMOLLM_SYSTEM in r["prompt"] for r in rows)
    card = (out / "card.md").read_text()
    assert "no --system was given" not in card and "adds its own system message" not in card
    assert "Every prompt begins with an empty system message (--system '')" in card
    assert "system: ''" in (out / "recipe.yaml").read_text()
