"""Servers whose echoed log-probabilities belong to another token are caught before a card uses
them for a log-likelihood (negtrain/serving/answers.py misaligned, openai.py aligned).

llama-cpp-python's server reports token i's log-probability from the logits at position i, which
predict token i + 1: one position off. Its answers parse (the tokens spell the continuation, the
offsets are right), so without the check a NeQA card through it is a normal card of wrong numbers.
The check: the first tokens of continuations of one context are all predicted by one distribution,
so a server that reports each token's value where it belongs names the same most probable token,
with the same value, at each of them; a shifted one names the distribution after each.

Three ways in: the stand-in server (tests/served_standin.py) on the tiny Llama, correct and shifted
(the same weights, so only the alignment differs); and raw answers captured from real servers
(tests/fixtures/servers/: `transformers serve`'s captured; llama-cpp-python's SYNTHETIC, written from its code on the real SmolLM2 weights, as its build here would not run), replayed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from local_server import JsonReplies, LocalServer
from negtrain.cli import main
from negtrain.serving import answers
from served_standin import StandIn

FIXTURES = Path(__file__).parent / "fixtures" / "servers"
NEQA_ROWS = 6


class Replay(LocalServer):
    """Answers each /v1/completions request with the answer a real server gave to the same prompt
    (a captured fixture: {"server": ..., "answers": {prompt: answer}}); any other prompt is a 404."""

    def __init__(self, fixture: Path) -> None:
        self.answers = json.loads(fixture.read_text(encoding="utf-8"))["answers"]
        self.prompts: list[str] = []
        replay = self

        class Handler(JsonReplies):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                replay.prompts.append(body.get("prompt"))
                key = body.get("prompt") if body.get("echo") else f"generate:{body.get('prompt')}"
                if key in replay.answers:
                    self.send(200, replay.answers[key])
                else:
                    self.send(404, {"error": {"message": f"no captured answer for {key!r}"}})

        self._listen(Handler)


@pytest.fixture()
def neqa_world(lm_env, tmp_path, monkeypatch):
    """The lm_world data with NeQA's file cut to a few rows (read from the mirror lm_world links
    CondaQA from, written here)."""
    mirror = (lm_env["data"] / "AbhilashaRavichander/CondaQA").resolve().parent.parent
    source = mirror / "yuhui-zh15/NeQA/data_pipeline/neqa.jsonl"
    if not source.is_file():
        pytest.skip("needs NEGTRAIN_DATA_DIR with the NeQA mirror")
    data = tmp_path / "data"
    data.mkdir()
    for child in lm_env["data"].iterdir():
        (data / child.name).symlink_to(child.resolve())
    target = data / "yuhui-zh15/NeQA/data_pipeline/neqa.jsonl"
    target.parent.mkdir(parents=True)
    target.write_text("".join(source.read_text(encoding="utf-8").splitlines(keepends=True)[:NEQA_ROWS]), encoding="utf-8")
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(data))
    return lm_env


def _error(capsys) -> str:
    """The one error line of a refused card (stderr also holds the stand-in's loading bars)."""
    lines = [line for line in capsys.readouterr().err.replace("\r", "\n").splitlines() if "error:" in line]
    assert len(lines) == 1, lines
    print(lines[0])
    return lines[0]


def _served(model, url, out, *extra) -> int:
    return main(["evaluate", "--model", str(model), "--backend", "openai", "--base-url", url, "--benchmarks", "neqa",
                 "--out", str(out), *extra])


def test_a_shifted_server_is_refused_for_neqa_and_a_correct_one_scores_it(neqa_world, tmp_path, capsys):
    model = neqa_world["llama"]
    with StandIn(model, shifted=True) as server:
        assert _served(model, server.url, tmp_path / "shifted") == 2
        err = _error(capsys)
        assert err.startswith(f"error: the server at {server.url}")
        assert "one position off" in err and "--backend transformers" in err and "neqa/test need them" in err
        assert server.answered == 1 + 3  # the log-probability check and the alignment check: no NeQA row
    assert not (tmp_path / "shifted" / "metrics.jsonl").exists()
    with StandIn(model) as server:
        assert _served(model, server.url, tmp_path / "correct") == 0
        checks = 1 + 3 + 2 * 2  # and two of the card's own requests spot-checked, each asked twice (issue 55)
        assert server.answered == checks + NEQA_ROWS * 2
        # The answers are cached, the verdict is not: a rerun on the same cache asks the alignment
        # check and the spot checks again (tests/test_served_alignment_checks.py), and no row.
        assert _served(model, server.url, tmp_path / "again", "--cache", str(tmp_path / "correct" / "responses.sqlite")) == 0
        assert server.answered == checks + NEQA_ROWS * 2 + checks - 1
    record = json.loads((tmp_path / "correct" / "metrics.jsonl").read_text().splitlines()[0])
    assert record["benchmark"] == "neqa" and record["metrics"]["n"] == NEQA_ROWS


def test_the_check_reads_top_tokens_at_the_continuations_first_token():
    """Hand-made answers: the same top token and value at each continuation's first token is one
    distribution (aligned); another top token, or the same one with another value, is not; no top
    tokens at all leaves it unknown."""
    def answer(context, continuation, top):
        tokens = ["The", " opposite", continuation]
        return {"choices": [{"index": 0, "logprobs": {
            "tokens": tokens, "token_logprobs": [None, -3.0, -1.5], "text_offset": [0, 3, len(context)],
            "top_logprobs": [None, {" opposite": -3.0}, top]}}]}

    context = "The opposite"
    same = [answers.continuation_top(answer(context, c, {" of": -0.5}), context, c) for c in (" of", " is")]
    assert same == [(" of", -0.5), (" of", -0.5)] and answers.misaligned(same) is False
    other = answers.continuation_top(answer(context, " is", {" the": -0.5}), context, " is")
    assert answers.misaligned([same[0], other]) is True
    assert answers.misaligned([same[0], (" of", -0.7)]) is True
    assert answers.misaligned([same[0], None]) is None


@pytest.mark.parametrize("fixture, accepted, said", [
    ("llama_cpp_python.json", False, "one position off"),
    ("transformers_serve.json", False, "returns no prompt log-probabilities"),
])
def test_replayed_real_servers(fixture, accepted, said, neqa_world, tmp_path, capsys):
    """Answers to the checks, replayed: llama-cpp-python's (one position off; SYNTHETIC, see the
    fixture's note) is refused with one line naming what it does; `transformers serve`'s (captured
    from the real server; no echo) is refused as a server without prompt log-probabilities."""
    path = FIXTURES / fixture
    with Replay(path) as server:
        code = _served(neqa_world["llama"], server.url, tmp_path / "out")
    assert (code == 0) is accepted
    assert said in _error(capsys)
