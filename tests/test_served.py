"""Served models (`evaluate --model NAME --backend openai --base-url URL`): a real local server
(`transformers serve`) for generation, and a protocol STAND-IN (tests/served_standin.py) for the
log-likelihood path, which no server here offers. The served card's predictions equal the hf
backend's on the same tiny model and rows; a killed served card resumes sending only what was not
answered; 429s are retried; a request that keeps failing stops the run naming its example; the
API key reaches no file."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from negtrain.cli import main
from served_standin import StandIn
from tiny_models import cut_world

ROOT = Path(__file__).resolve().parent.parent
HF = ["--trainer.torch_threads=1", "--trainer.precision=32-true", "--data.eval_batch_size=8"]
KEY = "sk-canary-0123456789abcdefABCDEF"
SCONE_ROWS = 3  # per condition file: 18 examples, 3 complete contrast sets
CONDAQA_ROWS = 6
#: Requests a card sends a server before it uses it for log-likelihoods: whether it echoes prompt
#: log-probabilities (one), whether they belong to their tokens (three; tests/test_served_alignment.py),
#: and two of its own requests spot-checked, each asked twice (tests/test_served_alignment_checks.py).
CHECKS = 1 + 3 + 2 * 2


@pytest.fixture()
def small(lm_env, tmp_path, monkeypatch):
    """The lm_world data with ScoNe's and CondaQA's test splits cut to a few rows (read from the
    mirror, written here), so a served card and an hf card score every row of the same split."""
    data = cut_world(lm_env["data"], tmp_path / "data", SCONE_ROWS, CONDAQA_ROWS)
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(data))
    return lm_env


def _records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def _stable(record: dict) -> dict:
    """A metrics line without what differs between two runs of the same card: time, and how many
    answers came from the cache."""
    return {k: v for k, v in record.items() if k not in ("eval_seconds", "requests")}


def _predictions_named(out: Path, name: str) -> list[dict]:
    return [json.loads(line) for line in (out / "predictions" / name).read_text().splitlines()]


def _predictions(out: Path, benchmark: str) -> list[dict]:
    """A card's prediction lines for BENCHMARK's test split."""
    return _predictions_named(out, f"{benchmark}-test-validate.jsonl")


def test_a_generating_strategy_through_the_standin_equals_hf(small, tmp_path):
    """ScoNe under conditional_q: greedy text read by the yes/no answer rule, the same
    responses and predictions through a server as in process."""
    model = small["llama"]
    _hf_card(model, tmp_path / "hf", "scone", "--strategy", "conditional_q")
    with StandIn(model) as server:
        assert _served(model, server.url, tmp_path / "served", "scone", "--strategy", "conditional_q") == 0
        assert server.answered == 18  # one generation per example, no log-probability check
    hf, served = (_predictions(tmp_path / d, "scone") for d in ("hf", "served"))
    assert [(r["id"], r["prediction"], r["response"], r["prompt"]) for r in served] == [(r["id"], r["prediction"], r["response"], r["prompt"]) for r in hf]
    assert _records(tmp_path / "served")[0]["metrics"] == _records(tmp_path / "hf")[0]["metrics"]


def test_a_recipe_with_the_openai_backend_is_scored_by_a_card_only(small, tmp_path, capsys):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"description: x\nmodel: {{name: {small['llama']}, family: causal_lm}}\ndata: {{eval: [{{benchmark: tinad, split: test}}]}}\n"
                      "evaluation: {backend: openai, server: {base_url: 'http://127.0.0.1:9/v1'}}\n")
    assert main(["validate", "--recipe", str(recipe), "--output-dir", str(tmp_path / "v")]) == 2
    assert "a served model is scored by a report card" in capsys.readouterr().err


def _hf_card(model, out, benchmarks, *extra):
    assert main(["evaluate", "--model", str(model), "--family", "causal_lm", "--benchmarks", benchmarks, "--out", str(out), *HF, *extra]) == 0


def _served(model_name, url, out, benchmarks, *extra) -> int:
    return main(["evaluate", "--model", str(model_name), "--backend", "openai", "--base-url", url, "--benchmarks", benchmarks,
                 "--out", str(out), *extra])


def test_loglikelihood_through_the_standin_equals_hf(small, tmp_path):
    """ScoNe and TINAD, each label's verbalizer scored from echoed prompt log-probabilities: the
    predictions and every metric equal the in-process backend's."""
    model = small["llama"]
    _hf_card(model, tmp_path / "hf", "scone,tinad")
    with StandIn(model) as server:
        assert _served(model, server.url, tmp_path / "served", "scone,tinad") == 0
        sent = server.answered
        usage = server.prompt_tokens
    for name in ("scone", "tinad"):
        assert _predictions(tmp_path / "served", name) == _predictions(tmp_path / "hf", name)
    hf, served = _records(tmp_path / "hf"), _records(tmp_path / "served")
    for a, b in zip(hf, served, strict=False):
        assert a["metrics"].keys() == b["metrics"].keys()
        for k, v in a["metrics"].items():
            assert v == pytest.approx(b["metrics"][k], abs=1e-9) or (v is None and b["metrics"][k] is None), k
    # The checks (log-probabilities offered: one request; aligned: three; two spot checks: four), then
    # one request per example and label: 18 ScoNe rows x 2 labels + 24 TINAD x 2.
    assert sent == CHECKS + 18 * 2 + 24 * 2
    assert served[0]["requests"] == {"sent": 36, "cached": 0, "tokens_in": served[0]["requests"]["tokens_in"], "tokens_out": 36}
    # tokens_in is the server's own count (usage.prompt_tokens), summed over each benchmark's requests
    # (the checks, sent first, are neither benchmark's).
    assert served[0]["requests"]["tokens_in"] + served[1]["requests"]["tokens_in"] == sum(usage[CHECKS:]) > 0
    assert "## Requests" in (tmp_path / "served" / "card.md").read_text()


