"""ScoNe-NLG (She et al. 2023, section 4, Table 5): the real mirrored rows and triplets, malformed
rows named by file/line/field, the paper's agreed-only metric and Fleiss' kappa on two annotators'
judgements counted by hand, and the outcome_choice proxy scored end to end by a tiny causal LM."""

from __future__ import annotations

import collections
import csv
import io
import json
from pathlib import Path

import pytest

from negtrain.benchmarks.scone_nlg import SconeNlg
from negtrain.cli import main
from negtrain.core.errors import DataError
from tiny_models import choice_loglikelihoods_one_at_a_time, save_tiny_llama, validate_tiny

HEADER = ["", "sentence", "hyper", "hypo", "gold_outcome", "prompt_type", "frame_num"]
#: Three triplets in two frames, as the upstream file lays them out (neg, not_scope, pos).
ROWS = [
    ["I recently confirmed that John is not allergic to any shellfish. So it makes sense that when we served shrimp", "shellfish", "shrimp", "No allergic reaction", "neg", "0"],
    ["I didn’t know that John is allergic to shrimp. But it makes sense that when we served shellfish", "shellfish", "shrimp", "Allergic reaction", "not_scope", "0"],
    ["I recently confirmed that John is allergic to shrimp. So it makes sense that when we served shellfish", "shellfish", "shrimp", "Allergic reaction", "pos", "0"],
    ["I recently confirmed that John is not allergic to any shellfish. So it makes sense that when we served crab", "shellfish", "crab", "No allergic reaction", "neg", "0"],
    ["I didn’t know that John is allergic to crab. But it makes sense that when we served shellfish", "shellfish", "crab", "Allergic reaction", "not_scope", "0"],
    ["I recently confirmed that John is allergic to crab. So it makes sense that when we served shellfish", "shellfish", "crab", "Allergic reaction", "pos", "0"],
    ["There is a restaurant down the street that does not have noodles. He ordered udon, and the waiter said", "noodles", "udon", "we don’t serve HYPO here", "neg", "3"],
    ["There is a restaurant not far away that serves udon. He ordered noodles, and the waiter said", "noodles", "udon", "yes we have HYPO", "not_scope", "3"],
    ["There is a restaurant down the street that has udon. He ordered noodles, and the waiter said", "noodles", "udon", "yes we have HYPO", "pos", "3"],
]


def write_nlg(root: Path, rows=ROWS) -> Path:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(HEADER)
    for i, row in enumerate(rows):
        w.writerow([i, *row])
    path = root / "selenashe/ScoNe/scone_nlg/scone_nlg.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(out.getvalue(), encoding="utf-8")
    return path


@pytest.fixture
def fixture_data(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "data"
    write_nlg(root)
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(root))
    return root


def test_real_file_has_74_triplets_of_three_conditions(data_dir):
    examples = SconeNlg().load("test")
    assert len(examples) == 222
    assert [e.id for e in examples[:2]] == ["scone_nlg/test/0", "scone_nlg/test/1"] and examples[-1].id == "scone_nlg/test/221"
    assert collections.Counter(e.subset for e in examples) == {"no_negation": 74, "one_scoped": 74, "one_not_scoped": 74}
    triplets = collections.defaultdict(list)
    for e in examples:
        triplets[e.group].append(e)
    assert len(triplets) == 74
    for members in triplets.values():
        assert sorted(e.subset for e in members) == ["no_negation", "one_not_scoped", "one_scoped"]
        # the file's layout: three consecutive rows
        rows = sorted(int(e.id.rsplit("/", 1)[1]) for e in members)
        assert rows == list(range(rows[0], rows[0] + 3))
    first = examples[0]
    assert first.inputs == ("I recently confirmed that John is not allergic to any shellfish. So it makes sense that when we served shrimp",)
    assert first.subset == "one_scoped" and first.meta["outcomes"] == ("No allergic reaction", "Allergic reaction") and first.label == "0"
    # HYPO in an ending stands for the row's hypo
    waiter = next(e for e in examples if e.meta["frame"] == 3 and e.subset == "one_scoped")
    assert waiter.meta["outcomes"] == (f"we don’t serve {waiter.meta['hypo']} here", f"yes we have {waiter.meta['hypo']}")


