"""The served alignment check stays checked (issue 55): asked on every run, never taken from a
cache keyed by the URL; spot-checked on the run's own log-likelihood requests (each asked as the
echoed context + continuation and as the continuation of its context: the two must name the same
distribution); top tokens that are not finite, contradict the server's own log-probabilities or
name one constant token are refused. The verdict is recorded under what answered (the model the
server names and a digest of its probe answers), not the URL.

Against the stand-in server on the tiny Llama (tests/served_standin.py), with its misbehaving
variants: one position off after the probe, a constant top token, NaN tops."""

from __future__ import annotations

import json

import pytest

from served_standin import StandIn
from test_served_alignment import NEQA_ROWS, _error, _served, neqa_world  # noqa: F401 - the fixture

#: The requests of a NeQA card: the log-probability check, the three alignment probes, two
#: spot-checked requests asked twice each, then two choices per row.
CHECKS = 1 + 3 + 2 * 2


def test_a_server_off_after_the_probe_is_refused_on_the_runs_own_requests(neqa_world, tmp_path, capsys):  # noqa: F811
    model = neqa_world["llama"]
    with StandIn(model, shifted_after_probe=True) as server:
        assert _served(model, server.url, tmp_path / "c") == 2
        err = _error(capsys)
        assert server.answered == 1 + 3 + 2  # the checks, then the first spot check: no NeQA row asked
    assert "passed the alignment check but is off on this run's prompts" in err and "--backend transformers" in err
    assert not (tmp_path / "c" / "metrics.jsonl").exists()


def test_another_server_at_the_same_address_is_checked_again(neqa_world, tmp_path, capsys):  # noqa: F811
    """With a shared --cache, the second run's server (same URL, same model name, now one position
    off) is asked the alignment check again and refused, though every answer is cached."""
    model, cache = neqa_world["llama"], tmp_path / "shared.sqlite"
    with StandIn(model) as server:
        assert _served(model, server.url, tmp_path / "first", "--cache", str(cache)) == 0
        assert server.answered == CHECKS + NEQA_ROWS * 2
        assert _served(model, server.url, tmp_path / "again", "--cache", str(cache)) == 0
        assert server.answered == CHECKS + NEQA_ROWS * 2 + (CHECKS - 1)  # checked again; the answers cached
        server.shifted = True
        assert _served(model, server.url, tmp_path / "shifted", "--cache", str(cache)) == 2
    assert "one position off" in _error(capsys)
    assert not (tmp_path / "shifted" / "metrics.jsonl").exists()


@pytest.mark.parametrize("variant, said, asked", [
    ({"constant_top": " the"}, "as the most probable token at every position of every answer", 1 + 3),
    ({"nan_tops": True}, "a top_logprobs value is not finite", 1),  # refused at the first answer
])
def test_tops_that_describe_no_distribution_are_refused(neqa_world, tmp_path, capsys, variant, said, asked):  # noqa: F811
    model = neqa_world["llama"]
    with StandIn(model, **variant) as server:
        assert _served(model, server.url, tmp_path / "c") == 2
        assert server.answered == asked
    err = _error(capsys)
    assert said in err and "neqa/test need them" in err
    assert not (tmp_path / "c" / "metrics.jsonl").exists()


def test_the_checks_read_the_tops_as_a_distribution():
    from negtrain.serving import answers

    def answer(tokens, values, tops):
        offsets = [sum(len(t) for t in tokens[:i]) for i in range(len(tokens))]
        return {"choices": [{"index": 0, "logprobs": {"tokens": tokens, "token_logprobs": values, "text_offset": offsets,
                                                      "top_logprobs": tops}}]}

    nan = float("nan")
    assert answers.misaligned([(" cold", nan), (" cold", nan)]) is True  # NaN agrees with nothing
    with pytest.raises(answers.Malformed, match="not finite"):
        answers.continuation_top(answer(["A", " b"], [None, -1.0], [None, {" b": nan}]), "A", " b")
    contradicting = answer(["A", " b", " c"], [None, -0.2, -1.0], [None, {" x": -0.9}, {" c": -1.0}])
    assert "' b' at -0.200 is more probable than the most probable token named there, ' x' at -0.900" in answers.tops_contradiction(contradicting)
    constant = [answer(["A", " b", " c"], [None, -1.0, -2.0], [None, {" the": -0.01}, {" the": -0.01}]) for _ in range(2)]
    assert answers.constant_top(constant) == " the"
    varied = answer(["A", " b", " c"], [None, -1.0, -2.0], [None, {" b": -1.0}, {" c": -2.0}])
    assert answers.constant_top([varied, varied]) is None and answers.tops_contradiction(varied) is None


def test_the_verdict_is_keyed_by_what_answered_not_the_url():
    from negtrain.serving.openai import OpenAIBackend, ServerSettings

    def key(url, served, tops):
        backend = OpenAIBackend(ServerSettings(url, "m"), None, "openai")
        return backend.verdict_key([{"model": served}], tops)

    tops = [(" is", -0.1)] * 3
    assert key("http://a/v1", "llama-7b", tops) == key("http://b:9/v1", "llama-7b", tops)
    assert key("http://a/v1", "llama-7b", tops) != key("http://a/v1", "other-model", tops)
    assert key("http://a/v1", "llama-7b", tops) != key("http://a/v1", "llama-7b", [(" is", -0.2)] * 3)
    assert json.dumps(key("http://a/v1", "m", tops)).count("http://a") == 0
