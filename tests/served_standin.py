"""A STAND-IN for an OpenAI-compatible server, for the tests of the served-model backend.

No server that runs here returns prompt log-probabilities (``transformers serve`` ignores
``echo`` and ``logprobs``), so this small stand-in, written for the tests on the standard
library's ``http.server`` and bound to 127.0.0.1 only, answers ``/v1/completions`` the way vLLM
does, from a real (tiny) Hugging Face model:

- with ``echo`` and ``logprobs``: the prompt's tokens as text pieces that spell the prompt (as vLLM
  detokenizes them), each one's log-probability given the ones before (None for the first), their
  character offsets (``text_offset``) and the top token at each position, then one generated token
  (``max_tokens: 1``);
- without: greedy generation up to ``max_tokens`` or the first stop string, with a repetition
  penalty where the stand-in is given one (``repeat_penalty``, as llama-cpp-python's server applies
  its default 1.1 even at ``temperature: 0``) unless the request sets ``repeat_penalty`` itself;
- ``shifted``: echoed log-probabilities one position off, as llama-cpp-python's server gives them
  (token i's value and top token read from the logits at position i, which predict token i + 1;
  the first token gets a value too), everything else the same; ``shifted_after_probe``: correct on
  the alignment check's prompts and one position off on every other (a server that passes the check
  and is wrong afterwards);
- ``constant_top``: every ``top_logprobs`` entry names that one token (with the token's own value
  where it is that token, else -0.01), whatever the distribution; ``nan_tops``: every top value NaN.

It counts the requests it answers, and can be told to answer some with an error status first
(``fail``: a list of statuses used up one per request, or ``always`` for every request; with
``echo_auth`` the error quotes the request's Authorization header, as a careless server might), and to
call ``on_request(count)`` after answering each one (the tests kill a card from there).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import torch

from local_server import JsonReplies, LocalServer
from negtrain.serving.openai import OpenAIBackend


class StandIn(LocalServer):
    def __init__(self, model_dir: Path, fail: list[int] | None = None, always: int | None = None, echo_auth: bool = False,
                 repeat_penalty: float | None = None, shifted: bool = False, shifted_after_probe: bool = False,
                 constant_top: str | None = None, nan_tops: bool = False) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
        self.fail = list(fail or [])
        self.always = always
        self.echo_auth = echo_auth  # a careless server: its error quotes the Authorization header
        self.repeat_penalty = repeat_penalty  # the server's default penalty (None: none)
        self.shifted = shifted  # echoed log-probabilities one position off, as llama-cpp-python's server gives them
        self.shifted_after_probe = shifted_after_probe
        self.constant_top = constant_top
        self.nan_tops = nan_tops
        self.bodies: list[dict] = []  # every request's JSON body
        self.answered = 0  # requests answered with 200
        self.refused = 0  # requests answered with an error status
        self.on_request = None
        self.auth: list[str | None] = []  # the Authorization header of every request
        self.prompt_tokens: list[int] = []  # the usage.prompt_tokens of every answered request, in order
        self._lock = threading.Lock()
        standin = self

        class Handler(JsonReplies):
            def log_message(self, *args) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                standin.auth.append(self.headers.get("Authorization"))
                standin.bodies.append(body)
                with standin._lock:
                    status = standin.always or (standin.fail.pop(0) if standin.fail else 200)
                    if status != 200:
                        standin.refused += 1
                        said = f"stand-in says {status}" + (f" to {self.headers.get('Authorization')}" if standin.echo_auth else "")
                        self.send(status, {"error": {"message": said}}, {"Retry-After": "0"})
                        return
                    if not self.path.endswith("/v1/completions"):
                        self.send(404, {"error": {"message": f"no route {self.path}"}})
                        return
                    answer = standin.logprobs(body) if body.get("echo") else standin.generate(body)
                    standin.answered += 1
                    standin.prompt_tokens.append(answer["usage"]["prompt_tokens"])
                    count = standin.answered
                self.send(200, answer)
                if standin.on_request is not None:
                    standin.on_request(count)

        self._listen(Handler)


    @torch.no_grad()
    def logprobs(self, body: dict) -> dict:
        text = body["prompt"]
        shifted = self.shifted or (self.shifted_after_probe and not text.startswith(OpenAIBackend.ALIGNMENT_CONTEXT))
        enc = self.tokenizer(text, return_offsets_mapping=True)
        ids = enc["input_ids"]
        logits = self.model(input_ids=torch.tensor([ids])).logits[0].float()
        lp = torch.log_softmax(logits, -1)
        # Token i's distribution: the logits at position i - 1; a shifted server reads position i
        # (which predicts token i + 1), and so gives the first token a value too.
        at = lp[: len(ids)] if shifted else torch.cat([lp[:1], lp[: len(ids) - 1]])
        token_logprobs = [None] + [float(at[i, ids[i]]) for i in range(1, len(ids))]
        offsets = [o[0] for o in enc["offset_mapping"]]
        # Each token's text: the prompt from its offset to the next token's, so they spell it.
        tokens = [text[a:b] for a, b in zip(offsets, [*offsets[1:], len(text)], strict=False)]

        def piece(i: int, token_id: int) -> str:  # the top token's text, as the server names it
            return tokens[i] if i < len(ids) and token_id == ids[i] else self.tokenizer.decode([token_id])

        tops = [None] + [{piece(i, int(at[i].argmax())): float(at[i].max())} for i in range(1, len(ids))]
        if shifted:
            token_logprobs[0], tops[0] = float(at[0, ids[0]]), {piece(0, int(at[0].argmax())): float(at[0].max())}
        nxt = int(lp[-1].argmax())  # max_tokens: 1
        tokens.append(self.tokenizer.decode([nxt]))
        token_logprobs.append(float(lp[-1, nxt]))
        tops.append({tokens[-1]: float(lp[-1, nxt])})
        offsets.append(len(text))
        if self.constant_top is not None:
            tops = [None if t is None else {self.constant_top: v if tok == self.constant_top and v is not None else -0.01}
                    for t, tok, v in zip(tops, tokens, token_logprobs, strict=True)]
        if self.nan_tops:
            tops = [None if t is None else {k: float("nan") for k in t} for t in tops]
        return {
            "object": "text_completion", "model": body["model"],
            "choices": [{"index": 0, "text": text + self.tokenizer.decode([nxt]), "finish_reason": "length",
                         "logprobs": {"tokens": tokens, "token_logprobs": token_logprobs, "text_offset": offsets, "top_logprobs": tops}}],
            "usage": {"prompt_tokens": len(ids), "completion_tokens": 1, "total_tokens": len(ids) + 1},
        }

    @torch.no_grad()
    def generate(self, body: dict) -> dict:
        ids = self.tokenizer(body["prompt"], return_tensors="pt")["input_ids"]
        penalty = body.get("repeat_penalty", self.repeat_penalty)
        out = self.model.generate(input_ids=ids, max_new_tokens=body["max_tokens"], do_sample=False,
                                  pad_token_id=self.tokenizer.eos_token_id, stop_strings=body.get("stop") or None,
                                  tokenizer=self.tokenizer, repetition_penalty=penalty if penalty not in (None, 1.0) else None)
        new = out[0, ids.shape[1]:]
        text = self.tokenizer.decode(new, skip_special_tokens=True)
        for stop in body.get("stop") or []:
            text = text.split(stop, 1)[0]
        return {"object": "text_completion", "model": body["model"],
                "choices": [{"index": 0, "text": text, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": ids.shape[1], "completion_tokens": len(new), "total_tokens": ids.shape[1] + len(new)}}
