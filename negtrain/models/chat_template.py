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
        text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    except TemplateError as exc:
        raise ConfigError(refusal(cfg, prompt, exc)) from exc
    if not text:
        raise ConfigError(empty_chat(f"'{cfg.name}'", "/".join(m["role"] for m in messages)))
    return text


def empty_chat(model: str, roles: str) -> str:
    """One line for a chat template that renders a prompt as no text at all: the model would be
    given nothing, and a generation from nothing fails deep in the model."""
    return (f"the chat template of {model} renders the prompt ({roles} messages) as an empty text, so the model would "
            "be given nothing; fix the template (tokenizer_config.json's chat_template), or score without it (drop --chat)")


def refusal(cfg: LanguageModelConfig, prompt: Prompt, exc: Exception) -> str:
    """One line: the template's own message, the conversation it was given, and what to change."""
    message = " ".join(str(exc).split())[:300] or type(exc).__name__
    roles = "/".join(m["role"] for m in prompt.messages(cfg.system, cfg.fewshot_as_multiturn))
    changes = []
    if cfg.system is not None:
        changes.append("drop --system (model.system): the template may take no system role")
    if cfg.fewshot_as_multiturn:
        changes.append("drop --fewshot-as-multiturn (model.fewshot_as_multiturn: false): the demonstrations then go in one user turn")
    elif prompt.shots:
        changes.append("add --fewshot-as-multiturn (model.fewshot_as_multiturn: true): the demonstrations then go in alternating user/assistant turns")
    without = "score without the chat template" + (" (drop --chat)" if cfg.chat else " (model.chat_template: false)")
    changes.append(f"or {without}" if changes else without)
    return (f"the chat template of '{cfg.name}' refused the prompt ({roles} messages): \"{message}\"; "
            + "; ".join(changes))


#: Stand-ins a template is rendered with to find the text it adds on its own.
_USER, _SYSTEM = "negtrain-user-text-7f3a", "negtrain-system-text-7f3a"


def default_system_message(tokenizer) -> str | None:
    """The system message the tokenizer's chat template inserts when the conversation has none
    (SmolLM2's "You are a helpful AI assistant named SmolLM, trained by Hugging Face"), or None.

    Found by rendering a user turn alone and then after a system message: where the template puts
    its own text in the place the given system message takes, that text is its default. A template
    that refuses a system role, or adds nothing there, gives None."""
    template = getattr(tokenizer, "chat_template", None)
    if not template:
        return None
    user = [{"role": "user", "content": _USER}]
    try:
        alone = tokenizer.apply_chat_template(user, add_generation_prompt=True, tokenize=False)
        given = tokenizer.apply_chat_template([{"role": "system", "content": _SYSTEM}, *user],
                                              add_generation_prompt=True, tokenize=False)
    except Exception:  # noqa: BLE001 - a template that refuses a system role adds none of its own
        return None
    start = 0
    while start < min(len(alone), len(given)) and alone[start] == given[start]:
        start += 1
    end = 0
    while end < min(len(alone), len(given)) - start and alone[-1 - end] == given[-1 - end]:
        end += 1
    own, theirs = alone[start:len(alone) - end], given[start:len(given) - end]
    if _SYSTEM not in theirs or not own.strip():
        return None
    # The given message's own surroundings (the same markup around both) are cut from the default.
    before, _, after = theirs.partition(_SYSTEM)
    if own.startswith(before) and own.endswith(after) and len(own) >= len(before) + len(after):
        own = own[len(before):len(own) - len(after)]
    return own.strip() or None


def system_note(tokenizer, cfg: LanguageModelConfig) -> str | None:
    """The card's words for a system message the template adds, where one shaped the prompts (a
    chat prompt with no --system), or for an empty --system that keeps it out: None otherwise."""
    if not cfg.chat:
        return None
    if cfg.system == "":
        return "Every prompt begins with an empty system message (--system ''), so the template adds no system message of its own."
    if cfg.system:
        return None
    own = default_system_message(tokenizer)
    if own is None:
        return None
    return f"The template adds its own system message to every prompt (no --system was given): \"{own}\"."
