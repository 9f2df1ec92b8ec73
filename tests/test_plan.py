"""What a command evaluates is resolved once (negtrain.evaluation.plan): ``resolve`` is pure (the same plan
twice, the recipe it was given untouched), a card is planned from a typed request, and a
benchmark split is read from its files once per process (``scone-icl`` parses ScoNe once), again
only when a file changed."""

from __future__ import annotations

import dataclasses
import shutil

import pytest

from negtrain.benchmarks.scone import Scone
from negtrain.evaluation.card import CardRequest, plan_card
from negtrain.cli import parser
from negtrain.commands.evaluate import card_request
from negtrain.config import validate_recipe
from negtrain.core.errors import ConfigError, DataError
from negtrain.evaluation.plan import PlanRequest, resolve


def _recipe(eval_entries, family="causal_lm", name="m"):
    return validate_recipe({"description": "plan test", "model": {"name": name, "family": family}, "data": {"eval": eval_entries},
                            "logger": "none"}, "test")


@pytest.mark.parametrize("request_", [PlanRequest(), PlanRequest(strategy="conditional_q", shots=2, where="evaluate --model",
                                                                   skip_unreadable_shots=True)],
                         ids=["as-written", "strategy-and-shots"])
def test_resolve_is_pure(data_dir, request_):
    recipe = _recipe("all") if request_.strategy is None else _recipe([{"benchmark": "scone", "split": "test"}])
    before = recipe.model_dump()
    sections = (recipe.model, recipe.data, recipe.trainer, recipe.evaluation, recipe.data.eval)
    first, second = resolve(recipe, request_), resolve(recipe, request_)
    assert first == second
    assert recipe.model_dump() == before  # nothing filled in on the recipe given
    assert (recipe.model, recipe.data, recipe.trainer, recipe.evaluation, recipe.data.eval) == sections
    assert all(a is b for a, b in zip((recipe.model, recipe.data, recipe.trainer, recipe.evaluation, recipe.data.eval), sections, strict=True))
    # ...while the plan's recipe is resolved: entries listed, each reading a prompt with its prompt or strategy.
    from negtrain.benchmarks.registry import get_benchmark

    assert first.recipe is not recipe and first.evals
    assert all(e.prompt or e.strategy for e in first.evals if not get_benchmark(e.benchmark).answer_type.builds_own_context)
    if request_.strategy:
        assert [(e.strategy, e.shots, e.shots_split) for e in first.evals] == [("conditional_q", 2, "train")]
        assert recipe.data.eval[0].strategy is None and recipe.data.eval[0].shots == 0


def test_resolve_prints_nothing_and_the_plan_says_what_all_skipped(data_dir, capsys):
    plan = resolve(_recipe("all"))
    assert capsys.readouterr().out == ""
    skipped = {f"{s.benchmark}/{s.split}" for s in plan.skipped}
    assert "tinad/test" in skipped  # the mirror holds no TINAD
    assert not skipped & {f"{e.benchmark}/{e.split}" for e in plan.evals}
    plan.announce()
    assert "all: skipping tinad/test:" in capsys.readouterr().out
    assert (plan.model, plan.family, plan.backend) == ("m", "causal_lm", "hf")


def test_a_strict_plan_refuses_what_all_would_skip(data_dir):
    with pytest.raises(ConfigError, match=r"evaluate --model --strict: cannot read .*tinad/test"):
        resolve(_recipe("all"), PlanRequest(strict=True, where="evaluate --model"))


def test_a_card_request_is_built_once_from_the_command_line(tmp_path):
    args, extra = parser().parse_known_args([
        "evaluate", "--model", "m", "--backend", "openai", "--base-url", "http://127.0.0.1:1/v1", "--api-key-env", "KEY",
        "--concurrency", "2", "--protocol", "scone-icl", "--trainer.devices=1",
    ])
    request = card_request(args, extra)
    assert isinstance(request, CardRequest)
    assert request.server == {"base_url": "http://127.0.0.1:1/v1", "key_env": "KEY", "concurrency": 2}
    assert request.overrides == ("--trainer.devices=1",) and request.protocol == "scone-icl"
    with pytest.raises(dataclasses.FrozenInstanceError):  # the plan reads it, nothing changes it
        request.model = "other"  # type: ignore[misc]


