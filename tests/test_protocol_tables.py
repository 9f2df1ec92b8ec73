"""protocol.md in the papers' own form, from hand-written predictions files (no model): CondaQA's
Table 4 columns (accuracy and the edit-level consistencies) in percent with two decimals, equal to
`evaluate --predictions` on the same files, with the per-edit accuracies in a table of their own;
TINAD's Table 4 pooled over every split, in percent with one decimal, its Random row, and Table 5
(accuracy per pattern) equal to a hand count; columns the paper lacks marked as added; the CondaQA
chain of thought without the paper's explanations never under the paper's name."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from negtrain.benchmarks.condaqa import FEWSHOT_TEST, normalize_answer
from negtrain.cli import main
from negtrain.core.errors import ConfigError
from negtrain.evaluation.predictions import score_file
from negtrain.prompts.protocols import get_protocol, parse_protocols
from negtrain.prompts.strategies import get_strategy
from negtrain.evaluation.protocol import protocol_markdown
from test_condaqa_fewshot import write_fewshot
from tinad_fixture import row, write_split

#: Per few-shot split (one question group of four passages each: original, paraphrase, scope,
#: affirmative), which passages the predictions get wrong. Chosen so that each edit's accuracy
#: differs from its consistency with the original passage.
WRONG = [(), (0,), (2,), (3,), (1, 2)]
#: By hand, pooled over the five groups (20 answers): 15 right; all four right in 1 group; the
#: original and the edit both right: paraphrase in groups 1, 3, 4; scope in 1, 4; affirmative in 1, 3, 5;
#: the paraphrase right on its own in groups 1 to 4.
POOLED = {"accuracy": "75.00", "consistency": "20.00", "consistency/paraphrase": "60.00",
          "consistency/scope": "40.00", "consistency/affirmative": "60.00",
          "accuracy/paraphrase": "80.00", "accuracy/original": "80.00"}


def _cells(table: str, label: str, section: str | None = None) -> dict[str, str]:
    """The row ``label`` of the table (the first, or the one under ``## section``), by header."""
    lines = table.splitlines()
    if section is not None:
        lines = lines[next(i for i, x in enumerate(lines) if x.startswith(f"## {section}")):]
    head = next(i for i, x in enumerate(lines) if x.startswith("| variant |"))
    headers = [h.strip() for h in lines[head].strip("|").split("|")]
    body = next(x for x in lines[head + 2:] if x.startswith(f"| {label} |"))
    values = [v.strip() for v in body.strip("|").split("|")]
    return dict(zip(headers, values, strict=False))


def _condaqa_run(tmp_path: Path) -> tuple[Path, list[dict]]:
    """A run directory holding the fewshot variants' predictions files, and their records."""
    out = tmp_path / "run"
    (out / "predictions").mkdir(parents=True)
    records = []
    for k, split in enumerate(FEWSHOT_TEST):
        gold = ["YES", "NO", "YES", "NO"]
        lines = []
        for e in range(4):
            answer = gold[e] if e not in WRONG[k] else ("NO" if gold[e] == "YES" else "YES")
            lines.append({"id": f"condaqa/{split}/{1000 * (k + 1) + e}", "prediction": answer.lower() if e == 1 else answer})
        path = out / "predictions" / f"condaqa-{split}-fewshot-{k + 1}.jsonl"
        path.write_text("".join(json.dumps(x) + "\n" for x in lines))
        scored = score_file("condaqa", split, path, bootstrap=20)
        records.append({"variant": f"fewshot/{k + 1}", "metrics": scored.metrics, "uncertainty": scored.uncertainty.as_json()})
    return out, records


def _evaluate_json(capsys, split: str, *paths: Path) -> dict:
    capsys.readouterr()
    files = [a for p in paths for a in ("--predictions", str(p))]
    assert main(["evaluate", "--benchmark", "condaqa", "--split", split, *files, "--json", "--bootstrap", "20"]) == 0
    return json.loads(capsys.readouterr().out)


TABLE4 = {"accuracy": "Accuracy", "consistency": "Consistency: All", "consistency/paraphrase": "Consistency: Paraphrase",
          "consistency/scope": "Consistency: Scope", "consistency/affirmative": "Consistency: Affirmative"}


def test_condaqa_protocol_prints_table_4_in_percent_equal_to_evaluate_predictions(tmp_path, monkeypatch, capsys):
    write_fewshot(tmp_path / "data")
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(tmp_path / "data"))
    out, records = _condaqa_run(tmp_path)
    table = protocol_markdown(get_protocol("condaqa-fewshot"), records, "m", resamples=20, seed=0, out=out)
    files = [out / "predictions" / f"condaqa-{s}-fewshot-{k + 1}.jsonl" for k, s in enumerate(FEWSHOT_TEST)]
    # each split's row: Table 4's columns, the numbers evaluate --predictions gives, times 100, two decimals
    for k, split in enumerate(FEWSHOT_TEST):
        scored = _evaluate_json(capsys, split, files[k])["metrics"]
        row = _cells(table, f"fewshot/{k + 1}")
        for metric, header in TABLE4.items():
            assert row[header].split(" [")[0] == f"{100 * scored[metric]:.2f}", (split, metric)
    # the pooled row: evaluate --predictions over the five splits at once, and the hand count
    pooled = _evaluate_json(capsys, ",".join(FEWSHOT_TEST), *files)["pooled"]
    row = _cells(table, "fewshot: pooled")
    for metric, header in TABLE4.items():
        assert row[header].split(" [")[0] == f"{100 * pooled['metrics'][metric]:.2f}" == POOLED[metric]
        lo, hi = pooled["uncertainty"][metric]["ci95"]
        assert f"[{100 * lo:.2f}, {100 * hi:.2f}]" in row[header]
    # a consistency says of how many question groups: 1 of the 5 all right; 3 of 5 with the paraphrase
    assert row["Consistency: All"].endswith("] (1/5)") and row["Consistency: Paraphrase"].endswith("] (3/5)")
    assert row["Accuracy"].endswith("]")  # an accuracy has no groups
    # the per-edit accuracies are a table of their own, named so, never under Table 4's edit names
    edits = _cells(table, "fewshot: pooled", "Per-edit accuracy")
    assert edits["Accuracy: Paraphrase"].split(" [")[0] == POOLED["accuracy/paraphrase"]
    assert edits["Accuracy: Original"].split(" [")[0] == POOLED["accuracy/original"]
    assert "Accuracy: Paraphrase" not in _cells(table, "fewshot: pooled")
    assert "Values in percent" in table


