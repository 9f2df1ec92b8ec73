"""A server that misbehaves gets a clear error, never a wrong number, a hang or a leaked key
(issue 36, served transport and answers; issue 40, stopping a served card).

The servers are STAND-INs on 127.0.0.1 (tests/scripted_server.py: scripted answers from a made-up
tokenizer, no model), so every fault is exact and each test takes seconds. Each card test asserts
the exit code, one ``error:`` line and no traceback, and where a retry recovers, numbers equal to a
clean run's."""

from __future__ import annotations

import email.utils
import json
import math
import os
import signal
import sqlite3
import time
from pathlib import Path

import pytest

from negtrain.cli import main
from negtrain.serving import http
from negtrain.serving.answers import LOGPROB_SLACK, Malformed, choice, continuation_logprob, usage
from scripted_server import Scripted, logprob_of, tokens_of, well_formed

KEY = "sk-bearer-canary-0123456789ABCDEFabcdef"
#: whether the server echoes log-probabilities, whether they belong to their tokens, and two of the
#: run's own requests spot-checked, each asked twice (negtrain/serving/openai.py spot_check)
CHECKS = 1 + 3 + 2 * 2
TINAD_REQUESTS = CHECKS + 24 * 2  # the checks, then one per example and label


@pytest.fixture()
def env(lm_env, monkeypatch):
    """lm_world's data (TINAD's fixture), and the API key in a variable whose name looks like no
    secret's, so only --api-key-env makes it one."""
    monkeypatch.setenv("LLM_BEARER", KEY)
    return lm_env


def card(url: str, out: Path, *extra: str, benchmarks: str = "tinad", model: str = "served-model") -> int:
    return main(["evaluate", "--model", model, "--backend", "openai", "--base-url", url, "--benchmarks", benchmarks,
                 "--out", str(out), "--concurrency", "1", *extra])


def one_error(err: str) -> str:
    """The one error line of a failed command (and no traceback)."""
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err
    assert "Traceback" not in err, err
    return lines[0]


def records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def numbers(out: Path) -> tuple:
    """What a card scored: each benchmark's metrics and its predictions file."""
    return ([r["metrics"] for r in records(out)],
            sorted((p.name, p.read_bytes()) for p in (out / "predictions").iterdir()))


def assert_no_key(folder: Path, *streams: str) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
    for text in streams:
        assert KEY not in text


@pytest.fixture()
def clean(env, tmp_path):
    """A clean run's numbers, for the cases a retry recovers from."""
    with Scripted() as server:
        assert card(server.url, tmp_path / "clean") == 0
        assert len(server.requests) == TINAD_REQUESTS
    return numbers(tmp_path / "clean")


# ---- answers: the schema of each endpoint's answer (case 6, 7, 8, 12, 18, 19) ------------------

def echoed(context: str, continuation: str, **change) -> dict:
    out = well_formed({"echo": True, "prompt": context + continuation, "model": "m"})
    out["choices"][0]["logprobs"].update(change)
    return out


def test_the_continuations_tokens_are_summed_by_hand_count():
    out = echoed("Is it true? Answer:", " no way")
    lp, n, greedy = continuation_logprob(out, "Is it true? Answer:", " no way")
    assert (lp, n, greedy) == (pytest.approx(logprob_of(" no") + logprob_of(" way")), 2, True)


def test_an_off_by_one_text_offset_is_refused():
    """Offsets one character late (as a server counting bytes reports them after a non-ASCII
    character in the context): the tokens picked would be the context's last word and the
    continuation's first, summing three tokens for two; refused, since they do not spell it."""
    context, continuation = "Ist es wahr? Antwort:", " no way"
    out = echoed(context, continuation)
    offsets = out["choices"][0]["logprobs"]["text_offset"]
    out["choices"][0]["logprobs"]["text_offset"] = [0] + [o + 1 for o in offsets[1:]]
    with pytest.raises(Malformed, match="spell|do not split"):
        continuation_logprob(out, context, continuation)