def _card_command(model, url, out, cache=None) -> list[str]:
    return [sys.executable, "-m", "negtrain", "evaluate", "--model", str(model), "--backend", "openai", "--base-url", url,
            "--benchmarks", "scone,tinad", "--out", str(out), "--concurrency", "1", "--api-key-env", "CANARY_API_KEY",
            *(["--cache", str(cache)] if cache else [])]


def test_served_card_killed_midway_resumes_sending_only_what_was_unanswered(small, tmp_path, monkeypatch):
    model = small["llama"]
    monkeypatch.setenv("CANARY_API_KEY", KEY)
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    with StandIn(model) as server:
        assert _served(model, server.url, tmp_path / "whole", "scone,tinad", "--api-key-env", "CANARY_API_KEY", "--concurrency", "1") == 0
        total = server.answered
        assert all(a == f"Bearer {KEY}" for a in server.auth)
        # The same card in another process, killed (SIGKILL) by the server after its 25th answer:
        # inside ScoNe, its first benchmark.
        server.answered = 0
        out = tmp_path / "killed"
        proc = subprocess.Popen(_card_command(model, server.url, out), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        server.on_request = lambda n: os.kill(proc.pid, signal.SIGKILL) if n == 25 else None
        proc.communicate(timeout=300)
        assert proc.returncode == -signal.SIGKILL
        server.on_request = None
        assert not (out / "metrics.jsonl").exists()
        import sqlite3

        with sqlite3.connect(out / "responses.sqlite") as db:
            cached = db.execute("SELECT COUNT(*) FROM answers").fetchone()[0]
        # Answers are committed in batches (serving/cache.py): the kill loses the open batch's,
        # keeps every committed one, and the rerun asks again only what is not in the file.
        assert 0 <= cached <= 25
        server.answered = 0
        rerun = subprocess.run(_card_command(model, server.url, out), env=env, capture_output=True, text=True, timeout=300)
        assert rerun.returncode == 0, rerun.stderr
        # Only the unanswered requests were sent again, and the checks every run asks (the cached
        # rows: the first check's answer, the alignment verdict's record, which saves no request,
        # and the committed answers).
        assert server.answered == total - (cached - 1)
    whole = tmp_path / "whole"
    assert [_stable(r) for r in _records(out)] == [_stable(r) for r in _records(whole)]
    for name in ("scone", "tinad"):
        assert (out / "predictions" / f"{name}-test-validate.jsonl").read_bytes() == (whole / "predictions" / f"{name}-test-validate.jsonl").read_bytes()
    assert (out / "recipe.yaml").read_bytes() == (whole / "recipe.yaml").read_bytes()
    # The canary key is in no file the cards wrote (recipe.yaml names only its variable), nor printed.
    for path in [*out.rglob("*"), *whole.rglob("*")]:
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
    assert KEY not in rerun.stdout + rerun.stderr
    assert "key_env: CANARY_API_KEY" in (out / "recipe.yaml").read_text()


def test_429_is_retried_and_500_stops_naming_the_example(small, tmp_path, capsys):
    model = small["llama"]
    with StandIn(model, fail=[429, 429]) as server:
        assert _served(model, server.url, tmp_path / "a", "tinad", "--concurrency", "1") == 0
        assert server.refused == 2 and server.answered == CHECKS + 48
    with StandIn(model, always=500) as server:
        code = _served(model, server.url, tmp_path / "b", "condaqa", "--retries", "1", "--model.max_new_tokens=4", "--concurrency", "1")
        err = capsys.readouterr().err
        assert code == 2 and server.refused == 2
        assert "\nerror: condaqa/test/" in "\n" + err and "failed after 1 retries" in err and "HTTP 500" in err and "stand-in says 500" in err
    # --allow-missing scores what was answered (nothing here) and lists the missing requests.
    with StandIn(model, fail=[500, 500]) as server:
        code = _served(model, server.url, tmp_path / "c", "condaqa", "--retries", "1", "--allow-missing", "--model.max_new_tokens=4", "--concurrency", "1")
        assert code == 0
    card = (tmp_path / "c" / "card.md").read_text()
    assert "## Missing" in card and card.count("- condaqa/test/") == 1
    record = _records(tmp_path / "c")[0]
    assert record["metrics"]["n"] == CONDAQA_ROWS - 1 and "--allow-missing" in record["note"]


def test_max_requests_stops_and_a_larger_budget_continues(small, tmp_path, capsys):
    model = small["llama"]
    with StandIn(model) as server:
        code = _served(model, server.url, tmp_path / "a", "tinad", "--max-requests", "5", "--concurrency", "1")
        assert code == 2 and "--max-requests 5 reached" in capsys.readouterr().err and server.answered == 5
        assert _served(model, server.url, tmp_path / "a", "tinad", "--max-requests", "100") == 0
        # no row asked twice; the checks every run asks again (all but the cached first one) are
        assert server.answered == 5 + (CHECKS - 1) + 48


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def transformers_serve(small):
    """`transformers serve` on the tiny Llama, on a free loopback port; stopped after the test."""
    pytest.importorskip("fastapi")
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "transformers.cli.transformers", "serve", str(small["llama"]), "--host", "127.0.0.1", "--port", str(port),
         "--device", "cpu", "--log-level", "error"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"transformers serve exited: {proc.stderr.read().decode()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("transformers serve did not open its port in 120 s")
    yield f"http://127.0.0.1:{port}/v1"
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=30)