def test_a_limited_condaqa_protocol_ends_with_undefined_consistency_said_so(tmp_path, monkeypatch):
    """A run limited to some batches (trainer.limit_val_batches) predicts only part of a split: a
    split with no complete question group has no consistency (null in metrics.jsonl), which the
    mean over the splits leaves out and every row names, instead of a crash."""
    write_fewshot(tmp_path / "data")
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(tmp_path / "data"))
    out, _ = _condaqa_run(tmp_path)
    records = []
    for k, split in enumerate(FEWSHOT_TEST):
        path = out / "predictions" / f"condaqa-{split}-fewshot-{k + 1}.jsonl"
        if k in (1, 2):  # splits 2 and 3: two of the four passages predicted, so no complete group
            path.write_text("".join(path.read_text().splitlines(keepends=True)[:2]))
        scored = score_file("condaqa", split, path, allow_missing=True, bootstrap=20)
        # as metrics.jsonl holds them: an undefined value is null
        metrics = {m: (None if isinstance(v, float) and math.isnan(v) else v) for m, v in scored.metrics.items()}
        records.append({"variant": f"fewshot/{k + 1}", "metrics": metrics, "uncertainty": scored.uncertainty.as_json()})
    assert records[1]["metrics"]["consistency"] is None and records[1]["metrics"]["groups_scored"] == 0
    table = protocol_markdown(get_protocol("condaqa-fewshot"), records, "m", resamples=20, seed=0, out=out)
    second = _cells(table, "fewshot/2")
    assert second["Consistency: All"] == second["Consistency: Scope"] == "undefined (0 complete groups)"
    assert second["Accuracy"].split(" [")[0] == f"{100 * records[1]['metrics']['accuracy']:.2f}"
    assert _cells(table, "fewshot/1")["Consistency: All"].endswith("(1/1)")
    # splits 1, 4, 5: consistency 1, 0, 0 (4 and 5 have a wrong answer): mean 33.33, sample std 57.74, over 3 of 5
    mean = _cells(table, "fewshot: mean ± std over 5 splits")
    # (the summary keeps six decimals: std 0.577350, printed 57.73)
    assert mean["Consistency: All"] == "33.33 ± 57.73 (3 of 5 splits)"
    assert " of 5 splits" not in mean["Accuracy"]
    pooled = _cells(table, "fewshot: pooled")
    assert pooled["Consistency: All"].endswith("(1/3)") and pooled["n"] == "16"


def test_condaqa_answers_are_compared_as_the_authors_scorer_does():
    """strip() and lower() on both sides, nothing else (the authors' compute_accuracy)."""
    assert normalize_answer("  YES\n") == normalize_answer("yes") == "yes"
    assert normalize_answer("No") == "no"
    assert normalize_answer("Yes.") != normalize_answer("YES")  # punctuation is kept
    assert normalize_answer("don't know") != normalize_answer("dont know")
    assert normalize_answer("the Eiffel Tower") != normalize_answer("Eiffel Tower")  # articles are kept


