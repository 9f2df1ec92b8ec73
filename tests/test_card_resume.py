"""Report cards that survive a kill: each benchmark is kept as soon as it is scored, and the same
command into the same --out continues without redoing it; SIGTERM never reads as success; a shot
source that cannot be read is skipped under `all` like unreadable data; a token inside the model
path reaches neither the card's title nor recipe.yaml's header."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from negtrain.evaluation.card import plan_card
from negtrain.commands.evaluate import card_request
from negtrain.cli import main, parser

ROOT = Path(__file__).resolve().parent.parent
LIMIT = ["--trainer.limit_val_batches=1", "--data.eval_batch_size=8", "--trainer.torch_threads=1", "--trainer.precision=32-true"]


def _card(model, out, benchmarks, *extra) -> int:
    given = {e.split("=")[0] for e in extra}
    limits = [x for x in LIMIT if x.split("=")[0] not in given]  # an extra setting replaces the default
    return main(["evaluate", "--model", str(model), "--family", "causal_lm", "--benchmarks", benchmarks, "--out", str(out), *limits, *extra])


def _stable(out: Path) -> list[dict]:
    # What a resumed card may differ in: time, and how many answers came from the cache.
    return [{k: v for k, v in json.loads(line).items() if k not in ("eval_seconds", "requests")}
            for line in (out / "metrics.jsonl").read_text().splitlines()]


class Killed(BaseException):
    """Stands for the process dying right after its first benchmark was kept."""


def test_hf_card_killed_after_its_first_benchmark_resumes_without_recomputing_it(lm_env, tmp_path, monkeypatch):
    model = lm_env["llama"]
    assert _card(model, tmp_path / "whole", "scone,nannli") == 0
    out = tmp_path / "card"
    import negtrain.evaluation.served as served  # the card imports score_served from there when it scores

    score_served, calls = served.score_served, []

    def die_at_the_second(recipe, entry, *args, **kwargs):
        if calls:  # the first benchmark was scored and kept
            raise Killed()
        calls.append(entry.benchmark)
        return score_served(recipe, entry, *args, **kwargs)

    monkeypatch.setattr(served, "score_served", die_at_the_second)
    with pytest.raises(Killed):
        _card(model, out, "scone,nannli")
    first = (out / "parts" / "scone-test.json").read_bytes()
    assert not (out / "metrics.jsonl").exists() and not (out / "parts" / "nannli-test.json").exists()
    scored = []

    def spy(recipe, entry, *args, **kwargs):
        scored.append(f"{entry.benchmark}/{entry.split}")
        return score_served(recipe, entry, *args, **kwargs)

    monkeypatch.setattr(served, "score_served", spy)
    assert _card(model, out, "scone,nannli") == 0
    assert scored == ["nannli/test"]  # ScoNe is not scored again...
    assert (out / "parts" / "scone-test.json").read_bytes() == first  # ...and its result is the one kept
    assert _stable(out) == _stable(tmp_path / "whole")
    for name in ("scone-test-validate.jsonl", "nannli-test-validate.jsonl"):
        assert (out / "predictions" / name).read_bytes() == (tmp_path / "whole" / "predictions" / name).read_bytes()
    assert (out / "recipe.yaml").read_bytes() == (tmp_path / "whole" / "recipe.yaml").read_bytes()
    assert not list((out / "parts").glob(".scoring-*"))
    # A finished card rerun: nothing scored, the same files.
    scored.clear()
    before = (out / "metrics.jsonl").read_bytes()
    assert _card(model, out, "scone,nannli") == 0
    assert scored == [] and (out / "metrics.jsonl").read_bytes() == before
    # Killed between metrics.jsonl and card.md: the rerun writes the card.
    (out / "card.md").unlink()
    assert _card(model, out, "scone,nannli") == 0 and (out / "card.md").is_file()
    # Another command into the same --out is refused, not mixed in.
    assert _card(model, out, "scone") == 2


def test_sigterm_to_a_card_is_no_success_and_the_rerun_finishes_it(lm_env, tmp_path):
    out = tmp_path / "card"
    command = [sys.executable, "-m", "negtrain", "evaluate", "--model", str(lm_env["llama"]), "--family", "causal_lm",
               "--benchmarks", "scone,nannli,tinad", "--out", str(out), *LIMIT]
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while not (out / "recipe.yaml").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    printed = proc.communicate(timeout=120)[0].decode()
    assert proc.returncode == 128 + signal.SIGTERM, printed
    assert "continue with: the same command" in printed
    assert not (out / "card.md").exists()
    rerun = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert [r["benchmark"] for r in _stable(out)] == ["scone", "nannli", "tinad"] and (out / "card.md").is_file()


def test_all_with_shots_skips_a_benchmark_whose_shot_source_cannot_be_read(lm_env, capsys):
    """CondaQA's shots come from its train split, which the mirror does not hold."""
    assert not (lm_env["data"] / "AbhilashaRavichander/CondaQA/data/condaqa_train.json").exists()
    args, extra = parser().parse_known_args(["evaluate", "--model", str(lm_env["llama"]), "--family", "causal_lm", "--shots", "2"])
    plan = plan_card(card_request(args, extra)).plan
    recipe, skipped = plan.recipe, plan.skipped
    planned = [e.benchmark for e in recipe.data.eval]
    assert "condaqa" not in planned and {"scone", "nannli", "tinad"} <= set(planned)
    lost = {s.benchmark: s.reason for s in skipped}
    assert "its shot source condaqa/train cannot be read" in lost["condaqa"]
    assert "all: skipping condaqa/test: its shot source condaqa/train" in capsys.readouterr().out
    # Named explicitly, it is an error before any model is loaded.
    code = main(["evaluate", "--model", str(lm_env["llama"]), "--family", "causal_lm", "--benchmarks", "condaqa", "--shots", "2"])
    assert code == 2 and "--benchmarks condaqa: its shot source condaqa/train cannot be read" in capsys.readouterr().err


