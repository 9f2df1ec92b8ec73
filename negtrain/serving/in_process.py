"""The ``transformers`` backend: a causal language model loaded in this process, answering the
typed requests of :mod:`negtrain.engine.requests` as a server would, so a report card scored
through it takes the served path (:mod:`negtrain.evaluation.served`: the same request building, answer
reading, metric and records as ``--backend openai``).

- :class:`~negtrain.engine.requests.Generation`: greedy, batched by length, left-padded
  (:func:`negtrain.models.generation.respond`, the generation the ``hf`` backend's modules use);
  the prompt text is tokenized with the tokenizer's special tokens, as the ``causal_lm`` family
  tokenizes a prompt.
- :class:`~negtrain.engine.requests.Loglikelihood`: the continuation's summed log-probability,
  its ids split from the context's as lm-evaluation-harness splits them
  (:func:`negtrain.models.choice_inputs.split_pair`), scored by
  :func:`negtrain.models.continuation.continuation_logprobs`.

The model folder is checked and loaded as the families load one (tokenizer checks, attention
implementation); a tokenizer without a pad token pads with EOS. A chat request (``--chat``) is
rendered through the tokenizer's chat template, as the ``hf`` backend renders it. Nothing is
cached: answers are computed, so ``counts.cached`` stays 0 and ``counts.requests`` counts the
requests answered. Nothing here imports Lightning or the training floor.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from negtrain.core.errors import ConfigError
from negtrain.models.choice_inputs import split_pair
from negtrain.models.continuation import continuation_logprobs
from negtrain.models.folder_checks import check_model_folder, load_lm_tokenizer
from negtrain.models.context import model_context, rows_over
from negtrain.models.generation import Limits, respond_ids
from negtrain.models.sources import attention_kwargs, resolve_model_name
from negtrain.serving.backend import BackendContext
from negtrain.engine.requests import Answer, Counts, Generation, Loglikelihood, Request

#: Prompts per forward pass when the recipe does not say (``data.eval_batch_size``).
DEFAULT_BATCH = 8


class InProcessBackend:
    name = "transformers"

    def __init__(self, model: Any, tokenizer: Any, batch_size: int) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.context = model_context(model.config, tokenizer)

    def _check_fit(self, lengths: list[int], room: int | list[int], examples: list[str]) -> None:
        """A prompt (with its answer's room) longer than the model's context is an error naming the
        row, before anything is computed, as for the hf backend and a server: never run past the
        positions the model was trained on, and never cut (a served backend sends prompts whole)."""
        rows_over(lengths, room, self.context, "the transformers backend", examples)

    def prompt_lengths(self, texts: Sequence[str]) -> list[int]:
        """Each text's length in tokens as this backend gives it the model (special tokens added), so
        a card checks every prompt against :attr:`context` before the first request."""
        return [len(x) for x in self.tokenizer(list(texts))["input_ids"]] if texts else []

    def _prompt_ids(self, g: Generation) -> list[int]:
        """A prompt's ids: the text with the tokenizer's special tokens; a chat (``--chat``) through
        the tokenizer's chat template, whose text holds its own special tokens, as the hf backend
        renders and tokenizes it (:func:`negtrain.models.chat_template.chat_text`)."""
        if not g.chat:
            return self.tokenizer(g.prompt)["input_ids"]
        text = self.chat_text([{"role": role, "content": content} for role, content in g.messages])
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def chat_text(self, messages: list[dict[str, str]]) -> str:
        """The messages as the model is given them: through the tokenizer's chat template (also
        what the sample log shows)."""
        return self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)

    def offers_prompt_logprobs(self) -> tuple[bool, str]:
        return True, ""

    def stop(self) -> None:
        # Requests are answered in this process, one batch at a time: nothing is in flight to end.
        pass

    def answer(self, requests: Sequence[Request], counts: Counts, allow_missing: bool = False) -> list[Answer | None]:
        answers: list[Answer | None] = [None] * len(requests)
        generations = [(i, r) for i, r in enumerate(requests) if isinstance(r, Generation)]
        scored = [(i, r) for i, r in enumerate(requests) if isinstance(r, Loglikelihood)]
        if any(r.chat for _, r in generations) and not getattr(self.tokenizer, "chat_template", None):
            raise ConfigError("--chat: the tokenizer of the transformers backend's model has no chat template; drop --chat")
        # Generations with the same limits are one batched call, each answer put back in its place.
        by_limits: dict[tuple[int, tuple[str, ...]], list[tuple[int, Generation]]] = {}
        for i, g in generations:
            by_limits.setdefault((g.max_tokens, g.stop), []).append((i, g))
        ids_of = {key: [self._prompt_ids(g) for _, g in group] for key, group in by_limits.items()}
        # Every request checked before any is answered, so the error counts them all.
        groups = [(key, ids, g) for key, group in by_limits.items() for ids, (_, g) in zip(ids_of[key], group, strict=True)]
        self._check_fit([len(ids) for _, ids, _ in groups], [key[0] for key, _, _ in groups], [g.example for _, _, g in groups])
        for (max_tokens, stop), group in by_limits.items():
            ids = ids_of[(max_tokens, stop)]
            texts = respond_ids(self.model, self.tokenizer, ids, Limits(max_tokens, stop), self.batch_size)
            for (i, _), out in zip(group, texts, strict=True):
                answers[i] = Answer(text=out.text, tokens_out=out.tokens)
        pairs_of = [split_pair(self.tokenizer, r.context, r.continuation, causal=True) for _, r in scored]
        # Every request checked before any is scored, so the error counts them all.
        self._check_fit([len(c) + len(t) for c, t in pairs_of], 0, [r.example for _, r in scored])
        for start in range(0, len(scored), self.batch_size):
            part = scored[start:start + self.batch_size]
            pairs = pairs_of[start:start + self.batch_size]
            for (_, r), (_, continuation) in zip(part, pairs, strict=True):
                if not continuation:
                    raise ConfigError(f"{r.example}: the continuation {r.continuation!r} has no tokens of its own")
            # One choice per row: every request is scored as its own context and continuation.
            with torch.no_grad():
                scores = continuation_logprobs(self.model, [c for c, _ in pairs], [[t] for _, t in pairs],
                                               encoder_decoder=False, pad_id=self.tokenizer.pad_token_id)
            for row, (i, _) in enumerate(part):
                answers[i] = Answer(logprob=float(scores.logprob[row, 0]), n_tokens=int(scores.n_tokens[row, 0]))
        counts.requests += len(requests)
        counts.tokens_out += sum(a.tokens_out for a in answers if a is not None)
        return answers


def open_in_process(context: BackendContext) -> InProcessBackend:
    """The ``transformers`` backend's factory: ``context.model`` loaded here (a local folder, a
    ``pkg:`` folder or a Hub id), with the recipe's attention implementation, eval batch size and
    ``trainer.torch_threads`` (torch's intra-op threads, when set)."""
    from transformers import AutoModelForCausalLM

    recipe = context.recipe
    threads = recipe.trainer.torch_threads if recipe is not None else None
    if threads:  # --trainer.torch_threads, as the hf backend's Trainer honours it; before loading
        torch.set_num_threads(threads)
    path = resolve_model_name(context.model)
    check_model_folder(path, recipe.model.family if recipe is not None else "causal_lm", f"--model {context.model}")
    tokenizer = load_lm_tokenizer(path, context.model)
    kwargs = attention_kwargs(recipe.model) if recipe is not None else {}
    model = AutoModelForCausalLM.from_pretrained(path, **kwargs).eval()
    if torch.cuda.is_available():
        model = model.to("cuda")
    batch = recipe.data.eval_batch_size if recipe is not None else DEFAULT_BATCH
    return InProcessBackend(model, tokenizer, batch)