def test_condaqa_scores_yes_with_a_period_wrong_as_the_paper_does(tmp_path, monkeypatch):
    write_fewshot(tmp_path / "data")
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(tmp_path / "data"))
    path = tmp_path / "p.jsonl"
    answers = [" yes ", "No.", "Yes", "NO"]  # gold YES, NO, YES, NO
    path.write_text("".join(json.dumps({"id": f"condaqa/fewshot_test_1/{1000 + e}", "prediction": a}) + "\n" for e, a in enumerate(answers)))
    m = score_file("condaqa", "fewshot_test_1", path, bootstrap=0).metrics
    assert m["accuracy"] == 0.75 and m["accuracy/paraphrase"] == 0.0 and m["consistency"] == 0.0


def test_the_chain_of_thought_without_explanations_is_not_called_cot():
    with pytest.raises(ConfigError, match="'cot' of 'condaqa' is now called 'cot_answer_only'.*explanations"):
        get_strategy("condaqa", "cot")
    assert "not the paper" in get_strategy("condaqa", "cot_answer_only").source.lower() or \
        "without its task description" in get_strategy("condaqa", "cot_answer_only").source
    assert not any(v.strategy == "cot" or v.name.startswith("cot/") for v in get_protocol("condaqa-fewshot").variants)


def test_cli_refuses_the_old_cot_name_with_one_error_line(capsys):
    assert main(["evaluate", "--model", "m", "--family", "causal_lm", "--benchmarks", "condaqa", "--strategy", "cot"]) == 2
    err = capsys.readouterr().err
    assert "cot_answer_only" in err and "Traceback" not in err


def test_added_columns_are_marked_and_the_schema_refuses_a_wrong_mark():
    scone = get_protocol("scone-icl")
    assert [c.header for c in scone.columns if c.added] == ["Consistency"]
    assert get_protocol("scone-nlg").columns[-1].added
    with pytest.raises(ConfigError, match="added"):
        parse_protocols({"p": {"table": {"columns": [["accuracy", "A", "extra"]]},
                               "variants": [{"name": "a", "benchmark": "scone", "split": "test", "strategy": "brown"}]}}, "p.yaml")
    with pytest.raises(ConfigError, match="units"):
        parse_protocols({"p": {"table": {"units": "percentage"},
                               "variants": [{"name": "a", "benchmark": "scone", "split": "test", "strategy": "brown"}]}}, "p.yaml")


def test_scone_table_marks_its_consistency_column_as_not_the_papers(tmp_path):
    records = [{"variant": "brown/zero", "metrics": {"accuracy": 0.5, "consistency": 0.25, "n": 4}, "uncertainty": {}}]
    table = protocol_markdown(get_protocol("scone-icl"), records, "m", resamples=0, seed=0)
    row = _cells(table, "brown/zero")
    assert row["Overall"] == "0.50" and row["Consistency †"] == "0.25"  # fractions, as Table 4 prints them
    assert "†: a column negtrain adds; the paper's table does not have it." in table


# ---- TINAD ---------------------------------------------------------------------------------


def _tinad_rows(offset: int, patterns: tuple[int, ...]) -> list[dict]:
    rows = []
    for t, p in enumerate(patterns):
        tid = offset + t
        antonymy = p in (2, 4)
        rows += [
            row(tid, p, "input_affirmation", not antonymy, f"s{tid}a."),
            row(tid, p, "input_negation", antonymy, f"s{tid}n."),
            row(tid, p, "distractor_affirmation", False, f"s{tid}da."),
            row(tid, p, "distractor_negation", True, f"s{tid}dn."),
        ]
    return rows


