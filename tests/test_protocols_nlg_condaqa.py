"""The scone-nlg and condaqa-fewshot protocols on a tiny random causal LM: ScoNe-NLG's zero- and
few-shot completions written for people to judge (the few-shot prompt holds E.13's demonstrations
verbatim) beside the outcome_choice proxy; CondaQA's five splits each prompted with exactly its own
nine shots, with the mean ± std over the splits and the pooled score in protocol.md."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from negtrain.benchmarks.condaqa import FEWSHOT_TEST, FEWSHOT_TRAIN
from negtrain.cli import main
from negtrain.evaluation.predictions import score_file
from negtrain.prompts.protocols import get_protocol
from negtrain.prompts.strategies import get_strategy
from test_condaqa_fewshot import write_fewshot
from test_scone_nlg import ROWS, write_nlg
from tiny_models import save_tiny_llama

#: Appendix E.13's few-shot prompt as printed (real newlines where the paper marks \n), before the
#: scored narrative.
E13 = (
    "Glen is not a fan of learning math. When he sees that his new high school requires that he take a geometry course, he is not pleased.\n\n"
    "I saw John take his BMW to the store the other day, so when Suzy asked me if John owns a car, I said yes.\n\n"
    "I've seen John with a dog that isn't very cute, so when Suzy asked me if John owns a pet, I said yes.\n\n"
    "I recently confirmed that John is not allergic to any shellfish. So it makes sense that when we served shrimp\n\n"
)


def _records(out: Path) -> list[dict]:
    return [r for r in (json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()) if r.get("stage") == "validate"]


def _protocol(tmp_path: Path, name: str, *extra: str) -> Path:
    model = save_tiny_llama(tmp_path / "m", None)
    out = tmp_path / "card"
    code = main([
        "evaluate", "--model", str(model), "--family", "causal_lm", "--protocol", name, "--out", str(out),
        "--data.eval_batch_size=8", "--trainer.torch_threads=1", "--trainer.precision=32-true", "--evaluation.bootstrap=20",
        "--model.max_length=1024", *extra,
    ])
    assert code == 0
    return out


def test_scone_nlg_few_shot_prompt_is_e13_verbatim():
    strategy = get_strategy("scone_nlg", "completion")
    narrative = "Jimmy plays trumpet. So when all student instruments players were called to the front office,"
    prompt = strategy.paper_prompt({"sentence": narrative}, "no_negation")
    assert prompt.text() == E13 + narrative
    assert strategy.render({"sentence": narrative}) == narrative  # zero-shot: the bare narrative
    assert len(prompt.shots) == 4


def test_protocol_scone_nlg_writes_completions_and_the_proxy(tmp_path, monkeypatch, one_thread):
    write_nlg(tmp_path / "data")
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(tmp_path / "data"))
    out = _protocol(tmp_path, "scone-nlg")
    records = _records(out)
    assert [r["variant"] for r in records] == ["completion/zero", "completion/few", "outcome_choice/zero", "outcome_choice/few"]
    for variant in ("zero", "few"):
        lines = [json.loads(x) for x in (out / "predictions" / f"scone_nlg-test-completion-{variant}.jsonl").read_text().splitlines()]
        assert [x["id"] for x in sorted(lines, key=lambda x: int(x["id"].rsplit("/", 1)[1]))] == [f"scone_nlg/test/{i}" for i in range(9)]
        for line in lines:
            row = ROWS[int(line["id"].rsplit("/", 1)[1])]
            # the prompt: the bare narrative, or E.13's four demonstrations then the narrative
            assert line["prompt"].endswith(row[0]) and line["prompt"].startswith(E13 if variant == "few" else row[0])
            # the prediction is the completion: the response's first line, stripped (null: empty)
            first = line["response"].split("\n", 1)[0].strip()
            assert line["prediction"] == (first or None)
        record = next(r for r in records if r["variant"] == f"completion/{variant}")
        assert record["metrics"]["n"] == 9 and "accuracy" not in record["metrics"]
        assert record["tokens_generated"] > 0
        # judged by people, the same file is scored with the paper's metric
        judged = tmp_path / f"judged-{variant}.jsonl"
        judged.write_text("".join(json.dumps({**x, "coherent": [True, i != 4]}) + "\n" for i, x in enumerate(lines)))
        m = score_file("scone_nlg", "test", judged, bootstrap=0).metrics
        assert m["agreed"] == 8 and m["accuracy"] == 1.0
    for variant in ("zero", "few"):
        record = next(r for r in records if r["variant"] == f"outcome_choice/{variant}")
        assert record["metrics"]["n"] == 9 and "outcome_choice_accuracy" in record["metrics"] and "accuracy" not in record["metrics"]
        path = out / "predictions" / f"scone_nlg-test-outcome_choice-{variant}.jsonl"
        lines = [json.loads(x) for x in path.read_text().splitlines()]
        assert all(x["prompt"].startswith(E13) == (variant == "few") for x in lines)
        rescored = score_file("scone_nlg", "test", path, bootstrap=0).metrics
        assert rescored["outcome_choice_accuracy"] == pytest.approx(record["metrics"]["outcome_choice_accuracy"])
    table = (out / "protocol.md").read_text()
    assert "| completion/few |" in table and "Overall (proxy)" in table and "not the paper's" in table


def test_protocol_condaqa_fewshot_uses_each_splits_nine_shots_and_sums_up_the_splits(tmp_path, monkeypatch, one_thread):
    write_fewshot(tmp_path / "data")
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(tmp_path / "data"))
    out = _protocol(tmp_path, "condaqa-fewshot")
    protocol = get_protocol("condaqa-fewshot")
    records = _records(out)
    assert [r["variant"] for r in records] == [v.name for v in protocol.variants] and len(records) == 20
    for v in protocol.variants:
        lines = [json.loads(x) for x in (out / "predictions" / f"{v.file_stem}.jsonl").read_text().splitlines()]
        assert len(lines) == 4
        k = int(v.name.rsplit("/", 1)[1])
        nine = [f"condaqa/{FEWSHOT_TRAIN[k - 1]}/{50_000 + 10 * k + i}" for i in range(9)]
        for line in lines:
            assert line["id"].startswith(f"condaqa/{FEWSHOT_TEST[k - 1]}/")
            if v.shots:
                assert line["shots"] == nine  # exactly its split's nine, in the train file's order
            else:
                assert "shots" not in line
        if v.name.startswith("cot_answer_only/"):
            assert all(x["prompt"].rstrip().endswith("Answer: Let's think step by step.") for x in lines)
            assert all("So the answer is YES." in x["prompt"] or "So the answer is NO." in x["prompt"] for x in lines)
        if v.name.startswith("unifiedqa/"):
            assert not any(c.isupper() for x in lines for c in x["prompt"])  # normalised and lower-cased
        if v.name.startswith("flan_cot/"):
            assert all(x["prompt"].endswith("\nGive the rationale before answering.") for x in lines)
    table = (out / "protocol.md").read_text()
    for fmt in ("fewshot", "cot_answer_only", "unifiedqa", "flan_cot"):
        assert f"| {fmt}: mean ± std over 5 splits |" in table and f"| {fmt}: pooled |" in table
    assert "| cot/" not in table and "NOT the paper's chain-of-thought row" in table
    # the mean ± std row equals the records' own numbers, in percent as the paper prints them
    acc = [100 * next(r for r in records if r["variant"] == f"fewshot/{k}")["metrics"]["accuracy"] for k in range(1, 6)]
    import statistics

    row = next(x for x in table.splitlines() if x.startswith("| fewshot: mean ± std"))
    assert row.split(" | ")[1] == f"{statistics.mean(acc):.2f} ± {statistics.stdev(acc):.2f}"


@pytest.mark.slow
def test_a_limited_condaqa_fewshot_run_ends_cleanly_with_undefined_consistency(tmp_path, monkeypatch, one_thread):
    """No complete question group anywhere: the run ends (it once crashed summing up the splits),
    and protocol.md says the consistencies are undefined instead of printing a number. A row limit
    keeps whole groups (negtrain/data/row_limit.py), so here each split's scored rows are given as
    the limit once took them, its first two (two of a group's four edits)."""
    import negtrain.evaluation.served as served

    monkeypatch.setattr(served, "limited_rows", lambda examples, limit, batch_size, seed, name="": list(range(min(2, len(examples)))))
    write_fewshot(tmp_path / "data")
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(tmp_path / "data"))
    out = tmp_path / "card"
    assert main(["evaluate", "--model", str(save_tiny_llama(tmp_path / "m", None)), "--family", "causal_lm", "--protocol",
                 "condaqa-fewshot", "--out", str(out), "--data.eval_batch_size=2", "--trainer.limit_val_batches=1",
                 "--trainer.torch_threads=1", "--trainer.precision=32-true", "--evaluation.bootstrap=20", "--model.max_length=1024"]) == 0
    records = _records(out)
    assert len(records) == 20 and all(r["metrics"]["groups_scored"] == 0 and r["metrics"]["consistency"] is None for r in records)
    table = (out / "protocol.md").read_text()
    row = next(x for x in table.splitlines() if x.startswith("| fewshot/1 |"))
    assert "undefined (0 complete groups)" in row
    mean = next(x for x in table.splitlines() if x.startswith("| fewshot: mean ± std over 5 splits |"))
    assert "undefined (0 of 5 splits)" in mean
