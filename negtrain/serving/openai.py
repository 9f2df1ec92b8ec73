"""A client for any OpenAI-compatible server (vLLM, TGI, llama.cpp's server, ``transformers
serve``, OpenAI itself), answering :mod:`negtrain.serving.requests`.

- A :class:`~negtrain.serving.requests.Generation` goes to ``/v1/chat/completions`` when it is a
  chat turn, else to ``/v1/completions``; greedy (``temperature: 0``), with its token limit and
  stop strings.
- A :class:`~negtrain.serving.requests.Loglikelihood` goes to ``/v1/completions`` with the
  context and continuation as one prompt, ``echo: true`` and ``logprobs: 1`` (the legacy form
  vLLM serves, as lm-evaluation-harness's ``local-completions`` asks it). The server tokenizes the
  prompt itself; the continuation is the tokens from the one that starts at the end of the context
  (``text_offset``), so its log-probability is summed over the server's own tokens, as the ``hf``
  backend sums over the same tokenizer's. A server whose tokens do not split there is an error,
  not a guess.

Requests run ``concurrency`` at a time. A 429, a 5xx, a timeout or a dropped connection is
retried ``retries`` times with exponential backoff (a ``Retry-After`` header is honoured, up to
:data:`MAX_WAIT` seconds); any other status fails at once. ``max_requests`` bounds what one run
sends (retries count: each one costs). The API key is read from the environment variable the
settings name, sent in the ``Authorization`` header and kept nowhere else.
"""

from __future__ import annotations

import json
import os
import random
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from negtrain.errors import ConfigError, NegtrainError
from negtrain.secrets import redact_text
from negtrain.serving.cache import ResponseCache
from negtrain.serving.requests import Answer, Generation, Loglikelihood, Request, cache_key

#: The longest wait between two tries, whatever Retry-After says.
MAX_WAIT = 60.0
#: The first backoff; each retry doubles it (with jitter).
FIRST_WAIT = 0.5
#: At most this much of a server's answer is quoted in an error.
QUOTE = 300


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
    base_url: str
    model: str
    key_env: str | None = None  # the name of the environment variable holding the API key
    concurrency: int = 4
    timeout: float = 120.0
    retries: int = 5
    max_requests: int | None = None

    @property
    def api_root(self) -> str:
        root = self.base_url.rstrip("/")
        return root if root.endswith("/v1") else root + "/v1"

    def identity(self) -> dict[str, Any]:
        """What decides an answer (the cache key's settings): the server and the model."""
        return {"base_url": self.api_root, "model": self.model}


@dataclass
class Counts:
    """Per benchmark: requests sent to the server (retries included), answers read from the
    cache, and tokens in and out as the server counted them (answers from the cache included)."""

    requests: int = 0
    cached: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    missing: list[str] = field(default_factory=list)  # examples whose request failed (--allow-missing)

    def as_json(self) -> dict[str, Any]:
        return {"sent": self.requests, "cached": self.cached, "tokens_in": self.tokens_in, "tokens_out": self.tokens_out}


class _Transient(Exception):
    """A failure worth retrying (429, 5xx, timeout, connection)."""

    def __init__(self, message: str, wait: float | None = None) -> None:
        super().__init__(message)
        self.wait = wait


