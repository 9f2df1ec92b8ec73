"""The NLI papers' tables as protocols (`evaluate --protocol negnli-table7 | nannli-tables |
scone-finetuned`): NegNLI's Table 7 MB column and NaN-NLI's Table 9 denominators from the mirrored
data, exactly; a fresh-head MiniLM runs a protocol end to end and gets the paper's columns; the
MNLI dev negation subset on a hand-written fixture; NegNLI's card scores what the paper scores
(all of NegNLI, or the split held out from the run's NegNLI training split) with an MB column."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml

from conftest import MINILM, make_fake_run
from negtrain.benchmarks.registry import get_benchmark
from negtrain.cli import main
from negtrain.core.errors import DataError
from negtrain.core import labels as nli
from negtrain.evaluation.card_plan import CardRequest, plan_card
from negtrain.evaluation.card_render import card_markdown
from negtrain.evaluation.protocol import eval_entries, protocol_markdown
from negtrain.io.records import EvalRecord
from negtrain.prompts.protocols import get_protocol

#: Hossain et al. (2020), Table 7, MB column: RTE, SNLI, MNLI by Tneg-H, T-Hneg, Tneg-Hneg, All.
TABLE_7_MB = {
    "Tneg-H": ("80.2", "62.0", "45.8"),
    "T-Hneg": ("91.0", "41.0", "47.6"),
    "Tneg-Hneg": ("65.6", "69.8", "47.0"),
    "All": ("78.9", "56.5", "39.3"),
}
#: Truong et al. (2022), Table 9's operations and their denominators in nan.csv (rows whose cell is 1).
TABLE_9_N = {
    "Indefinite quantifier change": 74, "Numerical quantifier change": 27, "Comparative quantifier change": 20,
    "Negator addition or deletion": 118, "Negator position change": 101, "Negator token change": 6,
    "Clause or sub-clause deletion": 36, "Focus particle change": 16, "Lexical change": 13, "Syntactic change": 4,
}
LIMIT = ["--trainer.limit_val_batches=1", "--data.eval_batch_size=8", "--trainer.torch_threads=1", "--trainer.precision=32-true"]


def _section(text: str, title: str) -> dict[str, list[str]]:
    """The table under ``## <title>...``: first cell -> the other cells."""
    lines = text.splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith(f"## {title}"))
    rows = {}
    for line in lines[start + 1:]:
        if line.startswith("## "):
            break
        if line.startswith("| ") and not line.startswith("|---"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows[cells[0]] = cells[1:]
    return rows


def test_negnli_protocol_prints_table_7s_twelve_mb_numbers_from_the_mirrored_data(data_dir):
    text = protocol_markdown(get_protocol("negnli-table7"), [], "m", 20, 0)
    table = _section(text, "Table 7")
    assert table["Test pairs"] == ["RTE: MB", "RTE: model", "SNLI: MB", "SNLI: model", "MNLI: MB", "MNLI: model"]
    for row, mb in TABLE_7_MB.items():
        assert tuple(table[row][0::2]) == mb, row
        assert table[row][1::2] == ["-", "-", "-"]  # no model ran
    assert "dev" in table and "dev-neg" in table


def test_negnli_protocol_takes_the_models_accuracy_and_the_mb_of_the_scored_pairs_from_its_records(data_dir):
    records = [{"variant": "rte", "metrics": {"accuracy": 0.5, "accuracy/Tneg-H": 0.25, "majority_baseline": 0.75,
                                              "majority_baseline/Tneg-H": 1.0, "n": 1500.0}}]
    table = _section(protocol_markdown(get_protocol("negnli-table7"), records, "m", 20, 0), "Table 7")
    assert table["All"][:2] == ["75.0", "50.0"] and table["Tneg-H"][:2] == ["100.0", "25.0"]
    assert table["All"][2] == "56.5"  # SNLI did not run: its MB from the data


def _nannli_record(wrong_negator_rows: int) -> dict:
    """NaN-NLI's metric on every pair, right except ``wrong_negator_rows`` of the pairs with one
    negator addition or deletion (and every pair with two, which Table 9 leaves out of that row)."""
    bench = get_benchmark("nannli")
    examples = bench.load("test")
    op = "Negator addition or deletion"
    once = [i for i, e in enumerate(examples) if op in e.meta["operations"]]
    wrong = set(once[:wrong_negator_rows]) | {i for i, e in enumerate(examples) if op in e.meta["operations_repeated"]}
    predicted = []
    for i, e in enumerate(examples):
        label = e.label if i not in wrong else ("entailment" if e.label != "entailment" else "contradiction")
        predicted.append(nli.NLI3.index(label))
    metric = bench.metric(examples)
    metric.update(torch.arange(len(examples)), torch.tensor(predicted))
    return {"variant": "test", "metrics": {k: float(v) for k, v in metric.compute().items()}}


def test_nannli_protocol_gives_table_9s_denominators_and_43_of_118_is_the_papers_0364(data_dir):
    text = protocol_markdown(get_protocol("nannli-tables"), [_nannli_record(43)], "m", 20, 0)
    table9 = _section(text, "Table 9")
    assert table9["Operation type"] == ["ER", "n †"]  # the paper's column, and negtrain's count marked as added
    assert {op: int(cells[1]) for op, cells in table9.items() if op != "Operation type"} == TABLE_9_N
    # 43 of the 118 wrong: the paper's 0.364. Counting the six pairs with two such edits (here
    # all wrong) would give 49/124 = 0.395; no k/124 is 0.364.
    assert table9["Negator addition or deletion"][0] == "0.364"
    assert table9["Syntactic change"][0] == "0.000"
    assert all(round(k / 124, 3) != 0.364 for k in range(125))
    table8 = _section(text, "Table 8")
    assert table8["not + affixially-negated adjective/adverb"][1] == "26"
    table10 = _section(text, "Table 10")
    assert table10["All"][2:] == ["258", "133"]
    table13 = _section(text, "Table 13")
    assert table13["Hypothesis: None"][3] == "86"


def test_scone_finetuned_columns_are_table_2s_in_its_order():
    protocol = get_protocol("scone-finetuned")
    assert [c.header for c in protocol.columns if not c.added] == [
        "No Negation", "One Not Scoped", "Two Not Scoped", "Two Scoped", "One Scoped", "One Scoped, One not Scoped"]
    assert protocol.units == "percent" and protocol.decimals == 1
    assert all(v.strategy is None for v in protocol.variants)


def test_evaluate_list_names_the_nli_protocols_with_paper_and_table(capsys):
    assert main(["evaluate", "--list"]) == 0
    out = capsys.readouterr().out
    for name, table in (("negnli-table7", "Table 7"), ("nannli-tables", "Tables 6, 8, 9, 10 and 13"), ("scone-finetuned", "Table 2")):
        line = next(x for x in out.splitlines() if x.strip().startswith(f"{name}:"))
        assert table in line


def test_a_fresh_head_minilm_runs_the_nannli_protocol_with_a_three_way_head(data_dir, tmp_path, capsys):
    out = tmp_path / "card"
    code = main(["evaluate", "--model", MINILM, "--family", "nli", "--protocol", "nannli-tables", "--out", str(out), *LIMIT])
    assert code == 0, capsys.readouterr().err
    text = (out / "protocol.md").read_text()
    head = next(x for x in text.splitlines() if x.startswith("| variant |"))
    assert "Standard: Contradiction" in head and "Strict" in head
    row = next(x for x in text.splitlines() if x.startswith("| test |"))
    # A 3-way head was made for the 3-way benchmark: the Standard (3-way) F1 is a number, not `-`.
    assert row.split("|")[2].strip() != "-"
    assert "## Table 9" in text and "scored 8 of the split's 258 pairs" in text
    assert (out / "predictions" / "nannli-test-test.jsonl").is_file()
    assert "Chance level" in (out / "card.md").read_text()


def _dev_fixture(root: Path) -> None:
    """MNLI dev matched, five pairs: a cue in the premise (never), in the hypothesis (isn't), in
    both (no, not), none ("note" and "knot" are not "not"), none."""
    rows = [("She never saw the film.", "She saw the film.", 2),
            ("The shop opens at nine.", "The shop isn't open at nine.", 2),
            ("No one came.", "Not everyone came.", 0),
            ("He wrote a note about a knot.", "He wrote something.", 0),
            ("A dog runs.", "An animal runs.", 0)]
    path = root / "nyu-mll" / "multi_nli" / "validation_matched.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps({"pairID": f"{i}x", "premise": p, "hypothesis": h, "label": y, "genre": "fiction"}) + "\n"
                            for i, (p, h, y) in enumerate(rows)))