@pytest.mark.slow
def test_generation_through_transformers_serve_equals_hf(small, transformers_serve, tmp_path, capsys):
    """CondaQA answers generated greedily by `transformers serve` equal the hf backend's; and a
    server without prompt log-probabilities is told apart before any work."""
    model = small["llama"]
    _hf_card(model, tmp_path / "hf", "condaqa", "--model.max_new_tokens=6")
    assert _served(model, transformers_serve, tmp_path / "served", "condaqa", "--model.max_new_tokens=6") == 0
    assert _predictions(tmp_path / "served", "condaqa") == _predictions(tmp_path / "hf", "condaqa")
    # ScoNe under a generating strategy (the answer rule reads yes/no in greedy text).
    _hf_card(model, tmp_path / "hf-q", "scone", "--strategy", "conditional_q")
    assert _served(model, transformers_serve, tmp_path / "served-q", "scone", "--strategy", "conditional_q") == 0
    served_q = _predictions(tmp_path / "served-q", "scone")
    assert [r["prediction"] for r in served_q] == [r["prediction"] for r in _predictions(tmp_path / "hf-q", "scone")]
    assert [r["response"] for r in served_q] == [r["response"] for r in _predictions(tmp_path / "hf-q", "scone")]
    code = _served(model, transformers_serve, tmp_path / "ll", "condaqa,scone")
    err = capsys.readouterr().err
    assert code == 2 and "returns no prompt log-probabilities" in err and "scone/test need them" in err
    assert "these can run: --benchmarks condaqa" in err and not (tmp_path / "ll" / "parts").exists()


