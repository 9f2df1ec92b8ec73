"""The in-process backend (the ``hf`` and ``transformers`` rows): a language model loaded in this
process, causal (Llama-style) or seq2seq (T5), answering the typed requests of
:mod:`negtrain.engine.requests` as a server would, so a report card scored through it takes the
one engine (:mod:`negtrain.engine.entry_requests`, :mod:`negtrain.evaluation.served`), and a
language-model family's module answers its per-epoch eval sets through it (:func:`module_backend`). What each request is given the model as, and how
a prompt is held to the model's context, is :mod:`negtrain.serving.in_process_inputs`; how the
model is loaded, :mod:`negtrain.serving.in_process_load`.

- :class:`~negtrain.engine.requests.Generation`: greedy, batched by length
  (:func:`negtrain.models.generation.respond_ids`), a
  seq2seq model decoding from the prompt as its encoder's input.
- :class:`~negtrain.engine.requests.Loglikelihood`: the continuation's summed log-probability.
  Requests with the same context are one row: the context is run once for all its continuations
  (:func:`negtrain.models.continuation.continuation_logprobs`). Under autocast, a row whose best
  two continuations are within ``fp32_recheck_margin`` (summed or per token) is scored again in
  fp32, so a mixed-precision evaluation reports fp32's choice (``model.fp32_recheck_margin``).
- :class:`~negtrain.engine.requests.NextToken`: the log-probabilities of the whole vocabulary as
  the next token after the context, in fp32 (autocast off), read at the context's last real
  position. Never cached.

Each kind is sorted by length (longest first) and batched ``batch_size`` at a time; answers come
back in the requests' order, each batch's handed to ``on_answer`` as it is computed (the response
cache round the backend, :mod:`negtrain.serving.response_caching`, keeps them then, keyed by
:meth:`InProcessBackend.cache_identity`). The factory defers loading the weights to the first answer, so a card
checks every prompt against the context first. Nothing here
imports Lightning or the training floor.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from negtrain.config.backends import DEFAULT_BACKEND
from negtrain.core.errors import ConfigError
from negtrain.engine.requests import Answer, Counts, Generation, Loglikelihood, NextToken, Request
from negtrain.models.context import model_context, rows_over
from negtrain.models.continuation import ContinuationScores, continuation_logprobs
from negtrain.models.folder_checks import check_model_folder, load_lm_tokenizer
from negtrain.models.generation import Limits, respond_ids
from negtrain.models.sources import resolve_model_name
from negtrain.serving.backend import BackendContext
from negtrain.serving.in_process_inputs import Fitted, Inputs
from negtrain.serving.in_process_load import (
    evaluation_precision_name,
    in_process_cache_settings,
    load_checkpoint_weights,
    load_model,
    precision_dtypes,
)

#: Prompts per forward pass when the recipe does not say (``data.eval_batch_size``).
DEFAULT_BATCH = 8

#: ``evaluation.truncate`` as the constructor takes it: "error" is the recipe's "none".
TRUNCATE = {"none": "none", "error": "none", "left": "left"}


def near_ties(scores: ContinuationScores, margin: float) -> list[int]:
    """Rows whose best two continuations are within ``margin``, summed or per token."""
    if scores.logprob.shape[-1] < 2:
        return []
    close = torch.zeros(scores.logprob.shape[0], dtype=torch.bool)
    for values in (scores.logprob, scores.normalized("mean")):
        top2 = values.topk(2, dim=-1).values
        close |= (top2[:, 0] - top2[:, 1]) < margin
    return close.nonzero().flatten().tolist()


class _Group:
    """Log-likelihood requests with the same context: one row, its continuations the choices."""

    def __init__(self, context: list[int], chatted: bool, example: str) -> None:
        self.context, self.chatted, self.example = context, chatted, example
        self.members: list[tuple[int, list[int]]] = []  # (request index, continuation ids)
        self.fitted = Fitted(context)


class InProcessBackend:
    """A causal or seq2seq model in this process answering :mod:`negtrain.engine.requests` in
    batches (see the module's docstring): the ``hf`` and ``transformers`` rows' backend, made by
    :func:`open_in_process` for a card, and by :func:`module_backend` round a family's live model."""

    name = DEFAULT_BACKEND
    #: The model is in this process (the backend's declared abilities, :class:`negtrain.serving.backend.Backend`).
    loads_here = True

    def __init__(self, model: Any, tokenizer: Any, batch_size: int, *, encoder_decoder: bool = False, truncate: str = "none",
                 autocast_dtype: torch.dtype | None = None, fp32_recheck_margin: float | None = None,
                 cache_settings: dict[str, Any] | None = None, name: str | None = None,
                 model_config: Any = None, loader: Callable[[], tuple[Any, dict[str, Any]]] | None = None) -> None:
        if truncate not in TRUNCATE:
            raise ConfigError(f"truncate {truncate!r}: one of {', '.join(TRUNCATE)}")
        self._model = model
        #: Loads the weights (and says what keys the cache) at the first answer, so every prompt of
        #: a card is built and checked against the context before a large model loads.
        self._loader = loader
        self.model_config = model_config if model_config is not None else model.config
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.encoder_decoder = encoder_decoder
        self.autocast_dtype = autocast_dtype
        self.fp32_recheck_margin = fp32_recheck_margin
        #: What decides an answer besides the request (the weights by content, tokenizer, chat
        #: template, dtype, precision), set where a card's cache keeps its answers; none for a
        #: live model, whose weights change between calls (its answers are never cached).
        self.cache_settings = dict(cache_settings or {})
        if name is not None:
            self.name = name
        # model_config: the model's config where the weights are not loaded yet (a family builds
        # and checks its eval sets' requests first).
        self.context = model_context(self.model_config, tokenizer, TRUNCATE[truncate])
        #: What the records say the model ran in (provenance): the evaluation's precision, and the
        #: dtype it computed in, set by the factory.
        self.precision = "32-true"
        self.dtype_words: str | None = None
        self.inputs = Inputs(tokenizer, encoder_decoder, self.context, f"the {self.name} backend")

    @property
    def model(self) -> Any:
        """The model, loaded here at its first use when the factory deferred it."""
        if self._model is None and self._loader is not None:
            loader, self._loader = self._loader, None
            self._model, settings = loader()
            self.cache_settings.update(settings)
        return self._model

    @model.setter
    def model(self, model: Any) -> None:
        self._model = model

    @classmethod
    def of_model(cls, model: Any, tokenizer: Any, *, encoder_decoder: bool, batch_size: int, truncate: str = "none",
                 autocast_dtype: torch.dtype | None = None, fp32_recheck_margin: float | None = None,
                 name: str = DEFAULT_BACKEND) -> "InProcessBackend":
        """A backend over a model already in memory (the fit path's live model): no cache, since
        its weights change between calls."""
        return cls(model, tokenizer, batch_size, encoder_decoder=encoder_decoder, truncate=truncate, autocast_dtype=autocast_dtype,
                   fp32_recheck_margin=fp32_recheck_margin, name=name)

    @property
    def where(self) -> str:
        return self.inputs.where

    def load(self) -> None:
        """The weights, loaded now where the factory deferred them (a card has checked every prompt)."""
        self.model  # noqa: B018  # the property loads them

    def prompt_lengths(self, texts: Sequence[str], chat: bool = False) -> list[int]:
        """Each text's length in tokens as this backend gives it the model (special tokens added; a
        chat's rendering, ``chat``, holds its own), so a card checks every prompt against
        :attr:`context` before the first request."""
        return [len(ids) for ids in self.inputs.tokens_of(texts, special=not chat)]

    def _prompt_ids(self, g: Generation) -> list[int]:
        return self.inputs.prompt(g)[0]

    def chat_text(self, messages: list[dict[str, str]]) -> str:
        """The messages as the model is given them: through the tokenizer's chat template (also
        what the sample log shows)."""
        return self.inputs.chat_text([(m["role"], m["content"]) for m in messages])

    def cache_identity(self, request: Request) -> dict[str, Any] | None:
        """What keys ``request``'s answer besides itself: the model's settings (loaded now, when
        deferred: its weights key the cache) and ``truncate``; None for a next token's
        distribution (a tensor, never cached) and for a backend with no settings (a live model)."""
        if isinstance(request, NextToken):
            return None
        self.load()
        if not self.cache_settings:
            return None
        return {**self.cache_settings, "truncate": self.context.truncate}

    def check_run(self, requests: Sequence[Request]) -> None:
        pass  # the model is here: there is nothing to check of a server

    def offers_prompt_logprobs(self) -> tuple[bool, str]:
        return True, ""

    def stop(self) -> None:
        # Requests are answered in this process, one batch at a time: nothing is in flight to end.
        pass

    # ---- answering -----------------------------------------------------------------------------

    def _device_type(self) -> str:
        parameter = next(self.model.parameters(), None)
        return parameter.device.type if parameter is not None else "cpu"

    def _autocast(self, enabled: bool = True):
        """The context a generation or log-likelihood is computed in: autocast to the backend's
        dtype when it has one, else (and for an fp32 recheck) autocast off."""
        if self.autocast_dtype is None or not enabled:
            return torch.autocast(device_type=self._device_type(), enabled=False)
        return torch.autocast(device_type=self._device_type(), dtype=self.autocast_dtype)

    def answer(self, requests: Sequence[Request], counts: Counts, allow_missing: bool = False,
               on_answer: Callable[[int, Answer], None] | None = None) -> list[Answer | None]:
        answers: list[Answer | None] = [None] * len(requests)
        generations = [(i, r) for i, r in enumerate(requests) if isinstance(r, Generation)]
        scored = [(i, r) for i, r in enumerate(requests) if isinstance(r, Loglikelihood)]
        next_tokens = [(i, r) for i, r in enumerate(requests) if isinstance(r, NextToken)]
        # Every request is tokenized and held to the context before any is answered, so an error
        # counts them all and nothing was computed; plain texts in one call of the tokenizer.
        self.inputs.tokens_of([r.prompt for _, r in generations if not r.messages] + [r.context for _, r in next_tokens])
        self.inputs.prefetch_pairs([r for _, r in scored])
        fitted_generations = self._fit_generations(generations)
        groups = self._fit_groups(scored)
        fitted_next = self._fit_next_tokens(next_tokens)
        model = self.model  # loaded now, when deferred
        computed = 0

        def keep(done: list[tuple[int, Answer]]) -> None:
            """A batch's answers, handed on as soon as it is computed: a card killed later loses none of them."""
            nonlocal computed
            for i, a in done:
                answers[i] = a
                if on_answer is not None:
                    on_answer(i, a)
            computed += len(done)

        training = getattr(model, "training", False)
        model.eval()
        try:
            with torch.no_grad():
                self._generate([(i, g, f) for (i, g), f in zip(generations, fitted_generations, strict=True)], keep)
                self._score(groups, keep)
                self._next(list(zip([i for i, _ in next_tokens], fitted_next, strict=True)), keep)
        finally:
            if training:
                model.train()
        counts.requests += computed
        counts.tokens_in += sum(a.tokens_in for a in answers if a is not None)
        counts.tokens_out += sum(a.tokens_out for a in answers if a is not None)
        return answers

    def _fit_generations(self, generations: list[tuple[int, Generation]]) -> list[Fitted]:
        prompts = [self.inputs.prompt(g) for _, g in generations]
        rooms = [0 if self.encoder_decoder else g.max_tokens for _, g in generations]  # a seq2seq answer is the decoder's
        return self.inputs.fit([p for p, _ in prompts], rooms, [g.example for _, g in generations], [c for _, c in prompts])

    def _fit_groups(self, scored: list[tuple[int, Loglikelihood]]) -> list[_Group]:
        pairs = [self.inputs.pair(r) for _, r in scored]
        # Each request counted and named on its own in an error (a group is cut once, below).
        rows_over([len(ctx) for ctx, _, _ in pairs], [0 if self.encoder_decoder else len(cont) for _, cont, _ in pairs],
                  self.context, self.inputs.where, [r.example for _, r in scored])
        groups: dict[tuple[tuple[int, ...], bool], _Group] = {}
        for (i, r), (ctx, cont, chatted) in zip(scored, pairs, strict=True):
            group = groups.setdefault((tuple(ctx), chatted), _Group(ctx, chatted, r.example))
            group.members.append((i, cont))
        out = list(groups.values())
        # A seq2seq continuation is the decoder's; a causal one needs its longest continuation's room.
        rooms = [0 if self.encoder_decoder else max(len(c) for _, c in g.members) for g in out]
        for g, fitted in zip(out, self.inputs.fit([g.context for g in out], rooms, [g.example for g in out], [g.chatted for g in out]),
                             strict=True):
            g.fitted = fitted
        return out

    def _fit_next_tokens(self, next_tokens: list[tuple[int, NextToken]]) -> list[Fitted]:
        rows = [self.inputs.next_token(r) for _, r in next_tokens]
        return self.inputs.fit(rows, [1] * len(rows), [r.example for _, r in next_tokens], [False] * len(rows))

    def _generate(self, todo: list[tuple[int, Generation, Fitted]], keep) -> None:
        # Generations with the same limits, longest prompts first, a batch at a time.
        by_limits: dict[tuple[int, tuple[str, ...]], list[tuple[int, Generation, Fitted]]] = {}
        for item in todo:
            by_limits.setdefault((item[1].max_tokens, item[1].stop), []).append(item)
        for (max_tokens, stop), group in by_limits.items():
            group.sort(key=lambda item: -len(item[2].ids))
            for start in range(0, len(group), self.batch_size):
                part = group[start:start + self.batch_size]
                with self._autocast():
                    done = respond_ids(self.model, self.tokenizer, [f.ids for _, _, f in part], Limits(max_tokens, stop), self.batch_size,
                                       self.encoder_decoder)
                keep([(i, Answer(text=g.text, tokens_in=len(f.ids), tokens_out=g.tokens, cut=f.cut, seen=f.seen))
                      for (i, _, f), g in zip(part, done, strict=True)])

    def _continuations(self, groups: list[_Group], fp32: bool = False) -> ContinuationScores:
        with self._autocast(enabled=not fp32):
            return continuation_logprobs(self.model, [g.fitted.ids for g in groups], [[c for _, c in g.members] for g in groups],
                                         encoder_decoder=self.encoder_decoder, pad_id=self.tokenizer.pad_token_id)

    def _score(self, groups: list[_Group], keep) -> None:
        # The rows of one call have the same number of continuations; longest first within each number.
        by_k: dict[int, list[_Group]] = {}
        for g in groups:
            by_k.setdefault(len(g.members), []).append(g)
        for same in by_k.values():
            same.sort(key=lambda g: -(len(g.fitted.ids) + max(len(c) for _, c in g.members)))
            for start in range(0, len(same), self.batch_size):
                keep(self._score_batch(same[start:start + self.batch_size]))

    def _score_batch(self, groups: list[_Group]) -> list[tuple[int, Answer]]:
        scores = self._continuations(groups)
        if self.autocast_dtype is not None and self.fp32_recheck_margin is not None:
            close = near_ties(scores, self.fp32_recheck_margin)
            if close:  # near ties under autocast are scored again in fp32
                scores.logprob[close] = self._continuations([groups[r] for r in close], fp32=True).logprob
        out = []
        for row, g in enumerate(groups):
            for j, (i, cont) in enumerate(g.members):
                # tokens in: what the model read, a group's context once (with its first member)
                read = len(cont) + (len(g.fitted.ids) if j == 0 else 0)
                out.append((i, Answer(logprob=float(scores.logprob[row, j]), n_tokens=int(scores.n_tokens[row, j]),
                                      cut=g.fitted.cut, seen=g.fitted.seen, tokens_in=read)))
        return out

    def _next(self, todo: list[tuple[int, Fitted]], keep) -> None:
        """Next-token log-probabilities, right-padded batches read at each row's last real
        position, in fp32."""
        todo = sorted(todo, key=lambda item: -len(item[1].ids))
        device = next(self.model.parameters()).device
        for start in range(0, len(todo), self.batch_size):
            part = todo[start:start + self.batch_size]
            width = max(len(f.ids) for _, f in part)
            ids = torch.full((len(part), width), self.tokenizer.pad_token_id, dtype=torch.long)
            mask = torch.zeros((len(part), width), dtype=torch.long)
            for r, (_, f) in enumerate(part):
                ids[r, :len(f.ids)], mask[r, :len(f.ids)] = torch.tensor(f.ids), 1
            ids, mask = ids.to(device), mask.to(device)
            with self._autocast(enabled=False):
                logits = self.model(input_ids=ids, attention_mask=mask).logits
            last = logits[torch.arange(len(part), device=device), mask.sum(1) - 1].float()
            logprobs = torch.log_softmax(last, dim=-1).cpu()
            keep([(i, Answer(next_logprobs=logprobs[r], cut=f.cut, seen=f.seen, tokens_in=len(f.ids))) for r, (i, f) in enumerate(part)])


def open_in_process(context: BackendContext) -> InProcessBackend:
    """The in-process backend's factory: ``context.model`` loaded here (a local folder, a ``pkg:``
    folder or a Hub id) as the recipe's family loads it (auto class, attention implementation,
    adapters), a run's checkpoint (``context.checkpoint``) loaded into it, on the GPU when there is
    one; the recipe's eval batch size, ``evaluation.truncate``, precision, ``fp32_recheck_margin``
    and ``trainer.torch_threads``; with a response cache (kept round it by
    :func:`negtrain.serving.backend.open_backend`), what decides an answer as its cache settings."""
    recipe = context.recipe
    if recipe is None:
        raise ConfigError(f"backend {context.backend}: it loads --model {context.model} as a recipe's model section says; it was given no recipe")
    threads = recipe.trainer.torch_threads
    if threads:  # --trainer.torch_threads, as the hf backend's Trainer honours it; before loading
        torch.set_num_threads(threads)
    path = resolve_model_name(context.model)
    check_model_folder(path, recipe.model.family, f"--model {context.model}")
    tokenizer = load_lm_tokenizer(path, context.model)
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(path)
    autocast_dtype, weights_dtype = precision_dtypes(recipe.trainer.precision)

    def load() -> tuple[Any, dict[str, Any]]:
        model = load_model(path, recipe)
        if context.checkpoint is not None:
            load_checkpoint_weights(model, context.checkpoint)
        if weights_dtype is not None:
            model = model.to(weights_dtype)
        if torch.cuda.is_available() and not getattr(model, "hf_device_map", None):  # a quantized base is placed already
            model = model.to("cuda")
        model.eval()
        backend.dtype_words = dtype_words(model, autocast_dtype)
        return model, (in_process_cache_settings(recipe, model, tokenizer, context.checkpoint) if context.cache is not None else {})

    backend = InProcessBackend(
        None, tokenizer, recipe.data.eval_batch_size, encoder_decoder=bool(getattr(config, "is_encoder_decoder", False)),
        truncate=recipe.evaluation.truncate, autocast_dtype=autocast_dtype, fp32_recheck_margin=recipe.model.fp32_recheck_margin,
        name=context.backend, model_config=config, loader=load,
    )
    backend.precision = evaluation_precision_name(recipe.trainer.precision)
    return backend


def dtype_words(model, autocast_dtype: torch.dtype | None) -> str:
    """What the model computes in, as the records say it: its weights' dtype, or the autocast dtype."""
    if autocast_dtype is not None:
        return f"{str(autocast_dtype).removeprefix('torch.')} (autocast)"
    parameter = next(model.parameters(), None)
    return str(parameter.dtype).removeprefix("torch.") if parameter is not None else "float32"


def module_backend(tokenizer, recipe, model_config, *, encoder_decoder: bool) -> InProcessBackend:
    """The backend a language-model family's module answers its eval sets' requests with during
    ``fit``, ``validate`` and ``test``: built before the weights load (the eval sets' prompts are
    checked against ``model_config``'s context first), handed the module's live model at each
    batch; no cache (the weights change every epoch); the recipe's eval batch size,
    ``evaluation.truncate`` and ``model.fp32_recheck_margin``, and the autocast of its
    ``trainer.precision`` (Lightning's own, kept inside the backend)."""
    autocast_dtype, _ = precision_dtypes(recipe.trainer.precision)
    return InProcessBackend(
        None, tokenizer, recipe.data.eval_batch_size, encoder_decoder=encoder_decoder, truncate=recipe.evaluation.truncate,
        autocast_dtype=autocast_dtype, fp32_recheck_margin=recipe.model.fp32_recheck_margin, name=DEFAULT_BACKEND, model_config=model_config,
    )