@pytest.mark.parametrize(
    "change,where,message",
    [
        ((1, 4, "scoped"), ":3: field 'prompt_type'", "expected one of ['pos', 'neg', 'not_scope'], got 'scoped'"),
        ((2, 5, "zero"), ":4: field 'frame_num'", "expected a frame number"),
        ((1, 4, "neg"), ":3: field 'prompt_type'", "a second 'neg' row for the triplet (frame 0, 'shellfish'/'shrimp'); the first is at line 2"),
        ((4, 3, "Rash"), ":6: field 'gold_outcome'", "a third ending 'Rash' in frame 0"),
        ((4, 3, ""), ":6: field 'gold_outcome' is missing or empty", ""),
    ],
)
def test_a_malformed_row_is_one_error_naming_file_line_field(tmp_path, monkeypatch, change, where, message):
    row, col, value = change
    rows = [list(r) for r in ROWS]
    rows[row][col] = value
    path = write_nlg(tmp_path, rows)
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(tmp_path))
    with pytest.raises(DataError) as err:
        SconeNlg().load("test")
    assert f"{path}{where}" in str(err.value) and message in str(err.value)


def test_a_triplet_lacking_a_condition_is_an_error(tmp_path, monkeypatch, capsys):
    path = write_nlg(tmp_path, ROWS[:5] + ROWS[6:])
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", str(tmp_path))
    preds = tmp_path / "j.jsonl"
    preds.write_text(json.dumps({"id": "scone_nlg/test/0", "coherent": True}) + "\n")
    assert main(["evaluate", "--benchmark", "scone_nlg", "--split", "test", "--predictions", str(preds)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("error: ")
    assert f"{path}:5: field 'prompt_type': the triplet (frame 0, 'shellfish'/'crab') lacks its 'pos' row" in err


# ------------------------------------------------------------------------------------------------
# The paper's metric on people's judgements

#: (first annotator, second annotator) per row of ROWS.
TWO = [(True, True), (True, False), (True, True),
       (False, False), (True, True), (True, True),
       (True, True), (True, True), (False, True)]


def _judgements(tmp_path: Path, values) -> Path:
    path = tmp_path / "judged.jsonl"
    path.write_text("".join(json.dumps({"id": f"scone_nlg/test/{i}", "coherent": v}) + "\n" for i, v in enumerate(values)))
    return path


def test_two_annotators_count_only_agreed_items_with_fleiss_kappa(fixture_data, tmp_path, capsys):
    path = _judgements(tmp_path, [list(v) for v in TWO])
    assert main(["evaluate", "--benchmark", "scone_nlg", "--split", "test", "--predictions", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    m = out["metrics"]
    # By hand. Disagreed: rows 1 (not_scope) and 8 (pos); 7 of 9 agreed.
    assert (m["judged"], m["agreed"], m["n"]) == (9, 7, 7)
    # one_scoped = rows 0, 3, 6: coherent, incoherent, coherent
    assert m["accuracy/one_scoped"] == pytest.approx(2 / 3)
    # one_not_scoped = rows 4, 7 (1 disagreed); no_negation = rows 2, 5 (8 disagreed): all coherent
    assert m["accuracy/one_not_scoped"] == 1.0 and m["accuracy/no_negation"] == 1.0
    assert m["accuracy"] == pytest.approx(6 / 7)
    # Triplets: only rows 3-5 are all agreed, and row 3 is incoherent.
    assert m["groups_scored"] == 1 and m["consistency"] == 0.0
    # Fleiss' kappa, 2 raters: P-bar = 7/9; 14 of 18 votes coherent, p = 7/9,
    # P_e = (7/9)^2 + (2/9)^2 = 53/81; kappa = (63/81 - 53/81) / (28/81) = 5/14.
    assert m["fleiss_kappa"] == pytest.approx(5 / 14)
    assert out["predicted_labels"] == ["incoherent/incoherent", "incoherent/coherent", "coherent/incoherent", "coherent/coherent"]
    assert any("only the 7 of 9 items they agree on are counted" in n for n in out["notes"])
    # intervals like every benchmark: triplets resampled, kappa from the bootstrap
    assert out["bootstrap"]["unit"] == "triplet" and out["bootstrap"]["units"] == 3
    assert set(out["uncertainty"]) >= {"accuracy", "consistency", "fleiss_kappa"}
    assert "judged" not in out["uncertainty"] and "outcome_choice_accuracy" not in m


def test_kappa_is_one_when_annotators_agree_on_both_kinds(fixture_data, tmp_path):
    from negtrain.evaluation.predictions import score_file

    agree = [(v, v) for v in (True, False, True, True, True, False, True, True, True)]
    m = score_file("scone_nlg", "test", _judgements(tmp_path, [list(v) for v in agree]), bootstrap=0).metrics
    assert m["fleiss_kappa"] == pytest.approx(1.0) and m["agreed"] == 9 and m["accuracy"] == pytest.approx(7 / 9)
    # consistency: triplet 0 has row 1 incoherent, triplet 1 row 5; triplet 2 is all coherent
    assert m["consistency"] == pytest.approx(1 / 3) and m["groups_scored"] == 3


def test_one_annotator_counts_every_item(fixture_data, tmp_path):
    from negtrain.evaluation.predictions import score_file

    s = score_file("scone_nlg", "test", _judgements(tmp_path, [a for a, _ in TWO]), bootstrap=0)
    m = s.metrics
    assert m["n"] == 9 and m["accuracy"] == pytest.approx(7 / 9)
    assert m["accuracy/one_scoped"] == pytest.approx(2 / 3) and m["accuracy/one_not_scoped"] == 1.0
    assert m["accuracy/no_negation"] == pytest.approx(2 / 3)
    assert m["consistency"] == pytest.approx(1 / 3)  # only triplet 0 (rows 0-2) is all coherent
    assert "fleiss_kappa" not in m and "agreed" not in m


@pytest.mark.parametrize(
    "lines,message",
    [
        ([{"id": "scone_nlg/test/0", "coherent": "yes"}], "judged.jsonl:1: field 'coherent': expected true/false"),
        ([{"id": "scone_nlg/test/0", "coherent": [True, True, False]}], "judged.jsonl:1: field 'coherent': expected true/false"),
        ([{"id": "scone_nlg/test/0", "coherent": [True, True]}, {"id": "scone_nlg/test/1", "coherent": True}],
         "judged.jsonl:2: field 'coherent': 1 judgement(s), but the lines before give 2"),
        ([{"id": "scone_nlg/test/0", "coherent": True}, {"id": "scone_nlg/test/1"}], "judged.jsonl:2: no 'coherent' field"),
    ],
)
def test_malformed_judgements_are_named(fixture_data, tmp_path, lines, message):
    from negtrain.evaluation.predictions import PredictionError, score_file

    path = tmp_path / "judged.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    with pytest.raises(PredictionError) as err:
        score_file("scone_nlg", "test", path, allow_missing=True)
    assert message in str(err.value)


def test_completions_without_judgements_say_how_to_judge_them(fixture_data, tmp_path):
    from negtrain.evaluation.predictions import PredictionError, score_file

    path = tmp_path / "completions.jsonl"
    path.write_text("".join(json.dumps({"id": f"scone_nlg/test/{i}", "prediction": "he was fine."}) + "\n" for i in range(9)))
    with pytest.raises(PredictionError, match=r"completions.jsonl:1: .*give \"coherent\""):
        score_file("scone_nlg", "test", path)


# ------------------------------------------------------------------------------------------------
# The outcome_choice proxy


def test_outcome_choice_from_a_file_is_never_the_papers_metric(fixture_data, tmp_path):
    from negtrain.evaluation.predictions import score_file

    examples = SconeNlg().load("test")
    picks = []
    for i, e in enumerate(examples):
        pick = int(e.label) if i not in (0, 4) else 1 - int(e.label)  # rows 0 and 4 wrong
        picks.append(pick if i % 2 else e.meta["outcomes"][pick])  # the index or the ending's text
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps({"id": e.id, "prediction": p}) + "\n" for e, p in zip(examples, picks, strict=False)))
    m = score_file("scone_nlg", "test", path).metrics
    assert m["outcome_choice_accuracy"] == pytest.approx(7 / 9)
    assert m["outcome_choice_accuracy/one_scoped"] == pytest.approx(2 / 3)  # row 0 wrong
    assert m["outcome_choice_accuracy/one_not_scoped"] == pytest.approx(2 / 3)  # row 4 wrong
    assert m["outcome_choice_consistency"] == pytest.approx(1 / 3)
    assert not [k for k in m if k.startswith(("accuracy", "consistency"))]


def test_a_causal_lm_scores_the_proxy_like_a_direct_loop(fixture_data, tmp_path, one_thread):
    from negtrain.evaluation.predictions import score_file

    path = save_tiny_llama(tmp_path / "m", None)
    run = validate_tiny(path, "causal_lm", [{"benchmark": "scone_nlg", "split": "test"}], tmp_path / "run", eval_batch_size=4)
    (line,) = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    got = line["metrics"]

    bench = SconeNlg()
    examples = bench.load("test")
    scores, _ = choice_loglikelihoods_one_at_a_time(path, "causal_lm", bench, examples)
    right = [int(ll.argmax()) == int(e.label) for ll, e in zip(scores, examples, strict=True)]
    assert got["n"] == 9 and got["outcome_choice_accuracy"] == pytest.approx(sum(right) / 9)
    assert "accuracy" not in got and line["uncertainty"]["outcome_choice_accuracy"]["ci95"] is not None
    written = run / "predictions" / "scone_nlg-test-validate.jsonl"
    assert score_file("scone_nlg", "test", written).metrics["outcome_choice_accuracy"] == pytest.approx(got["outcome_choice_accuracy"])