def test_byte_offsets_are_recognised_and_the_right_tokens_summed():
    """A context holding 'é' (two UTF-8 bytes): offsets counted in bytes are one past the
    characters' after it; recognised as bytes because the tokens they pick spell the continuation."""
    context, continuation = "Café? Answer:", " not this"
    out = echoed(context, continuation)
    out["choices"][0]["logprobs"]["text_offset"] = [len((context + continuation)[:o].encode()) for o, _ in tokens_of(context + continuation)] + [
        len((context + continuation).encode())]
    lp, n, _ = continuation_logprob(out, context, continuation)
    assert n == 2 and lp == pytest.approx(logprob_of(" not") + logprob_of(" this"))  # hand count: 2 tokens, not 3


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, 5.0, 1e-3])
def test_a_log_probability_must_be_finite_and_at_most_zero(bad):
    out = echoed("Q? A:", " yes")
    out["choices"][0]["logprobs"]["token_logprobs"][-2] = bad  # the continuation's token
    with pytest.raises(Malformed, match="not a log-probability"):
        continuation_logprob(out, "Q? A:", " yes")
    out["choices"][0]["logprobs"]["token_logprobs"][-2] = LOGPROB_SLACK / 2  # float rounding of a near-certain token
    assert continuation_logprob(out, "Q? A:", " yes")[0] == LOGPROB_SLACK / 2


def test_choices_are_matched_by_index():
    right = {"index": 0, "text": "right"}
    assert choice({"choices": [{"index": 1, "text": "wrong"}, right]}) is right
    assert choice({"choices": [{"text": "alone"}]})["text"] == "alone"
    for bad in ({"choices": [{"index": 1, "text": "x"}]}, {"choices": [{"index": 0}, {"index": 0}]}, {"choices": [{"text": "a"}, {"text": "b"}]}):
        with pytest.raises(Malformed):
            choice(bad)


def test_empty_tokens_do_not_inflate_the_token_count():
    context, continuation = "Q? A:", " yes"
    out = echoed(context, continuation)
    lps = out["choices"][0]["logprobs"]
    at = len(lps["tokens"]) - 2  # the continuation's token; an empty special token before it
    for name, value in (("tokens", ""), ("token_logprobs", -0.5), ("text_offset", len(context)), ("top_logprobs", None)):
        lps[name].insert(at, value)
    lp, n, _ = continuation_logprob(out, context, continuation)
    assert n == 1 and lp == pytest.approx(-0.5 + logprob_of(" yes"))


#: A usage block that is no count only feeds the card's token counts: unknown (0), not an error
#: (issue 47; before, it failed the whole card).
ODD_USAGE = {
    "usage: 'n/a'": lambda o: o.update(usage="n/a"),
    "usage.prompt_tokens: 'many'": lambda o: o["usage"].update(prompt_tokens="many"),
    "usage.prompt_tokens: 2.5": lambda o: o["usage"].update(prompt_tokens=2.5),
    "negative token count": lambda o: o["usage"].update(completion_tokens=-3),
}


@pytest.mark.parametrize("case", sorted(ODD_USAGE))
def test_an_odd_usage_block_is_an_unknown_count(case):
    out = echoed("Q? A: now", " yes")
    ODD_USAGE[case](out)
    counts = usage(out)
    known = usage(echoed("Q? A: now", " yes"))
    assert known == {"tokens_in": 4, "tokens_out": 1}  # four whitespace-led words; one generated
    for name, field in (("tokens_in", "prompt_tokens"), ("tokens_out", "completion_tokens")):
        odd = case.startswith("usage:") or field in case or (case == "negative token count" and field == "completion_tokens")
        assert counts[name] == (0 if odd else known[name])