class OpenAIBackend:
    name = "openai"

    def __init__(self, settings: ServerSettings, cache: ResponseCache | None) -> None:
        self.settings = settings
        self.cache = cache
        key = None
        if settings.key_env:
            key = os.environ.get(settings.key_env)
            if not key:
                raise ConfigError(f"the API key variable {settings.key_env} is not set (or empty) in the environment")
        self._headers = {"Content-Type": "application/json"}
        if key:
            self._headers["Authorization"] = f"Bearer {key}"
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.sent = 0  # requests sent by this process, against max_requests

    # ---- one HTTP exchange ---------------------------------------------------------------
    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        url = self.settings.api_root + path
        data = json.dumps(body).encode("utf-8")
        request = urllib.request.Request(url, data=data, headers=self._headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.settings.timeout) as response:
                payload = response.read()
        except urllib.error.HTTPError as exc:
            answer = _quote(exc.read())
            if exc.code == 429 or exc.code >= 500:
                raise _Transient(f"HTTP {exc.code}: {answer}", _retry_after(exc.headers.get("Retry-After"))) from None
            raise RequestFailed(f"HTTP {exc.code} from {url}: {answer}", status=exc.code) from None
        except (TimeoutError, socket.timeout) as exc:
            raise _Transient(f"no answer within {self.settings.timeout:g} s ({exc})") from None
        except urllib.error.URLError as exc:
            raise _Transient(f"cannot reach {url} ({exc.reason})") from None
        except (ConnectionError, OSError) as exc:
            raise _Transient(f"connection to {url} failed ({exc})") from None
        try:
            return json.loads(payload)
        except ValueError:
            raise RequestFailed(f"{url} answered with no JSON: {_quote(payload)}") from None

    def _post_retrying(self, path: str, body: dict[str, Any], example: str) -> dict[str, Any]:
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
                raise RequestFailed(f"{example}: {redact_text(str(exc))}", status=exc.status) from None
            except _Transient as exc:
                last = str(exc)
                if attempt == self.settings.retries:
                    break
                wait_s = exc.wait if exc.wait is not None else FIRST_WAIT * 2**attempt * (1 + random.random() / 4)
                time.sleep(min(wait_s, MAX_WAIT))
        raise RequestFailed(f"{example}: failed after {self.settings.retries} retries; the server's last answer: {redact_text(last)}", transient=True)

    # ---- requests ------------------------------------------------------------------------
    def _send(self, request: Request) -> Answer:
        model = self.settings.model
        if isinstance(request, Generation):
            common = {"model": model, "max_tokens": request.max_tokens, "temperature": 0}
            if request.stop:
                common["stop"] = list(request.stop)
            if request.chat:
                messages = [{"role": role, "content": content} for role, content in request.messages]
                out = self._post_retrying("/chat/completions", {**common, "messages": messages}, request.example)
                text = _first_choice(out, request.example).get("message", {}).get("content")
            else:
                out = self._post_retrying("/completions", {**common, "prompt": request.prompt}, request.example)
                text = _first_choice(out, request.example).get("text")
            if not isinstance(text, str):
                raise RequestFailed(f"{request.example}: the server's answer has no text: {_quote(json.dumps(out))}")
            return Answer(text=text, **_usage(out))
        body = {"model": model, "prompt": request.context + request.continuation, "max_tokens": 1, "temperature": 0, "echo": True, "logprobs": 1}
        out = self._post_retrying("/completions", body, request.example)
        logprob, n_tokens, greedy = continuation_logprob(_first_choice(out, request.example).get("logprobs"), request, out)
        return Answer(logprob=logprob, n_tokens=n_tokens, is_greedy=greedy, **_usage(out))

    def answer(self, requests: Sequence[Request], counts: Counts, allow_missing: bool = False) -> list[Answer | None]:
        """The answer to every request, from the cache or the server, in order. A request that
        fails after its retries stops everything (:class:`RequestFailed`), or with
        ``allow_missing`` is None and named in ``counts.missing``."""
        settings = self.settings.identity()
        keys = [cache_key(self.name, settings, r) for r in requests]
        answers: list[Answer | None] = [None] * len(requests)
        todo = []
        for i, key in enumerate(keys):
            hit = self.cache.get(key) if self.cache is not None else None
            if hit is None:
                todo.append(i)
            else:
                answers[i] = hit
                counts.cached += 1
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
            if self.cache is not None:
                self.cache.put(keys[i], answer)  # at once: a kill loses no answered request
            answers[i] = answer

        self._stop.clear()
        try:
            if todo:
                with ThreadPoolExecutor(max_workers=max(1, min(self.settings.concurrency, len(todo)))) as pool:
                    futures = [pool.submit(one, i) for i in todo]
                    done, _ = wait(futures, return_when=FIRST_EXCEPTION)
                    errors = [f.exception() for f in done if f.exception() is not None]
                    # The request that failed, not one that stopped because of it.
                    failed = next((e for e in errors if not isinstance(e, _Stopped)), errors[0] if errors else None)
                    if failed is not None:
                        self._stop.set()
                        for f in futures:
                            f.cancel()
                        if isinstance(failed, _Stopped):
                            failed = RequestFailed("stopped")
                        raise failed
        finally:
            counts.requests += self.sent - sent_before
        for a in answers:
            if a is not None:
                counts.tokens_in += a.tokens_in
                counts.tokens_out += a.tokens_out
        return answers

    def offers_prompt_logprobs(self) -> tuple[bool, str]:
        """Whether ``/v1/completions`` echoes the prompt's log-probabilities, and the server's
        answer when it does not. A yes is cached (a rerun asks no more)."""
        probe = Loglikelihood("Hello", " world", example="the prompt log-probability check")
        key = cache_key(self.name, self.settings.identity(), probe)
        if self.cache is not None and self.cache.get(key) is not None:
            return True, ""
        try:
            answer = self._send(probe)
        except RequestFailed as exc:
            # A server that fails, refuses the key or has no such model is not one without
            # log-probabilities; a 400 (echo or logprobs refused) or an answer without them is.
            if exc.transient or exc.status in (401, 403, 404):
                raise
            return False, str(exc).split(": ", 1)[-1]
        if self.cache is not None:
            self.cache.put(key, answer)
        return True, ""