def test_tinad_protocol_pools_every_split_and_counts_table_5_by_hand(tmp_path, monkeypatch):
    data = tmp_path / "data"
    splits = {"train": _tinad_rows(0, (1, 2, 1)), "validation": _tinad_rows(10, (2,)), "test": _tinad_rows(20, (1, 3))}
    for split, rows in splits.items():
        write_split(data, split, rows)
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(data))
    out = tmp_path / "run"
    (out / "predictions").mkdir(parents=True)
    records = []
    hand: dict[tuple[int, str], list[int]] = {}
    for split, rows in splits.items():
        lines = []
        for i, r in enumerate(rows):
            predicted = (i % 3 != 0)  # True for two of every three sentences, whatever the label
            lines.append({"id": f"tinad/{split}/{i}", "prediction": "True" if predicted else "False"})
            cell = ("distractor_" if r["isDistractor"] else "input_") + ("affirmation" if r["negation_type"] == "affirmation" else "negation")
            count = hand.setdefault((r["pattern_id"], cell), [0, 0])
            count[0] += predicted == r["label"]
            count[1] += 1
        path = out / "predictions" / f"tinad-{split}-plain-{split}.jsonl"
        path.write_text("".join(json.dumps(x) + "\n" for x in lines))
        scored = score_file("tinad", split, path, bootstrap=0)
        records.append({"variant": f"plain/{split}", "metrics": scored.metrics, "uncertainty": {}})
    table = protocol_markdown(get_protocol("tinad-zeroshot"), records, "m", resamples=0, seed=0, out=out)
    # Table 4's row: the three splits' predictions as one set, in percent with one decimal
    right = sum(c[0] for c in hand.values())
    total = sum(c[1] for c in hand.values())
    assert total == 4 * 6
    row = _cells(table, "plain: pooled")
    assert row["Accuracy: All"] == f"{100 * right / total:.1f}" and row["n"] == str(total)
    ia = hand[1, "input_affirmation"][0] + hand[2, "input_affirmation"][0] + hand[3, "input_affirmation"][0]
    assert row["W/o Distractor: Affirmation"] == f"{100 * ia / 6:.1f}"
    # the Random row: every sentence of every split, answered at random
    random = _cells(table, "Random")
    assert random["n"] == str(total) and 0.0 <= float(random["Accuracy: All"]) <= 100.0
    assert len(random["Accuracy: All"].split(".")[1]) == 1
    assert "True or False drawn uniformly at random" in table and "train, validation, test" in table
    # Table 5: accuracy per pattern over every split, in percent with two decimals, by hand
    section = table[table.index("## Table 5"):]
    for (pid, name) in ((1, "Synonymy1"), (2, "Antonymy1"), (3, "Synonymy2")):
        line = next(x for x in section.splitlines() if x.startswith(f"| plain | #{pid:02d} {name} |"))
        cells = [c.strip() for c in line.strip("|").split("|")][2:]
        expected = [f"{100 * hand[pid, c][0] / hand[pid, c][1]:.2f}" for c in ("input_affirmation", "input_negation")]
        assert cells == expected, (pid, cells, expected)
    # Figure 2: each pattern's overall accuracy (every cell), per split and pooled, percent with one decimal
    figure = table[table.index("## Figure 2"):]
    pooled = next(x for x in figure.splitlines() if x.startswith("| plain: pooled |"))
    cells = [c.strip() for c in pooled.strip("|").split("|")][1:]
    by_pattern = {p: [sum(c[i] for (q, _), c in hand.items() if q == p) for i in (0, 1)] for p in (1, 2, 3)}
    assert cells == [f"{100 * r / n:.1f}" for r, n in by_pattern.values()] + ["-"] * 8
    train = next(x for x in figure.splitlines() if x.startswith("| plain/train |"))
    assert [c.strip() for c in train.strip("|").split("|")][3] == "-"  # train has no pattern #03: undefined, not 0
    assert "Drawn in `protocol-figure2.png`" in figure and (out / "protocol-figure2.png").is_file()
    assert "Values in percent (the metric's fraction times 100), 1 decimal place(s)" in table


def test_the_random_row_is_a_seeded_draw_scored_like_a_model(tmp_path, monkeypatch):
    from negtrain.evaluation.protocol import random_answers

    data = tmp_path / "data"
    for split, offset in (("train", 0), ("validation", 50), ("test", 100)):
        write_split(data, split, _tinad_rows(offset, (1, 2, 3, 1, 1) * 4))
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(data))
    a, _ = random_answers(["train", "validation", "test"], 0, 0)
    b, _ = random_answers(["train", "validation", "test"], 0, 0)
    c, _ = random_answers(["train", "validation", "test"], 0, 1)
    assert a == b and a != c
    assert a["n"] == 3 * 20 * 4 and 0.3 < a["accuracy"] < 0.7


def test_strict_is_printed_with_its_groups():
    """NaN-NLI's Strict (all hypotheses of a premise right) says of how many premise groups: k/n."""
    protocol = get_protocol("nannli-tables")
    record = {"variant": protocol.variants[0].name, "metrics": {"f1": 0.5, "strict": 0.25, "groups_scored": 8.0, "n": 40.0},
              "uncertainty": {}}
    row = _cells(protocol_markdown(protocol, [record], "m", 0, 0), protocol.variants[0].name)
    assert row["Strict"] == "0.250 (2/8)" and row["Standard: All"] == "0.500"
    none = dict(record, metrics={"f1": 0.5, "strict": None, "groups_scored": 0.0, "n": 40.0})
    assert _cells(protocol_markdown(protocol, [none], "m", 0, 0), protocol.variants[0].name)["Strict"] == "undefined (0 complete groups)"