MALFORMED = {  # case 12's table, and its neighbours
    "choices as a dict": lambda o: o.update(choices={"0": o["choices"][0]}),
    "text_offset holding nulls": lambda o: o["choices"][0]["logprobs"].update(text_offset=[None] * len(o["choices"][0]["logprobs"]["text_offset"])),
    "text_offset holding strings": lambda o: o["choices"][0]["logprobs"].update(text_offset=[str(x) for x in o["choices"][0]["logprobs"]["text_offset"]]),
    "token_logprobs shorter than text_offset": lambda o: o["choices"][0]["logprobs"]["token_logprobs"].pop(),
    "string log-probabilities": lambda o: o["choices"][0]["logprobs"].update(token_logprobs=[None, "-1.0", "-2.0", "-0.5", "-1"]),
    "top_logprobs not objects": lambda o: o["choices"][0]["logprobs"].update(top_logprobs=[None, 1, 2, 3, 4]),
    "no choices": lambda o: o.update(choices=[]),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_every_malformed_answer_is_one_clean_error(case):
    out = echoed("Q? A: now", " yes")  # five tokens
    MALFORMED[case](out)
    with pytest.raises(Malformed):
        continuation_logprob(out, "Q? A: now", " yes")


def test_an_answer_that_is_no_object_is_malformed():
    for out in ([], [{"index": 0}], "text", None):
        with pytest.raises(Malformed, match="not a JSON object"):
            choice(out)


def test_chat_message_null_is_malformed():
    from negtrain.serving.answers import chat_text

    with pytest.raises(Malformed, match="no message"):
        chat_text({"choices": [{"index": 0, "message": None}]})
    with pytest.raises(Malformed, match="no text content"):
        chat_text({"choices": [{"index": 0, "message": {"content": None, "tool_calls": []}}]})


def test_retry_after_in_seconds_and_as_an_http_date():
    now = time.time()
    assert http.retry_after("3") == 3.0 and http.retry_after("-4") == 0.0 and http.retry_after(None) is None
    assert http.retry_after(email.utils.formatdate(now + 30, usegmt=True), now) == pytest.approx(30, abs=1)
    assert http.retry_after(email.utils.formatdate(now - 30, usegmt=True), now) == 0.0
    assert http.retry_after("soon") is None and http.retry_after("nan") is None


def _trickle_body(handler) -> None:
    """Headers at once, then a body of 100 bytes one byte every half second."""
    handler.send_response(200)
    handler.send_header("Content-Length", "100")
    handler.end_headers()
    for _ in range(100):
        handler.wfile.write(b" ")
        handler.wfile.flush()
        time.sleep(0.5)


def test_the_deadline_covers_a_trickling_body_too():
    with Scripted(lambda n, path, body: _trickle_body) as server:
        start = time.monotonic()
        with pytest.raises(http.Transient, match="no complete answer within 1 s"):
            http.post(server.url + "/completions", b"{}", {}, 1.0, http.InFlight())
        assert time.monotonic() - start < 10  # generous: the body alone would take 50 s


def test_an_http_proxy_from_the_environment_is_used(monkeypatch):
    """HTTP_PROXY is honoured as urllib honours it: the request goes to the proxy, with its
    absolute URL (the stand-in plays the proxy and records the request line's target)."""
    for name in ("NO_PROXY", "no_proxy", "HTTP_PROXY", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    with Scripted() as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url.removesuffix("/v1"))
        body = json.dumps({"model": "m", "prompt": "a b", "max_tokens": 1}).encode()
        reply = http.post("http://models.invalid/v1/completions", body, {"Content-Type": "application/json"}, 5, http.InFlight())
    assert reply.status == 200 and [r["path"] for r in proxy.requests] == ["http://models.invalid/v1/completions"]


# ---- the card against misbehaving servers -------------------------------------------------------

def test_a_redirect_to_another_host_gets_no_key(env, tmp_path, capsys):
    """Case 1: a 302 (and a 301) to a second local server: that server receives nothing, so no
    Authorization header; one error line says why."""
    with Scripted() as second:
        for status in (302, 301):
            def redirect(n, path, body, status=status):
                return (status, b"", {"Location": second.url + path})

            with Scripted(redirect) as first:
                code = card(first.url, tmp_path / f"r{status}", "--api-key-env", "LLM_BEARER")
            err = capsys.readouterr().err
            assert code == 2
            line = one_error(err)
            assert f"HTTP {status}" in line and "redirects to" in line and "--base-url" in line
            assert [r["auth"] for r in first.requests] == [f"Bearer {KEY}"]  # the probe, not retried
        assert second.requests == []


def _trickle(handler) -> None:
    """A status line and headers one byte a second (never finished)."""
    for byte in b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Slow: " + b"a" * 100:
        handler.wfile.write(bytes([byte]))
        handler.wfile.flush()
        time.sleep(1)


def test_a_trickling_server_ends_within_the_deadline(env, tmp_path, capsys):
    """Case 4: a byte a second resets no read timeout here: --timeout 3 bounds each whole request,
    so the card ends within (retries + 1) x timeout plus the backoff, non-zero, one line."""
    retries, timeout = 1, 3
    with Scripted(lambda n, path, body: _trickle) as server:
        start = time.monotonic()
        code = card(server.url, tmp_path / "t", "--timeout", str(timeout), "--retries", str(retries))
        took = time.monotonic() - start
    err = capsys.readouterr().err
    assert code == 2 and len(server.requests) == retries + 1
    assert "no complete answer within 3 s" in one_error(err)
    # A generous bound, which is the point of the test: (1 + 1) x 3 s + 0.63 s of backoff, plus
    # the card's own seconds; without the deadline it would run for 100 s a request.
    assert took < (retries + 1) * timeout + 0.63 + 20


def _cut_off(handler) -> None:
    """Promises 1,000 bytes, sends 10, closes (IncompleteRead)."""
    handler.send_response(200)
    handler.send_header("Content-Length", "1000")
    handler.end_headers()
    handler.wfile.write(b'{"choices"')
    handler.close_connection = True


def _garbage_status(handler) -> None:
    handler.wfile.write(b"HTCPCP/9 I'm a teapot and this is no status line\r\n\r\n")
    handler.close_connection = True


def _dropped(handler) -> None:
    handler.close_connection = True  # closes without a byte


def test_cut_off_garbled_and_dropped_answers_are_retried_with_the_same_numbers(clean, tmp_path):
    """Case 11: IncompleteRead, a bad status line and a dropped connection are transient: retried,
    and the card's numbers equal a clean run's."""
    faults = {2: _cut_off, 5: _garbage_status, 9: _dropped, 12: "not json <html>"}

    def script(n, path, body):
        fault = faults.get(n)
        if fault is None:
            return well_formed(body)
        return (200, fault.encode(), {}) if isinstance(fault, str) else fault

    with Scripted(script) as server:
        assert card(server.url, tmp_path / "c", "--retries", "2") == 0
        assert len(server.requests) == TINAD_REQUESTS + len(faults)
    assert numbers(tmp_path / "c") == clean


def test_retry_after_as_an_http_date_is_honoured(clean, tmp_path):
    """Case 17: a 429 whose Retry-After is a date two seconds ahead: the retry waits for it."""
    def script(n, path, body):
        if n == 3:
            return (429, {"error": {"message": "slow down"}}, {"Retry-After": email.utils.formatdate(time.time() + 2, usegmt=True)})
        return well_formed(body)

    with Scripted(script) as server:
        assert card(server.url, tmp_path / "c") == 0
        gap = server.requests[3]["at"] - server.requests[2]["at"]
    assert gap >= 0.9  # the date has one-second resolution: more than one second ahead, at least
    assert numbers(tmp_path / "c") == clean


def test_choices_out_of_order_score_the_one_with_index_0(clean, tmp_path):
    """Case 8: the answer's choices in reverse order, the first a decoy: the same numbers."""
    def script(n, path, body):
        out = well_formed(body)
        decoy = json.loads(json.dumps(out["choices"][0]))
        decoy["index"] = 1
        decoy["logprobs"]["token_logprobs"] = [None] + [-9.0] * (len(decoy["logprobs"]["token_logprobs"]) - 1)
        out["choices"] = [decoy, out["choices"][0]]
        return out

    with Scripted(script) as server:
        assert card(server.url, tmp_path / "c") == 0
    assert numbers(tmp_path / "c") == clean


def _echoing_key(body: dict) -> dict:
    """A 200 whose body is an error quoting the key, as a careless gateway answers."""
    return {"error": {"message": f"Invalid API key provided: Bearer {KEY}"}}


def test_a_malformed_answer_quoting_the_key_is_one_masked_error(env, tmp_path, capsys):
    """Cases 2 and 12: a 200 with an error body quoting the key, the key in a variable named
    LLM_BEARER: one error line naming the example, the key masked, nothing written holds it."""
    with Scripted(lambda n, path, body: well_formed(body) if n < CHECKS + 3 else _echoing_key(body)) as server:
        code = card(server.url, tmp_path / "c", "--api-key-env", "LLM_BEARER")
    printed = capsys.readouterr()
    assert code == 2
    line = one_error(printed.err)
    assert line.startswith("error: tinad/test/") and "malformed answer" in line and "Bearer ***" in line
    assert_no_key(tmp_path, printed.out, printed.err)


def test_allow_missing_lists_the_malformed_and_writes_no_key(env, tmp_path, capsys):
    """Case 2: with --allow-missing and --api-key-env LLM_BEARER, the failed examples are listed
    in card.md and metrics.jsonl and the rest scored; the key reaches no file (card.md,
    metrics.jsonl, parts/, the lock file) and no stream."""
    def script(n, path, body):
        return _echoing_key(body) if n in (CHECKS + 3, CHECKS + 4) else well_formed(body)

    with Scripted(script) as server:
        assert card(server.url, tmp_path / "c", "--api-key-env", "LLM_BEARER", "--allow-missing") == 0
    printed = capsys.readouterr()
    out = tmp_path / "c"
    record = records(out)[0]
    assert len(record["missing"]) == 2 and all("Bearer ***" in m for m in record["missing"])
    assert record["metrics"]["n"] == 24 - 1  # the 3rd and 4th after the checks: both labels of one example
    assert "## Missing" in (out / "card.md").read_text()
    assert list((out / "parts").glob("*.json")) and (out / ".negtrain.lock").exists()
    assert_no_key(tmp_path, printed.out, printed.err)


@pytest.mark.parametrize("case", ["text_offset holding strings", "choices as a dict", "token_logprobs shorter than text_offset"])
def test_a_malformed_answer_stops_the_card_with_one_line_naming_the_example(env, tmp_path, capsys, case):
    """Case 12 through a card: not retried (the server would answer the same), one error line."""
    def script(n, path, body):
        out = well_formed(body)
        if n >= CHECKS + 2:
            MALFORMED[case](out)
        return out

    with Scripted(script) as server:
        assert card(server.url, tmp_path / "c") == 2
        assert len(server.requests) == CHECKS + 2
    line = one_error(capsys.readouterr().err)
    assert line.startswith("error: tinad/test/") and "a malformed answer" in line


def test_a_nan_log_probability_is_one_error_not_an_index_error(env, tmp_path, capsys):
    """Case 6: NaN (and +5) accepted before, then an IndexError while writing."""
    for bad in ("NaN", "5.0"):
        def script(n, path, body, bad=bad):
            out = well_formed(body)
            if n == 3:
                out["choices"][0]["logprobs"]["token_logprobs"][-2] = float(bad)
            return out

        with Scripted(script) as server:
            code = card(server.url, tmp_path / bad, "--retries", "0")
        assert code == 2
        assert "not a log-probability" in one_error(capsys.readouterr().err)


def test_the_lock_file_records_no_secret(env, tmp_path, monkeypatch):
    """Case 3: the lock file records the command line; a token in --model (a URL's password and
    query token, or a known secret's value) is masked there."""
    hf_token = "hf_" + "Q" * 34
    monkeypatch.setenv("HF_TOKEN", hf_token)
    model = f"https://bob:pa55word-0123456789@models.example/m-{hf_token}?token=t0ken-abcdef&rev=main"
    monkeypatch.setattr("sys.argv", ["negtrain", "evaluate", "--model", model, "--out", str(tmp_path / "c")])
    with Scripted() as server:
        assert card(server.url, tmp_path / "c", model=model) == 0
    lock = (tmp_path / "c" / ".negtrain.lock").read_text()
    assert "evaluate --model https://***@models.example/m-***?token=***&rev=***" in lock  # every query value (issue 55)
    for secret in ("pa55word", hf_token, "t0ken-abcdef"):
        for path in (tmp_path / "c").rglob("*"):
            if path.is_file():
                assert secret.encode() not in path.read_bytes(), path


def test_an_unreadable_cache_row_is_asked_again(env, tmp_path, capsys):
    """Case 14: a cache row holding invalid JSON is a miss, said once; only its request is sent
    again, and the numbers are the first card's."""
    with Scripted() as server:  # one server for both cards: its address is part of the cache key
        assert card(server.url, tmp_path / "first") == 0
        cache = tmp_path / "first" / "responses.sqlite"
        with sqlite3.connect(cache) as db:
            db.execute("UPDATE answers SET answer = '{not json' WHERE rowid IN (SELECT rowid FROM answers LIMIT 2 OFFSET 5)")
        capsys.readouterr()
        before = len(server.requests)
        assert card(server.url, tmp_path / "again", "--cache", str(cache)) == 0
        # the two rows, and the checks every run asks again (the alignment check, the spot checks)
        assert len(server.requests) - before == 2 + CHECKS - 1
    out = capsys.readouterr().out
    assert out.count("a row cannot be read") == 1
    assert numbers(tmp_path / "again") == numbers(tmp_path / "first")


def test_an_incomplete_utf8_tail_is_recorded(env, tmp_path):
    """A generation whose last character the server could not finish (U+FFFD) is kept as sent and
    named in the metrics line."""
    with Scripted(lambda n, path, body: well_formed(body, "True caf\ufffd" if n == 2 else "False")) as server:
        assert card(server.url, tmp_path / "c", "--strategy", "generate") == 0
    record = records(tmp_path / "c")[0]
    assert len(record["incomplete_utf8"]) == 1 and "incomplete UTF-8" in record["note"]


def test_extra_body_is_sent_and_cannot_undo_greedy(env, tmp_path, capsys):
    with Scripted(lambda n, path, body: well_formed(body, "no")) as server:
        assert card(server.url, tmp_path / "c", "--extra-body", '{"repeat_penalty": 1.0, "top_k": 1}', "--strategy", "generate") == 0
        sent = [r["body"] for r in server.requests]
    assert all(b["repeat_penalty"] == 1.0 and b["top_k"] == 1 and b["temperature"] == 0 and b["top_p"] == 1 for b in sent)
    assert "extra_body:\n" in (tmp_path / "c" / "recipe.yaml").read_text()
    for bad, said in (('{"temperature": 0.7}', "set by negtrain itself"), ("[1]", "a JSON object"), ("{", "not JSON")):
        assert card("http://127.0.0.1:9/v1", tmp_path / "x", "--extra-body", bad) == 2
        assert said in one_error(capsys.readouterr().err)


# ---- stopping a served card (issue 40, item 2) ----------------------------------------------------

@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_stops_a_served_card_at_once_and_the_rerun_continues(env, tmp_path, capsys, signum, code):
    """A slow server (0.4 s an answer): the signal, sent once 4 rows have arrived, ends the card
    within a few seconds with 128 + the signal, and no request arrives after it; the rerun sends
    only what was not answered."""
    sent_at: list[float] = []

    def script(n, path, body):
        if n == CHECKS + 4:
            sent_at.append(time.monotonic())
            os.kill(os.getpid(), signum)  # to this process, whose main thread runs the card
        return well_formed(body)

    out = tmp_path / "c"
    with Scripted(script, delay=0.4) as server:
        assert card(server.url, out, "--concurrency", "3") == code
        ended = time.monotonic()
        time.sleep(1.5)  # any request the card still sent would arrive by now
        arrived = [r["at"] for r in server.requests]
        assert f"stopped by {signal.Signals(signum).name}" in capsys.readouterr().err
        assert ended - sent_at[0] < 5
        # Requests already sent when the signal came were abandoned; none arrived after it.
        assert [at for at in arrived if at > sent_at[0] + 0.05] == []
        with sqlite3.connect(out / "responses.sqlite") as db:
            cached = db.execute("SELECT COUNT(*) FROM answers").fetchone()[0]
        # Only requests sent before the signal (the last ones may race it by a few ms, as above) are
        # answered and kept; how many of them were answered before the stop depends on timing.
        sent_before = len([at for at in arrived if at <= sent_at[0] + 0.05])
        assert 0 < cached <= sent_before
        # The rerun, against the same server (its address is part of the card and the cache key).
        server.delay, server.script = 0.0, lambda n, path, body: well_formed(body)
        before = len(server.requests)
        assert card(server.url, out, "--concurrency", "3") == 0
        # (the first check is cached; the alignment check and the spot checks are asked again, and
        # the verdict row the first run recorded saves no request)
        assert len(server.requests) - before == TINAD_REQUESTS - (cached - 1)


@pytest.mark.slow
def test_sigterm_ends_a_served_card_process_with_143(env, tmp_path):
    """The same as its own process (as a scheduler stops it): the process exits, 143, with no
    request arriving after SIGTERM and nothing left waiting on the requests that were in flight.
    (Slow: a process of its own imports torch; on a loaded machine its exit alone, tearing the
    imported modules down, takes seconds, so the bound here is generous and the requests counted
    by the server are what tells a stop from a card that kept sending.)"""
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    environ = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    box: dict = {}

    def script(n, path, body):
        if n == 8:
            box["at"] = time.monotonic()
            box["proc"].send_signal(signal.SIGTERM)
        return well_formed(body)

    with Scripted(script, delay=0.4) as server:
        box["proc"] = proc = subprocess.Popen(
            [sys.executable, "-m", "negtrain", "evaluate", "--model", "served-model", "--backend", "openai", "--base-url", server.url,
             "--benchmarks", "tinad", "--out", str(tmp_path / "c"), "--concurrency", "3"],
            env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _, err = proc.communicate(timeout=300)
        ended = time.monotonic()
        time.sleep(1)
        arrived = [r["at"] for r in server.requests]
    assert proc.returncode == 143, err
    assert ended - box["at"] < 60
    assert "stopped by SIGTERM" in err and "Traceback" not in err
    assert [at for at in arrived if at > box["at"] + 0.05] == []
