"""Capture a real OpenAI-compatible server's raw answers to the requests negtrain's checks send,
as a test fixture (tests/fixtures/servers/*.json, replayed by tests/test_served_alignment.py).

    python perf/capture_server_answers.py --base-url http://127.0.0.1:8000/v1 --model NAME \
        --server "llama-cpp-python 0.3.x" --out tests/fixtures/servers/NAME.json

Sent, each as negtrain sends it (echo + logprobs 1 + max_tokens 1 for a log-likelihood): the
prompt log-probability check ("Hello world"), the alignment check (three continuations of one
context, negtrain/serving/openai.py), and a greedy generation. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import urllib.request
from pathlib import Path

from negtrain.serving.openai import GREEDY, OpenAIBackend


def post(url: str, body: dict) -> dict:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=300) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return {"status": exc.code, "error": exc.read().decode(errors="replace")[:2000]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--server", required=True, help="the server and its version, as the fixture names it")
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args()
    url = args.base_url.rstrip("/") + "/completions"
    prompts = ["Hello world", *(OpenAIBackend.ALIGNMENT_CONTEXT + c for c in OpenAIBackend.ALIGNMENT_CONTINUATIONS)]
    answers = {p: post(url, {"model": args.model, "prompt": p, "max_tokens": 1, "temperature": 0, "echo": True, "logprobs": 1})
               for p in prompts}
    generate = "Is it true that if the man owns a dog, then the man owns a mammal?"
    answers[f"generate:{generate}"] = post(url, {"model": args.model, "prompt": generate, "max_tokens": 16, **GREEDY})
    args.out.write_text(json.dumps({"server": args.server, "model": args.model, "answers": answers}, indent=1) + "\n", encoding="utf-8")
    print(f"{args.out}: {len(answers)} answers")


if __name__ == "__main__":
    main()