def test_mnli_dev_negation_subset_on_a_fixture_and_the_table_7_dev_rows(data_dir, tmp_path, monkeypatch):
    _dev_fixture(tmp_path / "data")
    monkeypatch.setenv("NEGTRAIN_DATA_DIR", f"{tmp_path / 'data'}:{data_dir}")
    bench = get_benchmark("mnli")
    neg = bench.load("validation_matched_neg")
    # By hand: pairs 0, 1 and 2 have a cue; 3 and 4 none.
    assert [e.id for e in neg] == ["mnli/validation_matched/0x", "mnli/validation_matched/1x", "mnli/validation_matched/2x"]
    assert len(bench.load("validation_matched")) == 5
    protocol = get_protocol("negnli-table7")
    assert [e["variant"] for e in eval_entries(protocol, chat=False)] == ["rte", "snli", "mnli", "mnli-dev", "mnli-dev-neg"]
    table = _section(protocol_markdown(protocol, [], "m", 20, 0), "Table 7")
    # MB by hand: dev 3 of 5 entailment; dev-neg 2 of 3 contradiction.
    assert table["dev"][4] == "60.0" and table["dev-neg"][4] == "66.7"


def test_without_mnli_dev_the_protocol_skips_its_dev_rows_and_says_where_it_looked(data_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("NEGTRAIN_CACHE_DIR", str(tmp_path / "empty-cache"))
    protocol = get_protocol("negnli-table7")
    assert [e["variant"] for e in eval_entries(protocol, chat=False)] == ["rte", "snli", "mnli"]
    said = capsys.readouterr().out
    assert "mnli-dev skipped" in said and "validation_matched.jsonl" in said and "NEGTRAIN_DATA_DIR" in said
    with pytest.raises(DataError, match=r"looked in .*validation_matched\.jsonl"):
        get_benchmark("mnli").load("validation_matched_neg")


def _run_trained_on(tmp_path: Path, train: list[dict]) -> Path:
    run = make_fake_run(tmp_path / "run")
    recipe = yaml.safe_load((run / "recipe.yaml").read_text().split("\n", 1)[1])
    recipe["data"]["train"] = train
    (run / "recipe.yaml").write_text("# recipe: test\n" + yaml.safe_dump(recipe, sort_keys=False))
    return run


def test_negnli_card_scores_all_of_negnli_unless_the_run_trained_on_it(data_dir, tmp_path):
    plain = plan_card(CardRequest(model=MINILM, family="nli"))
    assert {(e.benchmark, e.split) for e in plain.plan.evals} >= {("negnli-rte", "all"), ("negnli-snli", "all"), ("negnli-mnli", "all")}
    run = _run_trained_on(tmp_path, [{"benchmark": "negnli-rte", "split": "train"}])
    card = plan_card(CardRequest(model=str(run)))
    assert ("negnli-rte", "test") in {(e.benchmark, e.split) for e in card.plan.evals}
    assert ("negnli-rte", "all") not in {(e.benchmark, e.split) for e in card.plan.evals}
    named = plan_card(CardRequest(model=str(run), benchmarks="negnli-rte"))
    assert [(e.benchmark, e.split) for e in named.plan.evals] == [("negnli-rte", "test")]


def test_negnli_card_shows_the_mb_column_and_names_its_set():
    records = [EvalRecord({"stage": "validate", "benchmark": "negnli-snli", "split": "all",
                           "metrics": {"accuracy": 0.5, "majority_baseline": 0.565, "majority_baseline/Tneg-H": 0.62,
                                       "consistency": 0.1, "n": 1500.0}}),
               EvalRecord({"stage": "validate", "benchmark": "scone", "split": "test", "metrics": {"accuracy": 0.9, "n": 1200.0}})]
    text = card_markdown(records, "m", "nli", [])
    head = next(x for x in text.splitlines() if x.startswith("| benchmark |"))
    assert head.startswith("| benchmark | split | score | baseline | MB (majority baseline) | consistency |")
    row = next(x for x in text.splitlines() if x.startswith("| negnli-snli |"))
    assert row.split("|")[5].strip() == "0.5650"
    assert "MB (majority baseline)" in head and "majority_baseline/Tneg-H" not in head
    assert "- negnli-snli/all: every pair of NegNLI" in text and "(Table 7)" in text


@pytest.mark.slow
def test_full_negnli_protocol_run_prints_table_7s_mb_from_its_own_records(data_dir, tmp_path, capsys):
    """Every pair scored (no batch limit): the MB column comes from the run's records, over the
    pairs the model was scored on, and is still the paper's."""
    out = tmp_path / "card"
    code = main(["evaluate", "--model", MINILM, "--family", "nli", "--protocol", "negnli-table7", "--out", str(out),
                 "--data.eval_batch_size=64", "--model.max_length=64", "--trainer.precision=32-true"])
    assert code == 0, capsys.readouterr().err
    records = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [(r["variant"], r["metrics"]["n"]) for r in records] == [("rte", 1500), ("snli", 1500), ("mnli", 1500)]
    table = _section((out / "protocol.md").read_text(), "Table 7")
    for row, mb in TABLE_7_MB.items():
        assert tuple(table[row][0::2]) == mb, row
        assert all(cell != "-" for cell in table[row][1::2])
    assert "scored" not in (out / "protocol.md").read_text().split("## Table 7", 1)[1].split("MB:", 1)[0]