class _Stopped(Exception):
    """Another request failed: the rest are not sent."""


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _quote(data: bytes | str) -> str:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    text = " ".join(text.split())
    return text[:QUOTE] + ("..." if len(text) > QUOTE else "")


def _first_choice(out: Any, example: str) -> dict[str, Any]:
    choices = out.get("choices") if isinstance(out, dict) else None
    if not choices or not isinstance(choices[0], dict):
        raise RequestFailed(f"{example}: the server's answer has no choices: {_quote(json.dumps(out))}")
    return choices[0]


def _usage(out: dict[str, Any]) -> dict[str, int]:
    usage = out.get("usage") or {}
    return {"tokens_in": int(usage.get("prompt_tokens") or 0), "tokens_out": int(usage.get("completion_tokens") or 0)}


def continuation_logprob(logprobs: Any, request: Loglikelihood, out: Any) -> tuple[float, int, bool]:
    """The continuation's summed log-probability, token count and greediness, from an echoed
    prompt's ``logprobs`` (``tokens``, ``token_logprobs``, ``text_offset``, ``top_logprobs``)."""
    what = f"{request.example}: "
    if not isinstance(logprobs, dict) or not logprobs.get("token_logprobs") or not logprobs.get("text_offset"):
        raise RequestFailed(what + "the server returned no prompt log-probabilities (echo + logprobs on /v1/completions): "
                            + _quote(json.dumps(out)))
    start, end = len(request.context), len(request.context) + len(request.continuation)
    offsets, values = logprobs["text_offset"], logprobs["token_logprobs"]
    tokens, tops = logprobs.get("tokens") or [], logprobs.get("top_logprobs") or []
    picked = [i for i, o in enumerate(offsets) if start <= o < end]
    if not picked or offsets[picked[0]] != start:
        raise RequestFailed(what + f"the server's tokens do not split where the continuation {request.continuation!r} begins")
    if any(values[i] is None for i in picked):
        raise RequestFailed(what + "the server returned no log-probability for a continuation token")
    greedy = True
    for i in picked:
        top = tops[i] if i < len(tops) else None
        if isinstance(top, dict) and top and i < len(tokens):
            greedy = greedy and max(top, key=top.get) == tokens[i]
    return float(sum(values[i] for i in picked)), len(picked), greedy
