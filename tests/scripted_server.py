"""A STAND-IN for a misbehaving OpenAI-compatible server, for the fault tests of the served
backend (tests/test_served_faults.py). Bound to 127.0.0.1, on the standard library's
``http.server``, with no model: each request is answered by ``script(n, path, body)`` (``n``
counts from 1), which returns

- a dict: a 200 with that JSON;
- ``(status, body, headers)``: that status, with a dict body sent as JSON and bytes as they are;
- a callable: called with the request handler, to write whatever it likes to the socket (a
  trickle, a cut-off body, a garbage status line).

:func:`well_formed` is the answer of a well-behaved server, from a made-up tokenizer (each token
is a run of whitespace and the word after it, so the tokens spell the prompt), and every request
(its time, path, body and Authorization header) is recorded in ``requests``.
"""

from __future__ import annotations

import json
import re
import threading
import time

from local_server import JsonReplies, LocalServer
from negtrain.serving.openai import OpenAIBackend

ALIGNMENT_CONTEXT = OpenAIBackend.ALIGNMENT_CONTEXT


def tokens_of(text: str) -> list[tuple[int, str]]:
    """The made-up tokenizer: (character offset, text) of each whitespace-led word."""
    return [(m.start(), m[0]) for m in re.finditer(r"\s*\S+", text)]


def logprob_of(token: str) -> float:
    """A fixed, made-up log-probability per token text (so a hand count can check any sum)."""
    return -0.25 * (1 + sum(map(ord, token)) % 7)


#: The made-up model's prediction after a prefix, as the echoed prompts so far showed it: the token
#: that followed that prefix in the last one (its made-up log-probability). A prompt that ends
#: there is continued with that token, so a prompt's echoed top token and the token generated after
#: it agree, as they do on a correct server (the spot check of negtrain/serving/openai.py asks both).
_FOLLOWED: dict[str, tuple[str, float]] = {}


def well_formed(body: dict, text: str = "yes") -> dict:
    """A correct answer to ``body``: the echoed prompt's log-probabilities, or ``text`` generated."""
    if body.get("echo"):
        prompt = body["prompt"]
        pieces = tokens_of(prompt)
        for offset, token in pieces[1:]:
            _FOLLOWED[prompt[:offset]] = (token, logprob_of(token))
        after = (" is", -0.1) if prompt.endswith(ALIGNMENT_CONTEXT) else _FOLLOWED.get(prompt, (" the", -1.0))
        tokens = [t for _, t in pieces] + [after[0]]
        logprobs = [None] + [logprob_of(t) for _, t in pieces[1:]] + [after[1]]
        # The most probable token at each position, as a correct server reports it: the one its
        # prefix predicts (here: the token that follows in this prompt, unless the prefix ends with
        # the alignment check's context, after which one made-up distribution names " is" at -0.1),
        # so the check that log-probabilities belong to their tokens passes.
        tops = [None] + [{" is": -0.1} if prompt[:offset].endswith(ALIGNMENT_CONTEXT) else {t: lp}
                         for (offset, _), t, lp in zip([*pieces[1:], (len(prompt), "")], tokens[1:], logprobs[1:], strict=False)]
        return {"object": "text_completion", "model": body["model"],
                "choices": [{"index": 0, "text": prompt + after[0], "finish_reason": "length",
                             "logprobs": {"tokens": tokens, "token_logprobs": logprobs,
                                          "text_offset": [o for o, _ in pieces] + [len(prompt)], "top_logprobs": tops}}],
                "usage": {"prompt_tokens": len(pieces), "completion_tokens": 1, "total_tokens": len(pieces) + 1}}
    if "messages" in body:
        choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
    else:
        choice = {"index": 0, "text": text, "finish_reason": "stop"}
    return {"object": "text_completion", "model": body["model"], "choices": [choice],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}


class Scripted(LocalServer):
    def __init__(self, script=None, delay: float = 0.0) -> None:
        self.script = script or (lambda n, path, body: well_formed(body))
        self.delay = delay  # seconds before each answer (a slow server)
        self.requests: list[dict] = []  # {"at", "path", "body", "auth"} per request, in arrival order
        self._lock = threading.Lock()
        scripted = self

        class Handler(JsonReplies):
            def log_message(self, *args) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = {}
                with scripted._lock:
                    scripted.requests.append({"at": time.monotonic(), "path": self.path, "body": body,
                                              "auth": self.headers.get("Authorization")})
                    n = len(scripted.requests)
                if scripted.delay:
                    time.sleep(scripted.delay)
                answer = scripted.script(n, self.path, body)
                try:
                    if callable(answer):
                        answer(self)
                    elif isinstance(answer, tuple):
                        self.send(*answer)
                    else:
                        self.send(200, answer)
                except OSError:  # the client went away (a stopped card, a timeout)
                    pass

        self._listen(Handler)

