"""What the in-process backend (:mod:`negtrain.serving.in_process`) gives the model for each
request: its token ids, tokenized as the ``hf`` backend's families tokenize them, and held to the
model's context (:mod:`negtrain.models.context`).

- A text prompt is tokenized with the tokenizer's special tokens (a causal LM's BOS, T5's EOS), as
  :func:`negtrain.models.lm_encoding.encode_causal_eval` and ``encode_seq2seq_prompts`` do; chat
  messages are rendered through the tokenizer's chat template (``add_generation_prompt``, as
  :func:`negtrain.models.chat_template.chat_text`), whose text holds its own special tokens.
- A :class:`~negtrain.engine.requests.Loglikelihood`'s continuation: for a causal LM split from
  the context as lm-evaluation-harness splits it (:func:`negtrain.models.choice_inputs.split_pair`,
  after the rendered chat text for a chat); for a seq2seq model the decoder target, text with EOS
  (:func:`negtrain.models.lm_encoding.continuation_ids`), the context the encoder's input.
- A :class:`~negtrain.engine.requests.NextToken`'s context as a cloze prefix is tokenized
  (:func:`negtrain.models.lm_encoding.cloze_prefixes`).

A prompt whose ids and answer room (a generation's ``max_tokens``, a causal continuation's
length, one next token; none for a seq2seq encoder, whose answer is the decoder's) exceed the
context is an error naming its row (``evaluation.truncate: none``, :func:`rows_over`), or cut
from the left keeping BOS (``left``, :func:`cut_left`, as the ``hf`` backend cuts), its answer
then saying so with the text the model saw (decoded as
:func:`negtrain.models.lm_encoding.seen_prompts` decodes it). Every tokenization is memoized per
text, so a prompt asked again (the fit path asks every epoch) is not tokenized again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from negtrain.core.errors import ConfigError
from negtrain.engine.requests import Generation, Loglikelihood, NextToken
from negtrain.models.chat_template import empty_chat
from negtrain.models.choice_inputs import split_pair
from negtrain.models.context import Context, cut_left, rows_over
from negtrain.models.lm_encoding import continuation_ids


def causal_pair_texts(context: str, continuation: str) -> tuple[str, str]:
    """The context and the context + continuation a causal LM's split tokenizes, as
    :func:`negtrain.models.choice_inputs.split_pair` splits them: the context's trailing spaces go
    with the continuation (lm-evaluation-harness's rule)."""
    spaces = len(context) - len(context.rstrip())
    if spaces:
        context, continuation = context[:-spaces], context[-spaces:] + continuation
    return context, context + continuation


@dataclass(frozen=True)
class Fitted:
    """A prompt's ids as the model is given them; whether they were cut to fit, and then the text kept."""

    ids: list[int]
    cut: bool = False
    seen: str | None = None


class Inputs:
    """The token ids of requests for one model's tokenizer, memoized per text."""

    def __init__(self, tokenizer: Any, encoder_decoder: bool, context: Context, where: str) -> None:
        self.tokenizer = tokenizer
        self.encoder_decoder = encoder_decoder
        self.context = context
        self.where = where  # names the backend in an error ("the transformers backend")
        self._memo: dict[tuple[Any, ...], Any] = {}

    def _once(self, key: tuple[Any, ...], make):
        if key not in self._memo:
            self._memo[key] = make()
        return self._memo[key]

    def tokens(self, text: str, special: bool = True) -> list[int]:
        return self._once(("text", text, special), lambda: list(self.tokenizer(text, add_special_tokens=special)["input_ids"]))

    def tokens_of(self, texts: Sequence[str], special: bool = True) -> list[list[int]]:
        """:meth:`tokens` of many texts, the ones not seen before tokenized in one call."""
        new = [t for t in dict.fromkeys(texts) if ("text", t, special) not in self._memo]
        if new:
            for t, ids in zip(new, self.tokenizer(new, add_special_tokens=special)["input_ids"], strict=True):
                self._memo[("text", t, special)] = list(ids)
        return [self._memo[("text", t, special)] for t in texts]

    def chat_text(self, messages: Sequence[tuple[str, str]]) -> str:
        """The messages as the model is given them, through the tokenizer's chat template."""
        if not getattr(self.tokenizer, "chat_template", None):
            raise ConfigError(f"--chat: the tokenizer of {self.where}'s model has no chat template; drop --chat")
        as_dicts = [{"role": role, "content": content} for role, content in messages]
        text = self._once(("chat", tuple(messages)),
                          lambda: self.tokenizer.apply_chat_template(as_dicts, add_generation_prompt=True, tokenize=False))
        if not text:  # the model would be given nothing (and generation fails on an empty prompt)
            raise ConfigError(empty_chat(f"{self.where}'s model", "/".join(role for role, _ in messages)))
        return text

    def prompt(self, r: Generation | Loglikelihood) -> tuple[list[int], bool]:
        """A generation's prompt (or a log-likelihood's context) as ids, and whether it is a rendered chat."""
        if r.messages:
            return self.tokens(self.chat_text(r.messages), special=False), True
        return self.tokens(r.prompt if isinstance(r, Generation) else r.context), False

    def pair(self, r: Loglikelihood) -> tuple[list[int], list[int], bool]:
        """A log-likelihood request's context ids, continuation ids and whether the context is a rendered chat."""
        chatted = bool(r.messages)
        context = self.chat_text(r.messages) if chatted else r.context
        if self.encoder_decoder and r.eos:  # a whole answer: the decoder target, with EOS
            cont = self._once(("target", r.continuation), lambda: continuation_ids(self.tokenizer, r.continuation, causal=False))
            ctx, _ = self.prompt(r)
        elif self.encoder_decoder:  # a choice's tokens after the context, split as lm-evaluation-harness splits them
            ctx, cont = self._once(("pair", context, r.continuation, chatted),
                                   lambda: split_pair(self.tokenizer, context, r.continuation, causal=False))
        elif chatted:
            ctx, cont = self._once(("pair", context, r.continuation, chatted),
                                   lambda: split_pair(self.tokenizer, context, r.continuation, causal=True, add_special_tokens=False))
        else:  # split_pair's split, from memoized tokens (prefetch_pairs tokenizes a batch's texts in one call)
            head, whole = causal_pair_texts(context, r.continuation)
            ctx = self.tokens(head)
            cont = self.tokens(whole)[len(ctx):]
        if not cont:
            raise ConfigError(f"{r.example}: the continuation {r.continuation!r} has no tokens of its own")
        return list(ctx), list(cont), chatted

    def prefetch_pairs(self, requests: Sequence[Loglikelihood]) -> None:
        """A causal LM's plain log-likelihood requests: every context and context + continuation text
        tokenized in one call, so :meth:`pair` finds them memoized."""
        if self.encoder_decoder:
            return
        texts = [t for r in requests if not r.messages for t in causal_pair_texts(r.context, r.continuation)]
        self.tokens_of(texts)

    def next_token(self, r: NextToken) -> list[int]:
        if self.encoder_decoder:
            raise ConfigError(f"{r.example}: {self.where} answers a next-token (cloze) request only for a causal LM; "
                              "this model is an encoder-decoder")
        return self.tokens(r.context)

    def fit(self, rows: Sequence[list[int]], rooms: Sequence[int], examples: Sequence[str], chatted: Sequence[bool]) -> list[Fitted]:
        """``rows`` held to the context with their answer ``rooms`` (see the module): every row is
        checked before any is answered, so an error counts them all and names the first."""
        over = rows_over([len(r) for r in rows], list(rooms), self.context, self.where, list(examples))
        out = [Fitted(list(r)) for r in rows]
        bos = None if self.encoder_decoder else self.tokenizer.bos_token_id
        for i in over:
            keep = self.context.limit - rooms[i]
            if keep < 2:
                raise ConfigError(f"{self.where}: row {examples[i]}: its answer needs {rooms[i]} tokens of the model's context of "
                                  f"{self.context.limit} ({self.context.source}), which leaves no room for a prompt; "
                                  "lower the number of tokens generated (max_new_tokens)")
            ids = cut_left(rows[i], keep, bos)
            out[i] = Fitted(ids, True, self.tokenizer.decode(ids, skip_special_tokens=not chatted[i]))
        return out