@pytest.mark.slow
def test_all_with_shots_scores_the_rest(lm_env, tmp_path):
    out = tmp_path / "card"
    assert _card(lm_env["llama"], out, "all", "--shots", "2") == 0
    names = [r["benchmark"] for r in _stable(out)]
    assert "condaqa" not in names and "scone" in names
    assert "- condaqa/test: its shot source condaqa/train cannot be read" in (out / "card.md").read_text()


def test_a_token_in_the_model_path_is_masked_in_the_title_and_header(lm_env, tmp_path, monkeypatch):
    token = "hf_plantedPathToken0123456789"
    monkeypatch.setenv("HF_TOKEN", token)
    model = tmp_path / f"models-{token}" / "llama"
    model.parent.mkdir()
    model.symlink_to(lm_env["llama"])
    out = tmp_path / "card"
    assert _card(model, out, "tinad") == 0
    for name in ("card.md", "recipe.yaml", "metrics.jsonl"):
        assert token not in (out / name).read_text(), name
    assert (out / "card.md").read_text().startswith("# Negation report card: `") and "***" in (out / "card.md").read_text().splitlines()[0]
    assert "***" in (out / "recipe.yaml").read_text().splitlines()[0]


def test_hf_card_killed_inside_a_benchmark_recomputes_only_the_unanswered_rows(lm_env, tmp_path, monkeypatch):
    """The hf backend keeps every answered row in the card's response cache: killed after the
    first of CondaQA's two batches, the rerun generates only the second batch's rows, and the
    files equal an uninterrupted card's."""
    import negtrain.serving.in_process as in_process

    model = lm_env["llama"]
    args = ("condaqa", "--trainer.limit_val_batches=2", "--data.eval_batch_size=4", "--model.max_new_tokens=4")
    assert _card(model, tmp_path / "whole", *args) == 0
    greedy = in_process.respond_ids
    calls = []

    def greedy_then_die(model_, tokenizer, ids, *rest):
        if calls:
            raise Killed()
        calls.append(len(ids))
        return greedy(model_, tokenizer, ids, *rest)

    monkeypatch.setattr(in_process, "respond_ids", greedy_then_die)
    out = tmp_path / "card"
    with pytest.raises(Killed):
        _card(model, out, *args)
    assert calls == [4] and not (out / "parts" / "condaqa-test.json").exists()
    rows = []

    def counting(model_, tokenizer, ids, *rest):
        rows.append(len(ids))
        return greedy(model_, tokenizer, ids, *rest)

    monkeypatch.setattr(in_process, "respond_ids", counting)
    assert _card(model, out, *args) == 0
    assert rows == [4]  # the first batch came from the cache
    assert _stable(out) == _stable(tmp_path / "whole")
    name = "condaqa-test-validate.jsonl"
    assert (out / "predictions" / name).read_bytes() == (tmp_path / "whole" / "predictions" / name).read_bytes()
