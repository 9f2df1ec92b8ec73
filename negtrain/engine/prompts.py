"""An evaluation's prompts, built and checked for every entry before the first request is sent,
and whether they go through a chat template: the one place that does so, for a report card, a
paper protocol and ``fit``'s per-epoch evaluation, on every backend, with and without ``--chat``.

A backend that knows its model's context declares it (``context``, a
:class:`negtrain.models.context.Context`) and counts a text's tokens as the model is given it
(``prompt_lengths``; a chat's text as its template renders it, ``chat_text``), as the model in this
process does. Then, before any weights load or anything is answered:

- an entry that may drop shots to fit (``min_shots``, CondaQA's rule, Appendix C.2) gets, per row,
  the most shots that fit (:func:`negtrain.models.context.fit_shots`), measured on the text the
  model is given (the chat template's rendering under ``--chat``);
- every prompt of every entry (with its answer's room: the generation's token limit, or the
  longest continuation scored) is checked against the context, and the first that does not fit is
  an error naming its entry and its row, so a card of twenty variants fails in seconds, not in its
  fourth split.

A backend that cannot count tokens (a server: its context decides) sends every prompt whole with
all its shots; a ``min_shots`` entry's record then says the rule was not applied.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from jinja2.exceptions import TemplateError  # jinja2: a dependency of torch, and what chat templates run on

from negtrain.benchmarks.base import ChoiceQuestions, Example, choice_contexts
from negtrain.benchmarks.registry import get_benchmark
from negtrain.core.errors import ConfigError
from negtrain.models.chat_template import refusal
from negtrain.config import eval_set_name
from negtrain.models.context import Context, fit_shots, rows_over
from negtrain.models.prompting import AnswerMode, PromptSettings, causal_answering, prompts_with_shots, verbalizer_text
from negtrain.prompts.strategies import Prompt

#: A min_shots entry's note where the backend could not count tokens.
NOT_FITTED = ("min_shots not applied: the backend cannot count a prompt's tokens, so every prompt was sent with all "
              "{shots} shots and the server's context decided")


@dataclass
class Prepared:
    """One entry's prompts as they will be sent (None for a multiple-choice benchmark scored on its
    own contexts), the shots each row shows, and what the record must say about them."""

    prompts: list[Prompt] | None
    shot_ids: list[list[str]] | None
    note: str | None = None
    #: The rows over the context that ``truncate: left`` will cut (None: not measured here, a
    #: server's prompts).
    cut: list[int] | None = None


def chats(cfg, backend, mode: AnswerMode) -> bool:
    """Whether prompts answered in ``mode`` go to ``backend`` as chat messages: with ``--chat``
    (``model.chat``); a causal LM's ``model.chat_template`` too, where the backend renders the
    template itself (the model in this process) and its tokenizer has one. A benchmark scored on
    its own context (multiple choice without a strategy, cloze) and a strategy's choices are never
    chats: their context is plain text (card_plan refuses ``--chat`` for them)."""
    if mode not in (AnswerMode.GENERATION, AnswerMode.COMPLETIONS, AnswerMode.VERBALIZERS):
        return False
    if cfg.chat:
        return True
    return bool(getattr(backend.tokenizer, "chat_template", None)) and cfg.wraps_in_chat_template()


def entry_name(entry) -> str:
    return eval_set_name(entry.benchmark, entry.split, getattr(entry, "variant", None))


def chat_messages(cfg, prompt: Prompt) -> list[dict[str, str]]:
    """A prompt as the chat messages sent (``model.system``, ``model.fewshot_as_multiturn``)."""
    return prompt.messages(cfg.system, cfg.fewshot_as_multiturn)


def rendered_chat(backend, cfg, prompt: Prompt) -> str | None:
    """``prompt``'s chat as the backend's template renders it (None: a server renders its own); a
    template that refuses the conversation (Gemma's "System role not supported") is one error line
    saying what to change, before any request is answered or weights loaded."""
    try:
        return backend.chat_text(chat_messages(cfg, prompt))
    except TemplateError as exc:
        raise ConfigError(refusal(cfg, prompt, exc)) from exc


def prepare_entry(recipe, entry, backend, examples: Sequence[Example] | None = None) -> Prepared:
    """``entry``'s prompts (of ``examples``, its split's rows by default), fitted (``min_shots``) and
    checked against the backend's context when it declares one (see the module's docstring)."""
    bench = get_benchmark(entry.benchmark)
    cfg = recipe.model
    examples = list(bench.load(entry.split)) if examples is None else list(examples)
    settings = PromptSettings.of(entry)
    mode = settings.answer_mode(bench)
    context: Context | None = backend.context
    name = entry_name(entry)
    row_ids = [e.id for e in examples]
    # A seq2seq model reads the prompt in its encoder and answers in its decoder: the answer takes
    # none of the prompt's room.
    encoder_decoder = backend.encoder_decoder
    if mode is AnswerMode.CLOZE:  # the probes' own sentences, checked by the backend that answers them
        return Prepared(None, None)
    if mode is AnswerMode.CHOICES and not settings.strategy:
        if context is not None:
            assert isinstance(bench, ChoiceQuestions)
            if encoder_decoder:
                over = rows_over(backend.prompt_lengths([bench.context(e) for e in examples]), 0, context, name, row_ids)
            else:
                texts = [[c + bench.target_delimiter + o for c, o in zip(choice_contexts(bench, e), bench.choices(e), strict=True)]
                         for e in examples]
                over = rows_over(_longest(backend.prompt_lengths, texts), 0, context, name, row_ids)
            return Prepared(None, None, cut=over)
        return Prepared(None, None)
    prompts, shot_ids = prompts_with_shots(bench, entry.split, examples, settings, cfg, recipe.seed)
    chat = chats(cfg, backend, mode)
    # A chat's text as the model is given it, rendered by the backend's template (a template that
    # refuses the conversation, or a tokenizer without one, is an error here, before anything loads).
    first_chat = rendered_chat(backend, cfg, prompts[0]) if chat and prompts else None
    if context is None or (chat and first_chat is None):  # a server: its context decides
        note = NOT_FITTED.format(shots=settings.shots) if settings.shots_to_fit else None
        return Prepared(prompts, shot_ids, note)

    def given(part: Sequence[Prompt]) -> list[str]:
        """The prompts' texts as the model is given them."""
        return [str(rendered_chat(backend, cfg, p)) for p in part] if chat else [p.text() for p in part]

    def measure(texts: Sequence[str]) -> list[int]:
        return backend.prompt_lengths(texts, chat=chat)

    if mode.generates:
        room = 0 if encoder_decoder else (settings.generating_answer(bench) or causal_answering(cfg)).max_new_tokens

        def lengths(part: Sequence[Prompt]) -> list[int]:
            return measure(given(part))
    elif mode is AnswerMode.CHOICES:  # a strategy's prompt, then each choice (never a chat: chats())
        assert isinstance(bench, ChoiceQuestions)
        room, options = 0, {e.id: list(bench.choices(e)) for e in examples}
        by_prompt = {id(p): e for p, e in zip(prompts, examples, strict=True)}

        def lengths(part: Sequence[Prompt]) -> list[int]:
            if encoder_decoder:
                return measure(given(part))
            return _longest(measure, [[p.text() + bench.target_delimiter + o for o in options[by_prompt[id(p)].id]] for p in part])
    else:  # verbalizers, each after a space as the served scoring sends them
        verbalizer = settings.verbalizer or bench.verbalizer() or {}
        conts = [" " + verbalizer_text(verbalizer[label], cfg) for label in bench.labels]
        room = 0

        def lengths(part: Sequence[Prompt]) -> list[int]:
            if encoder_decoder:
                return measure(given(part))
            return _longest(measure, [[text + c for c in conts] for text in given(part)])
    if settings.shots_to_fit and shot_ids is not None:
        assert settings.min_shots is not None
        prompts, shot_ids = fit_shots(prompts, shot_ids, lengths, room, context, settings.min_shots, name, row_ids)
    over = rows_over(lengths(prompts), room, context, name, row_ids)
    return Prepared(prompts, shot_ids, cut=over)


def _longest(measure, texts: list[list[str]]) -> list[int]:
    """Per row, the longest of its texts in tokens (one call to ``measure`` for all of them)."""
    flat = measure([t for row in texts for t in row])
    out, at = [], 0
    for row in texts:
        out.append(max(flat[at:at + len(row)]))
        at += len(row)
    return out


def prepare_all(recipe, entries, backend) -> dict[str, Prepared]:
    """Every entry's :class:`Prepared`, by name: all built and checked before any is scored."""
    return {entry_name(e): prepare_entry(recipe, e, backend) for e in entries}