def _count_scone_reads(monkeypatch) -> dict[str, int]:
    counts = {"reads": 0}
    real = Scone.read

    def counted(self, split):
        counts["reads"] += 1
        return real(self, split)

    monkeypatch.setattr(Scone, "read", counted)
    # Benchmark.load keeps what it read for the process: start from an empty memo, so a split an
    # earlier test read is not counted as zero reads here (restored afterwards).
    from negtrain.benchmarks import base

    monkeypatch.setattr(base, "_LOADED", {})
    return counts


def test_scone_icl_parses_scone_once(lm_env, monkeypatch, capsys):
    """Planning the protocol's 12 variants, loading their data and computing its Ignore-Negation
    baseline: one parse of ScoNe's test split (all 12 variants score it)."""
    from negtrain.evaluation.protocol import ignore_negation
    from negtrain.models.data_loading import load_data

    counts = _count_scone_reads(monkeypatch)
    card = plan_card(CardRequest(model=str(lm_env["llama"]), family="causal_lm", protocol="scone-icl"))
    assert len(card.plan.evals) == 12 and {e.benchmark for e in card.plan.evals} == {"scone"}
    loaded = load_data(card.plan.recipe, "validate", card.plan)
    assert len(loaded.eval) == 12
    ignore_negation(["test"], 0, 0)
    assert counts["reads"] == 1
    # Each caller gets its own list of the shared (frozen) examples.
    assert loaded.eval[0][2] is not loaded.eval[1][2] and loaded.eval[0][2][0] is loaded.eval[1][2][0]


def test_a_rewritten_data_file_is_read_again(data_dir, tmp_path, monkeypatch):
    counts = _count_scone_reads(monkeypatch)
    mirror = tmp_path / "data"
    shutil.copytree(data_dir / "selenashe" / "ScoNe" / "scone_nli" / "test", mirror / "selenashe" / "ScoNe" / "scone_nli" / "test")
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(mirror))
    bench = Scone()
    first = bench.load("test")
    assert bench.load("test") == first and counts["reads"] == 1
    path = mirror / "selenashe" / "ScoNe" / "scone_nli" / "test" / "one_scoped.csv"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:-1]))  # one row fewer in one condition file
    with pytest.raises(DataError, match="rows"):  # the six files no longer line up: read afresh, and refused
        bench.load("test")
    assert counts["reads"] == 2


@pytest.mark.slow
def test_a_scone_icl_card_resolves_once_and_parses_scone_once(lm_env, monkeypatch, tmp_path):
    """The whole command: planning, the model's 12 variants (their few-shot demonstrations
    included), the card and protocol.md with its Ignore-Negation row."""
    import negtrain.evaluation.plan as plan_module
    from negtrain.cli import main

    counts = _count_scone_reads(monkeypatch)
    resolved = {"n": 0}
    real = plan_module.resolve_benchmarks

    def counted(recipe, *args, **kwargs):
        resolved["n"] += 1
        return real(recipe, *args, **kwargs)

    monkeypatch.setattr(plan_module, "resolve_benchmarks", counted)
    out = tmp_path / "icl"
    assert main(["evaluate", "--model", str(lm_env["llama"]), "--family", "causal_lm", "--protocol", "scone-icl", "--out", str(out),
                 "--trainer.limit_val_batches=1", "--data.eval_batch_size=4", "--trainer.torch_threads=1",
                 "--trainer.precision=32-true", "--evaluation.bootstrap=20", "--model.max_new_tokens=8"]) == 0
    assert (out / "protocol.md").is_file() and "Ignore-Negation" in (out / "protocol.md").read_text()
    assert counts["reads"] == 1 and resolved["n"] == 1
