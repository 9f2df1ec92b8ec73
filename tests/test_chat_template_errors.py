"""A chat template that refuses the prompt (issue 36, case 13) is one ``error:`` line quoting the
template's own message and saying what to change, before any weights are loaded: a Gemma-style
template refuses the system role under ``--chat --system``, a Mistral-style one refuses turns that
do not alternate, and a template that fails in any other way (jinja2 ``TemplateError``) is named
the same way."""

from __future__ import annotations

import shutil

import pytest

from negtrain.cli import main
from negtrain.config import CausalLmModelConfig
from negtrain.core.errors import ConfigError
from negtrain.models.lm_encoding import rendered_prompts
from negtrain.prompts.strategies import Prompt
from negtrain.models.tiny import llama_tokenizer
from tiny_models import corpus

# As Gemma's template begins: no system role.
GEMMA_STYLE = (
    "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
    "{% for m in messages %}<start_of_turn>{{ m['role'] }}\n{{ m['content'] }}<end_of_turn>\n{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)
# As Mistral's template checks its turns (and takes no system message among them).
MISTRAL_STYLE = (
    "{% for m in messages %}{% if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if m['role'] == 'user' %}[INST] {{ m['content'] }} [/INST]{% else %}{{ m['content'] }}</s>{% endif %}{% endfor %}"
)
BROKEN = "{% for m in messages %}{{ m['content'] | no_such_filter }}{% endfor %}"


@pytest.fixture(scope="module")
def tokenizer():
    return llama_tokenizer(corpus(None))


def _render(tokenizer, template, prompts, **settings):
    tokenizer.chat_template = template
    return rendered_prompts(tokenizer, prompts, CausalLmModelConfig(name="tiny", chat=True, **settings))


SHOTS = Prompt(query="Is it true?", shots=(("Is the sky blue?", "yes"), ("Is grass red?", "no")), separator="\n\n", before_query="\n\n")


def test_a_template_that_refuses_the_system_role_says_drop_system(tokenizer):
    texts, chatted = _render(tokenizer, GEMMA_STYLE, [Prompt(query="Is it true?")])
    assert chatted and texts == ["<start_of_turn>user\nIs it true?<end_of_turn>\n<start_of_turn>model\n"]
    with pytest.raises(ConfigError) as refused:
        _render(tokenizer, GEMMA_STYLE, [Prompt(query="Is it true?")], system="Answer briefly.")
    line = str(refused.value)
    assert "\n" not in line
    assert line.startswith("the chat template of 'tiny' refused the prompt (system/user messages): \"System role not supported\"")
    assert "drop --system (model.system)" in line and "or score without the chat template (drop --chat)" in line


def test_a_template_that_refuses_turns_names_fewshot_as_multiturn(tokenizer):
    # Multi-turn demonstrations after a system message do not alternate from the first turn.
    with pytest.raises(ConfigError) as refused:
        _render(tokenizer, MISTRAL_STYLE, [SHOTS], system="Answer briefly.", fewshot_as_multiturn=True)
    line = str(refused.value)
    assert '"Conversation roles must alternate user/assistant/user/assistant/..."' in line
    assert "(system/user/assistant/user/assistant/user messages)" in line
    assert "drop --system" in line and "drop --fewshot-as-multiturn (model.fewshot_as_multiturn: false)" in line
    # Either change alone is accepted by this template.
    assert _render(tokenizer, MISTRAL_STYLE, [SHOTS], fewshot_as_multiturn=True)[0][0].startswith("[INST] Is the sky blue? [/INST]yes</s>")
    assert _render(tokenizer, MISTRAL_STYLE, [SHOTS])[0][0].startswith("[INST] Is the sky blue?")


def test_any_template_error_is_named_and_suggests_the_turns(tokenizer):
    with pytest.raises(ConfigError) as refused:
        _render(tokenizer, BROKEN, [SHOTS])
    line = str(refused.value)
    assert "no_such_filter" in line and "(user messages)" in line
    assert "add --fewshot-as-multiturn (model.fewshot_as_multiturn: true)" in line
    # A recipe that asks for the template with model.chat_template (not --chat): that setting is
    # the one named. Without either, the template is not applied, so it cannot fail.
    tokenizer.chat_template = BROKEN
    with pytest.raises(ConfigError, match=r"score without the chat template \(model.chat_template: false\)$"):
        rendered_prompts(tokenizer, [Prompt(query="q")], CausalLmModelConfig(name="tiny", chat_template=True))
    assert rendered_prompts(tokenizer, [Prompt(query="q")], CausalLmModelConfig(name="tiny"))[1] is False


def test_evaluate_chat_system_on_a_gemma_style_template_is_one_error_line_before_loading(lm_env, tmp_path, capsys, monkeypatch):
    from transformers import AutoTokenizer

    import negtrain.serving.in_process_load as in_process_load

    model = tmp_path / "gemma_style"
    shutil.copytree(lm_env["llama"], model)
    tok = AutoTokenizer.from_pretrained(model)
    tok.chat_template = GEMMA_STYLE
    tok.save_pretrained(model)

    def no_loading(*args, **kwargs):
        raise AssertionError("the weights were loaded before the chat template refused the prompt")

    monkeypatch.setattr(in_process_load, "load_base", no_loading)
    out = tmp_path / "card"
    code = main(["evaluate", "--model", str(model), "--family", "causal_lm", "--benchmarks", "scone", "--strategy", "conditional_q",
                 "--chat", "--system", "Answer briefly.", "--out", str(out), "--trainer.limit_val_batches=1"])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2, err[-2000:]
    assert len(lines) == 1 and lines[0].startswith("error: ") and f"the chat template of '{model}' refused" in lines[0], err[-2000:]
    assert '"System role not supported"' in lines[0] and "drop --system (model.system)" in lines[0]
    assert "Traceback" not in err
    assert not (out / "metrics.jsonl").exists()


def test_a_template_that_renders_nothing_is_one_line_not_an_index_error(tokenizer, lm_env, tmp_path, capsys):
    """Issue 55: a template rendering ``''`` gave the model an empty prompt (``IndexError`` in
    generation, "a context has no tokens" in scoring)."""
    with pytest.raises(ConfigError, match=r"the chat template of 'tiny' renders the prompt \(user messages\) as an empty text"):
        _render(tokenizer, "{{ '' }}", [Prompt(query="Is it true?")])
    import json

    model = tmp_path / "model"
    shutil.copytree(lm_env["llama_chat"], model)
    config = json.loads((model / "tokenizer_config.json").read_text())
    config["chat_template"] = "{{ '' }}"
    (model / "tokenizer_config.json").write_text(json.dumps(config))
    for separate in model.glob("chat_template.*"):
        separate.unlink()
    assert main(["evaluate", "--model", str(model), "--benchmarks", "tinad", "--chat", "--out", str(tmp_path / "card")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert "renders the prompt (user messages) as an empty text" in err and "drop --chat" in err
