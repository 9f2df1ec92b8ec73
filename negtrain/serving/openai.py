"""A client for any OpenAI-compatible server (vLLM, TGI, llama.cpp's server, ``transformers
serve``, OpenAI itself), answering :mod:`negtrain.engine.requests`.

- A :class:`~negtrain.engine.requests.Generation` goes to ``/v1/chat/completions`` when it is a
  chat turn, else to ``/v1/completions``; greedy (:data:`GREEDY`), with its token limit and stop
  strings, and the settings' ``extra_body`` (a server's own sampling fields, such as llama.cpp's
  ``repeat_penalty``) merged in.
- A :class:`~negtrain.engine.requests.Loglikelihood` goes to ``/v1/completions`` with the
  context and continuation as one prompt, ``echo: true`` and ``logprobs: 1`` (the legacy form
  vLLM serves, as lm-evaluation-harness's ``local-completions`` asks it). The server tokenizes the
  prompt itself; the continuation is the tokens from the one that starts at the end of the context
  (``text_offset``), so its log-probability is summed over the server's own tokens, as the ``hf``
  backend sums over the same tokenizer's. A server whose tokens do not spell the continuation
  from there is an error, not a guess (:mod:`negtrain.serving.answers`).

Requests run ``concurrency`` at a time, each within one deadline (``timeout``, connection to last
byte; :mod:`negtrain.serving.http`). A 429, a 5xx, a timeout, a dropped or cut-off answer, or one
that is not JSON is retried ``retries`` times with exponential backoff (a ``Retry-After`` header,
in seconds or as a date, is honoured up to :data:`MAX_WAIT` seconds); any other status, a redirect
included, fails at once, and so does a JSON answer of the wrong shape (the server would give it
again). ``max_requests`` bounds what one run sends (retries count: each one costs). :meth:`stop`
(a signal) ends every request in flight and sends no other. The API key is read from the
environment variable the settings name, sent in the ``Authorization`` header and kept nowhere
else; every text quoted from a server is masked for it and every other secret negtrain knows.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from negtrain.core.errors import ConfigError, NegtrainError
from negtrain.core.secrets import redact_text, remember_secret
from negtrain.core.server_settings import SERVER_SETTINGS
from negtrain.serving import answers, http
from negtrain.serving.answers import Malformed
from negtrain.serving.backend import BackendBase
from negtrain.serving.cache import ResponseCache
from negtrain.engine.requests import Answer, Counts, Generation, Loglikelihood, NextToken, Request, cache_key

#: The longest wait between two tries, whatever Retry-After says.
MAX_WAIT = 60.0
#: The first backoff; each retry doubles it (with jitter).
FIRST_WAIT = 0.5
#: At most this much of a server's answer is quoted in an error.
QUOTE = 300
#: What every generation asks for, so that a server following the OpenAI API decodes greedily:
#: temperature 0 (the most likely token), and nucleus sampling off (top_p 1, which the OpenAI API
#: accepts, as do vLLM, TGI and llama.cpp's servers). Server-specific settings that also change the
#: text (llama.cpp's repeat_penalty, vLLM's repetition_penalty from a model's generation_config)
#: are not OpenAI fields, which OpenAI refuses: they go in ``extra_body`` (docs/served.md, "Greedy on every server").
GREEDY = {"temperature": 0, "top_p": 1}


class RequestFailed(NegtrainError):
    """A request failed: the example and the server's answer. ``transient``: it kept failing with
    a 429, a 5xx or no answer through every retry (the server is down or overloaded)."""

    def __init__(self, message: str, transient: bool = False, status: int | None = None) -> None:
        super().__init__(message)
        self.transient = transient
        self.status = status  # the HTTP status that refused it, if one did


class BudgetSpent(NegtrainError):
    """``max_requests`` were sent; what was answered is cached."""


@dataclass(frozen=True)
class ServerSettings:
    """What the client runs with: the recipe's ``evaluation.server`` and the served model's name;
    defaults from the one table of server settings (negtrain/core/server_settings.py)."""

    base_url: str
    model: str
    key_env: str | None = SERVER_SETTINGS["key_env"].default  # the name of the environment variable holding the API key
    concurrency: int = SERVER_SETTINGS["concurrency"].default
    timeout: float = SERVER_SETTINGS["timeout"].default
    retries: int = SERVER_SETTINGS["retries"].default
    max_requests: int | None = SERVER_SETTINGS["max_requests"].default
    #: Fields merged into every generation request (a server's own sampling settings).
    extra_body: dict[str, Any] = field(default_factory=dict)

    @property
    def api_root(self) -> str:
        root = self.base_url.rstrip("/")
        return root if root.endswith("/v1") else root + "/v1"

    def identity(self, request: Request | None = None) -> dict[str, Any]:
        """What decides an answer (the cache key's settings): the server and the model, and for a
        generation the extra fields where there are any (a generation cached under other sampling
        settings is not reused; a prompt's log-probabilities do not depend on them)."""
        identity: dict[str, Any] = {"base_url": self.api_root, "model": self.model}
        if self.extra_body and isinstance(request, Generation):
            identity["extra_body"] = self.extra_body
        return identity


class _Transient(Exception):
    """A failure worth retrying (429, 5xx, timeout, connection, an answer cut or not JSON)."""

    def __init__(self, message: str, wait: float | None = None) -> None:
        super().__init__(message)
        self.wait = wait


class OpenAIBackend(BackendBase):
    """A client of an OpenAI-compatible server: the model is not here (no tokenizer, no context it
    can count, the server's chat template), :class:`negtrain.serving.backend.BackendBase`."""

    def __init__(self, settings: ServerSettings, cache: ResponseCache | None, name: str) -> None:
        self.name = name  # the table row it answers as, which keys its cache
        self.settings = settings
        self.cache = cache
        key = None
        if settings.key_env:
            key = os.environ.get(settings.key_env)
            if not key:
                raise ConfigError(f"the API key variable {settings.key_env} is not set (or empty) in the environment")
            remember_secret(key)  # masked in everything written or printed, whatever its variable is called
        self._key = key  # only to mask it in a server's answer quoted in an error
        self._headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if key:
            self._headers["Authorization"] = f"Bearer {key}"
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._inflight = http.InFlight()
        self.sent = 0  # requests sent by this process, against max_requests
        self._spot_checked = False  # whether this run's log-likelihood requests were spot-checked (spot_check)

    @property
    def where(self) -> str:
        return f"the server at {self.settings.api_root}"

    def stop(self) -> None:
        """End every request in flight and send no other (a signal stopped the card)."""
        self._stop.set()
        self._inflight.abort()

    # ---- masking ------------------------------------------------------------------------
    def _masked(self, text: str) -> str:
        """``text`` without the key (whatever its variable is called) or any other secret."""
        return redact_text(text.replace(self._key, "***") if self._key else text)

    def _quote(self, data: Any) -> str:
        """A server's answer as quoted in an error: one line, masked, at most :data:`QUOTE`
        characters. Masked before it is cut, so no part of a key survives at the cut."""
        if isinstance(data, (bytes, bytearray)):
            raw = bytes(data[: 8 * QUOTE + 8192]).decode("utf-8", "replace")
        elif isinstance(data, str):
            raw = data[: 8 * QUOTE + 8192]
        else:
            raw = json.dumps(data, ensure_ascii=False)[: 8 * QUOTE + 8192]
        text = self._masked(" ".join(raw.split()))
        return text[:QUOTE] + ("..." if len(text) > QUOTE else "")

    # ---- one HTTP exchange ---------------------------------------------------------------
    def _post(self, path: str, body: dict[str, Any]) -> Any:
        url = self.settings.api_root + path
        shown = self._masked(url)
        try:
            reply = http.post(url, json.dumps(body).encode("utf-8"), self._headers, self.settings.timeout, self._inflight)
        except http.Transient as exc:
            raise _Transient(f"{shown}: {exc}") from exc
        except http.Aborted:
            raise _Stopped() from None
        if reply.status == 200:
            try:
                return json.loads(reply.body)
            except ValueError:
                # A proxy's page or an answer cut short: asked again.
                raise _Transient(f"{shown} answered with no JSON: {self._quote(reply.body)}") from None
        answer = self._quote(reply.body)
        if reply.status == 429 or reply.status >= 500:
            raise _Transient(f"HTTP {reply.status}: {answer}", http.retry_after(reply.retry_after))
        if 300 <= reply.status < 400:
            where = self._masked(reply.location or "nowhere it says")
            raise RequestFailed(f"HTTP {reply.status} from {shown}: the server redirects to {where}; negtrain follows no redirect "
                                "(the API key would go with it): give the final address as --base-url", status=reply.status)
        raise RequestFailed(f"HTTP {reply.status} from {shown}: {answer}", status=reply.status)

    def _post_retrying(self, path: str, body: dict[str, Any], example: str) -> Any:
        last = ""
        for attempt in range(self.settings.retries + 1):
            if self._stop.is_set():
                raise _Stopped()
            with self._lock:
                if self.settings.max_requests is not None and self.sent >= self.settings.max_requests:
                    raise BudgetSpent(
                        f"--max-requests {self.settings.max_requests} reached; every answer so far is cached, so rerunning the "
                        "same command with a larger budget continues without sending them again"
                    )
                self.sent += 1
            try:
                return self._post(path, body)
            except RequestFailed as exc:
                raise RequestFailed(f"{example}: {exc}", status=exc.status) from exc
            except _Transient as exc:
                last = str(exc)
                if attempt == self.settings.retries:
                    break
                wait_s = exc.wait if exc.wait is not None else FIRST_WAIT * 2**attempt * (1 + random.random() / 4)
                if self._stop.wait(min(wait_s, MAX_WAIT)):  # a stop ends the wait at once
                    raise _Stopped() from exc
        raise RequestFailed(f"{example}: failed after {self.settings.retries} retries; the server's last answer: {last}", transient=True)

    # ---- requests ------------------------------------------------------------------------
    def _send(self, request: Request) -> Answer:
        model = self.settings.model
        if isinstance(request, Generation):
            common = {**self.settings.extra_body, "model": model, "max_tokens": request.max_tokens, **GREEDY}
            if request.stop:
                common["stop"] = list(request.stop)
            if request.chat:
                messages = [{"role": role, "content": content} for role, content in request.messages]
                out = self._post_retrying("/chat/completions", {**common, "messages": messages}, request.example)
                read = answers.chat_text
            else:
                out = self._post_retrying("/completions", {**common, "prompt": request.prompt}, request.example)
                read = answers.completion_text
            try:
                tokens_in, tokens_out = answers.usage_counts(out)
                return Answer(text=read(out), tokens_in=tokens_in, tokens_out=tokens_out)
            except Malformed as exc:
                raise RequestFailed(f"{request.example}: a malformed answer ({exc}): {self._quote(out)}") from exc
        assert isinstance(request, Loglikelihood)  # answer() refused the others before sending
        out = self._post_retrying("/completions", self._echo_body(request.context + request.continuation), request.example)
        try:
            logprob, n_tokens, greedy = answers.continuation_logprob(out, request.context, request.continuation)
            tokens_in, tokens_out = answers.usage_counts(out)
            return Answer(logprob=logprob, n_tokens=n_tokens, is_greedy=greedy, tokens_in=tokens_in, tokens_out=tokens_out)
        except Malformed as exc:
            raise RequestFailed(f"{request.example}: a malformed answer ({exc}): {self._quote(out)}") from exc

    def cache_identity(self, request: Request) -> dict[str, Any] | None:
        """What keys a request's answer besides itself (the response cache round this backend,
        :mod:`negtrain.serving.response_caching`): the server, the model, a generation's extra fields."""
        return self.settings.identity(request)

    def answer(self, requests: Sequence[Request], counts: Counts, allow_missing: bool = False,
               on_answer: Callable[[int, Answer], None] | None = None) -> list[Answer | None]:
        """The answer to every request from the server, in order, each handed to ``on_answer`` as
        it comes (the response cache keeps it then: a failure later loses no answer paid for). A
        request that fails after its retries stops everything (:class:`RequestFailed`), or with
        ``allow_missing`` is None and named in ``counts.missing``. A signal (a ``Stopped`` raised in
        this thread while it waits) ends the requests in flight at once and sends no other."""
        for r in requests:  # what no OpenAI-compatible endpoint answers: refused before anything is sent
            if isinstance(r, NextToken):
                raise ConfigError(f"{r.example}: the next token's whole distribution is not returned by a server; "
                                  "score it with a model in this process (--backend hf)")
            if isinstance(r, Loglikelihood) and r.chat:
                raise ConfigError(f"{r.example}: a chat's continuation log-probability needs the template rendered where it is "
                                  "scored, which a chat endpoint does not give; drop --chat, or use --backend hf")
        answers_: list[Answer | None] = [None] * len(requests)
        todo = list(range(len(requests)))
        sent_before = self.sent

        def one(i: int) -> None:
            try:
                answer = self._send(requests[i])
            except BudgetSpent:
                self._stop.set()  # at once: the requests still queued are not sent
                raise
            except RequestFailed as exc:
                if not allow_missing:
                    self._stop.set()
                    raise
                with self._lock:
                    counts.missing.append(f"{requests[i].example} ({exc})")
                return
            if on_answer is not None:
                on_answer(i, answer)  # the cache commits it with its batch (serving/cache.py)
            answers_[i] = answer

        self._stop.clear()
        self._inflight.reset()
        try:
            if not self._spot_checked and any(isinstance(r, Loglikelihood) for r in requests):
                self.check_run(requests)
                sent_before = self.sent  # a check, like the alignment check: no benchmark's requests
            if todo:
                pool = ThreadPoolExecutor(max_workers=max(1, min(self.settings.concurrency, len(todo))))
                try:
                    futures = [pool.submit(one, i) for i in todo]
                    done, _ = wait(futures, return_when=FIRST_EXCEPTION)
                    errors = [f.exception() for f in done if f.exception() is not None]
                    # The request that failed, not one that stopped because of it.
                    failed = next((e for e in errors if not isinstance(e, _Stopped)), errors[0] if errors else None)
                    if failed is not None:
                        self._stop.set()
                        if isinstance(failed, _Stopped):
                            failed = RequestFailed("stopped")
                        raise failed
                except Exception:
                    # A failed request or a spent budget: nothing queued is sent; the requests in
                    # flight (paid for) finish and are cached.
                    self._stop.set()
                    raise
                except BaseException:
                    # A signal (Stopped) raised in this thread while it waited: nothing queued is
                    # sent, and what is in flight is abandoned at once.
                    self.stop()
                    raise
                finally:
                    pool.shutdown(wait=True, cancel_futures=True)
        finally:
            counts.requests += self.sent - sent_before
        for a in answers_:
            if a is not None:
                counts.tokens_in += a.tokens_in
                counts.tokens_out += a.tokens_out
        return answers_

    def offers_prompt_logprobs(self) -> tuple[bool, str]:
        """Whether ``/v1/completions`` echoes the prompt's log-probabilities, each for the token it
        is reported for (:meth:`aligned`); when not, what the server does, as words after its name.
        A yes is cached (a rerun asks no more)."""
        probe = Loglikelihood("Hello", " world", example="the prompt log-probability check")
        key = cache_key(self.name, self.settings.identity(probe), probe)
        if self.cache is None or self.cache.get(key) is None:
            try:
                answer = self._send(probe)
            except RequestFailed as exc:
                # A server that fails, refuses the key or has no such model is not one without
                # log-probabilities; a 400 (echo or logprobs refused) or an answer without them is.
                if exc.transient or exc.status in (401, 403, 404) or (exc.status is not None and 300 <= exc.status < 400):
                    raise
                return False, f"returns no prompt log-probabilities (echo + logprobs on /v1/completions: {str(exc).split(': ', 1)[-1]})"
            if self.cache is not None:
                self.cache.put(key, answer)
        return self.aligned()

    #: The alignment probe: one context, continuations whose first tokens all follow it.
    ALIGNMENT_CONTEXT = "The opposite of hot is"
    ALIGNMENT_CONTINUATIONS = (" cold", " not", " warm")

    def aligned(self) -> tuple[bool, str]:
        """Whether the server's echoed log-probabilities belong to the token they are reported for
        (:func:`negtrain.serving.answers.misaligned`: the first tokens of three continuations of
        one context must be reported from one distribution). A server one position off, one that
        names no top tokens (so the check cannot be made), one whose top tokens are not finite,
        contradict its own log-probabilities or name one constant token, is refused for
        log-likelihoods. Asked on every run (a cached verdict would vouch for whatever answers at
        that address later); an aligned verdict is recorded under what answered: the model the
        server names and a digest of its probe answers."""
        tops, outs = [], []
        for continuation in self.ALIGNMENT_CONTINUATIONS:
            out = self._post_retrying("/completions", self._echo_body(self.ALIGNMENT_CONTEXT + continuation),
                                      "the log-probability alignment check")
            try:
                tops.append(answers.continuation_top(out, self.ALIGNMENT_CONTEXT, continuation))
            except Malformed as exc:
                return False, f"gives echoed log-probabilities negtrain cannot read ({exc}): {self._quote(out)}"
            outs.append(out)
        contradiction = next((c for c in map(answers.tops_contradiction, outs) if c), None)
        if contradiction:
            return False, (f"gives top_logprobs that contradict its own log-probabilities ({contradiction}), so negtrain cannot "
                           "check that each belongs to the token it is reported for; score log-likelihoods with the same model "
                           "in this process (--backend transformers)")
        constant = answers.constant_top(outs)
        if constant is not None:
            return False, (f"names {constant!r} as the most probable token at every position of every answer, which is no "
                           "model's distribution, so negtrain cannot check that each log-probability belongs to its token; "
                           "score log-likelihoods with the same model in this process (--backend transformers)")
        verdict = answers.misaligned(tops)
        if verdict is None:
            return False, ("names no top_logprobs with its echoed log-probabilities, so negtrain cannot check that each "
                           "belongs to the token it is reported for; score log-likelihoods with the same model in this "
                           "process (--backend transformers)")
        if verdict:
            seen = ", ".join(f"{c!r}: {t[0]!r} {t[1]:.3f}" for c, t in zip(self.ALIGNMENT_CONTINUATIONS, tops, strict=True) if t)
            return False, ("reports echoed log-probabilities one position off (the most probable token it names after "
                           f"{self.ALIGNMENT_CONTEXT!r} differs with the token that follows it: {seen}; llama-cpp-python's "
                           "server does this), so its log-likelihoods would be wrong; score them with the same model file in "
                           "this process (--backend transformers, or hf), or through a server docs/served.md lists as verified")
        if self.cache is not None:  # a record of what was checked, never read in place of asking
            self.cache.put(self.verdict_key(outs, tops), Answer(text="aligned"))
            self.cache.flush()
        return True, ""

    def verdict_key(self, outs: list[Any], tops: list[tuple[str, float] | None]) -> str:
        """The cache key an aligned verdict is recorded under: what answered (the model and
        fingerprint the server names in its answers) and a digest of its probe answers, not the URL."""
        named = sorted({str(o.get("model")) for o in outs if isinstance(o, dict)})
        fingerprints = sorted({str(o.get("system_fingerprint")) for o in outs if isinstance(o, dict) and o.get("system_fingerprint")})
        probe = hashlib.sha256(json.dumps([[t[0], round(t[1], 3)] if t else None for t in tops]).encode("utf-8")).hexdigest()
        return cache_key(self.name, {"served_model": named, "fingerprint": fingerprints},
                         {"kind": "alignment-verdict", "context": self.ALIGNMENT_CONTEXT, "probe_answers": probe})

    def _echo_body(self, prompt: str) -> dict[str, Any]:
        return {"model": self.settings.model, "prompt": prompt, "max_tokens": 1, "temperature": 0, "echo": True, "logprobs": 1}

    #: How many of a run's log-likelihood requests are spot-checked (:meth:`spot_check`).
    SPOT_CHECKS = 2

    def check_run(self, requests: Sequence[Request]) -> None:
        """The spot check, once a run, whether the run's answers are cached or not (the cache
        wrapper asks it before answering from the cache)."""
        if not self._spot_checked and any(isinstance(r, Loglikelihood) for r in requests):
            self.spot_check(requests)
            self._spot_checked = True

    def spot_check(self, requests: Sequence[Request]) -> None:
        """A sample of the run's own log-likelihood requests (of the first batch that has any) asked
        twice, on every run: as
        context + continuation (the echoed prompt, read at the continuation's first token) and as
        the continuation of its context (the context alone, read at the token generated after it).
        Both are the distribution after the context, so they must agree (the same most probable
        token and value); a server that passed :meth:`aligned` and is off on the run's own prompts
        is refused before its answers are used."""
        pool = [r for r in requests if isinstance(r, Loglikelihood) and r.context and r.continuation]
        sample = list({id(r): r for r in (pool[:1] + pool[-1:])}.values())[: self.SPOT_CHECKS]
        for r in sample:
            whole = self._post_retrying("/completions", self._echo_body(r.context + r.continuation), f"{r.example} (spot check)")
            alone = self._post_retrying("/completions", self._echo_body(r.context), f"{r.example} (spot check)")
            try:
                echoed = answers.continuation_top(whole, r.context, r.continuation)
                generated = answers.next_token_top(alone)
            except Malformed as exc:
                raise RequestFailed(f"{r.example} (spot check): a malformed answer ({exc}): {self._quote(whole)}") from exc
            if echoed is None or generated is None:
                continue  # a server that names no tops was refused for log-likelihoods by aligned()
            if answers.misaligned([echoed, generated]):
                raise RequestFailed(
                    f"{r.example}: the server's echoed log-probabilities disagree with the distribution it gives after the same "
                    f"context (most probable after {r.context[-40:]!r}: {echoed[0]!r} {echoed[1]:.3f} echoed in the prompt, "
                    f"{generated[0]!r} {generated[1]:.3f} when it continues it); it passed the alignment check but is off on this "
                    "run's prompts, so its log-likelihoods would be wrong; score them with the same model in this process "
                    "(--backend transformers)")


class _Stopped(Exception):
    """Another request failed, or the card is stopping: the rest are not sent."""


def open_openai(context) -> OpenAIBackend:
    """The ``openai`` row of the backends table (negtrain/config/backends.py): a client for the
    server of the recipe's ``evaluation.server`` section, serving ``model.name``."""
    server = context.server
    if server is None:
        raise ConfigError("backend openai needs a server section (base_url)")
    settings = ServerSettings(server.base_url, context.model, server.key_env, server.concurrency, server.timeout,
                              server.retries, server.max_requests, server.extra_body)
    return OpenAIBackend(settings, context.cache, context.backend)
