"""A row limit (``trainer.limit_val_batches``) keeps a fair, stated subset (negtrain/data/row_limit.py):
whole contrast groups drawn with the seed, so every condition is scored and consistency is defined,
the same rows on a card (any backend) and in fit's evaluation. Once it took a split's first rows:
ScoNe's first 64 are all ``no_negation``, and a card said "scone/test: 0.484" of one condition."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from negtrain.benchmarks.base import Example
from negtrain.benchmarks.registry import get_benchmark
from negtrain.core.errors import DataError
from negtrain.data.row_limit import limited_rows


def _examples(groups: list[str | None]) -> list[Example]:
    return [Example(id=str(i), inputs=("a", "b"), label="entailment", group=g) for i, g in enumerate(groups)]


def test_whole_groups_as_many_as_fit():
    examples = _examples([f"g{i // 4}" for i in range(40)])  # ten groups of four
    rows = limited_rows(examples, 2, 5, seed=0)  # 2 batches of 5: room for 10 rows, so two whole groups
    assert rows is not None and len(rows) == 8 and rows == sorted(rows)
    kept = Counter(examples[i].group for i in rows)
    assert len(kept) == 2 and set(kept.values()) == {4}
    assert limited_rows(examples, 2, 5, seed=0) == rows  # a rerun keeps the same rows
    assert any(limited_rows(examples, 2, 5, seed=s) != rows for s in range(1, 6))  # the seed draws them
    assert limited_rows(examples, 8, 5, seed=0) is None and limited_rows(examples, None, 5, seed=0) is None  # all kept
    assert limited_rows(examples, 1.0, 5, seed=0) is None


def test_ungrouped_rows_are_drawn_not_taken_from_the_top():
    examples = _examples([None] * 100)
    rows = limited_rows(examples, 1, 10, seed=0)
    assert rows is not None and len(rows) == 10 and rows != list(range(10))


def test_a_group_larger_than_the_limit_is_kept_whole_and_a_limit_keeping_nothing_is_refused():
    assert limited_rows(_examples(["big"] * 6 + ["x"] * 6), 1, 4, seed=0) in ([*range(6)], [*range(6, 12)])
    with pytest.raises(DataError, match=r"limit_val_batches=0\.01 keeps none of scone/test's 3 batches"):
        limited_rows(_examples([None] * 12), 0.01, 4, seed=0, name="scone/test")


def test_scone_limited_to_two_batches_scores_every_condition(data_dir, monkeypatch):
    # The real split, every row: 200 contrast sets of six conditions each.
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(data_dir))
    examples = get_benchmark("scone").load("test")
    assert len(examples) == 1200
    rows = limited_rows(examples, 2, 32, seed=42)
    assert rows is not None and len(rows) == 60  # 10 whole sets: the most that fit in 64 rows
    conditions = Counter(examples[i].subset for i in rows)
    assert len(conditions) == 6 and set(conditions.values()) == {10}


def test_a_limited_card_scores_every_condition_and_complete_groups(lm_env, tmp_path, monkeypatch):
    from negtrain.cli import main
    from tiny_models import cut_world

    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(cut_world(lm_env["data"], tmp_path / "data", 8, 4)))  # 8 sets, 48 rows
    out = tmp_path / "card"
    assert main(["evaluate", "--model", str(lm_env["llama"]), "--family", "causal_lm", "--benchmarks", "scone",
                 "--trainer.limit_val_batches=3", "--data.eval_batch_size=4", "--trainer.torch_threads=1",
                 "--trainer.precision=32-true", "--out", str(out)]) == 0
    (line,) = [json.loads(s) for s in (out / "metrics.jsonl").read_text().splitlines() if '"benchmark"' in s]
    m = line["metrics"]
    assert m["n"] == 12 and m["groups_scored"] == 2  # 12 rows allowed: two whole sets
    assert all(m[f"accuracy/{c}"] is not None for c in ("no_negation", "one_scoped", "one_not_scoped",
                                                        "two_scoped", "two_not_scoped", "one_scoped_one_not_scoped"))
    assert m["consistency"] is not None
    card = (out / "card.md").read_text()
    assert "whole contrast groups" in card
    # The verbalizers as scored (the continuations sent), on the card.
    assert line["asked"]["mode"] == "verbalizers" and set(line["asked"]["verbalizers"]) == {"entailment", "not_entailment"}
    assert "| scone | test | verbalizers | the benchmark default | 0 | the higher log-likelihood of entailment: " in card


def test_a_limited_negated_lama_card_says_what_it_scored(lm_env, data_dir, tmp_path, monkeypatch):
    # Negated LAMA's metrics have no `n` (probes are scored or skipped): its card once said nothing
    # of the limit ("Part of the data" missing) and bootstrapped as if every probe were scored.
    from negtrain.cli import main
    from tiny_models import cut_world

    if not (data_dir / "norakassner/LAMA_primed_negated").is_dir():
        pytest.skip("needs the negated LAMA mirror")
    data = cut_world(lm_env["data"], tmp_path / "data", 2, 4)
    for owner in ("norakassner", "ncarraz"):
        if not (data / owner).exists():
            (data / owner).symlink_to(data_dir / owner)
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(data))
    out = tmp_path / "card"
    assert main(["evaluate", "--model", str(lm_env["llama"]), "--family", "causal_lm", "--benchmarks", "negated_lama",
                 "--trainer.limit_val_batches=1", "--data.eval_batch_size=4", "--trainer.torch_threads=1",
                 "--trainer.precision=32-true", "--out", str(out)]) == 0
    (line,) = [json.loads(s) for s in (out / "metrics.jsonl").read_text().splitlines() if '"benchmark"' in s]
    assert line["subset"]["scored"] == 4 and line["subset"]["cut_by"] == "trainer.limit_val_batches=1"
    card = (out / "card.md").read_text()
    assert f"negated_lama/test 4 of {line['subset']['of']:,} examples" in card
    assert "(those its 4 scored examples belong to)" in card


@pytest.mark.parametrize("stage", ["validate", "test"])
def test_validate_and_test_refuse_a_limit_that_keeps_nothing(stage, capsys):
    # fit reads limit_val_batches=0 as "no evaluation"; validate/test would score nothing and print None.
    from negtrain.cli import main

    assert main([stage, "--recipe", "scone_minilm", "--trainer.limit_val_batches=0"]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [f"error: trainer.limit_val_batches=0: `{stage}` would score no example; give a number of "
                                "batches (or a fraction) above 0, or drop it to score every example"]
