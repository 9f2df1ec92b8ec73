"""A prompt put through the tokenizer's chat template, and what a template that refuses it means.

A chat template is a Jinja program, and some refuse a conversation: Gemma's raise "System role not
supported", Mistral's "Conversation roles must alternate user/assistant/user/assistant/..."
(``raise_exception`` in the template, which is a ``jinja2.exceptions.TemplateError``, as is a
template that fails in any other way). That is a setting to change, not a crash: one error line
quotes the template's message and names the settings that shaped the conversation it was given.
It comes while the prompts are rendered, before any weights are loaded.
"""

from __future__ import annotations

from jinja2.exceptions import TemplateError  # jinja2: a dependency of torch, and what templates run on

from negtrain.config import LanguageModelConfig
from negtrain.core.errors import ConfigError
from negtrain.prompts.strategies import Prompt


def chat_text(tokenizer, prompt: Prompt, cfg: LanguageModelConfig) -> str:
    """``prompt`` as the model is given it through the tokenizer's chat template."""
    messages = prompt.messages(cfg.system, cfg.fewshot_as_multiturn)
    try:
        return tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    except TemplateError as exc:
        raise ConfigError(refusal(cfg, prompt, exc)) from exc


def refusal(cfg: LanguageModelConfig, prompt: Prompt, exc: Exception) -> str:
    """One line: the template's own message, the conversation it was given, and what to change."""
    message = " ".join(str(exc).split())[:300] or type(exc).__name__
    roles = "/".join(m["role"] for m in prompt.messages(cfg.system, cfg.fewshot_as_multiturn))
    changes = []
    if cfg.system:
        changes.append("drop --system (model.system): the template may take no system role")
    if cfg.fewshot_as_multiturn:
        changes.append("drop --fewshot-as-multiturn (model.fewshot_as_multiturn: false): the demonstrations then go in one user turn")
    elif prompt.shots:
        changes.append("add --fewshot-as-multiturn (model.fewshot_as_multiturn: true): the demonstrations then go in alternating user/assistant turns")
    without = "score without the chat template" + (" (drop --chat)" if cfg.chat else " (model.chat_template: false)")
    changes.append(f"or {without}" if changes else without)
    return (f"the chat template of '{cfg.name}' refused the prompt ({roles} messages): \"{message}\"; "
            + "; ".join(changes))