def test_the_scone_nlg_protocol_through_the_standin_equals_hf(tmp_path, monkeypatch, one_thread):
    """Every variant of a protocol: ScoNe-NLG's completions (generated, for people to judge) and
    its outcome-choice proxy (choices after the strategy's prompt) through a server equal the
    in-process ones, each variant kept as its own part."""
    from test_scone_nlg import write_nlg
    from tiny_models import save_tiny_llama

    write_nlg(tmp_path / "data")
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(tmp_path / "data"))
    model = save_tiny_llama(tmp_path / "m", None)
    common = ["--protocol", "scone-nlg", "--evaluation.bootstrap=20"]
    assert main(["evaluate", "--model", str(model), "--family", "causal_lm", "--out", str(tmp_path / "hf"), *common, *HF,
                 "--model.max_length=1024"]) == 0
    with StandIn(model) as server:
        assert main(["evaluate", "--model", str(model), "--backend", "openai", "--base-url", server.url, "--out", str(tmp_path / "served"),
                     *common]) == 0
    hf, served = _records(tmp_path / "hf"), _records(tmp_path / "served")
    assert [r["variant"] for r in served] == [r["variant"] for r in hf] == ["completion/zero", "completion/few", "outcome_choice/zero", "outcome_choice/few"]
    for a, b in zip(hf, served, strict=False):
        assert b["metrics"] == pytest.approx(a["metrics"], abs=1e-9)
    for name in sorted(p.name for p in (tmp_path / "hf" / "predictions").iterdir()):
        keys = ("id", "prediction", "prompt", "response")
        rows = [[{k: r.get(k) for k in keys} for r in _predictions_named(tmp_path / d, name)] for d in ("hf", "served")]
        assert rows[1] == rows[0], name
    assert len(list((tmp_path / "served" / "parts").glob("scone_nlg-test-*.json"))) == 4
    assert (tmp_path / "served" / "protocol.md").is_file()


def test_greedy_on_a_server_with_a_repetition_penalty_needs_the_documented_extra_body(small, tmp_path):
    """A stand-in that applies a repetition penalty of 1.1 unless told otherwise, as
    llama-cpp-python's server does even at temperature 0: its responses differ from the hf
    backend's; with the documented --extra-body '{"repeat_penalty": 1.0}' they are the same, and
    every generation was asked greedily (temperature 0, top_p 1)."""
    model = small["llama"]
    args = ("--strategy", "conditional_q", "--model.max_new_tokens=12")
    _hf_card(model, tmp_path / "hf", "scone", *args)
    hf = [r["response"] for r in _predictions(tmp_path / "hf", "scone")]
    with StandIn(model, repeat_penalty=1.1) as server:
        assert _served(model, server.url, tmp_path / "penalised", "scone", *args) == 0
        assert _served(model, server.url, tmp_path / "greedy", "scone", *args, "--extra-body", '{"repeat_penalty": 1.0}') == 0
        assert all(b["temperature"] == 0 and b["top_p"] == 1 for b in server.bodies)
    assert [r["response"] for r in _predictions(tmp_path / "penalised", "scone")] != hf
    assert [r["response"] for r in _predictions(tmp_path / "greedy", "scone")] == hf
