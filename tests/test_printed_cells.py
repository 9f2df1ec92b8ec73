"""Every number the NLI papers print in a table a protocol lays out is checked against the
protocol's definition of that cell (some k/n of its n; some 2·TP/(support + predicted); the mean its
row's cells define), and protocol.md says, beside the table, with the arithmetic, which printed
numbers no run can give. NaN-NLI's "All" F1: which mean the printed numbers fit, recomputed from
the tables' own per-class cells and supports, and from every confusion matrix they allow."""

from __future__ import annotations

import itertools
from collections import Counter
from fractions import Fraction

import pytest
import torch

from negtrain.benchmarks.nannli import F1_ORDER, TABLE_8 as MERGED
from negtrain.benchmarks.registry import get_benchmark
from negtrain.core import labels as nli
from negtrain.core.errors import ConfigError
from negtrain.evaluation.card_plan import CardRequest, plan_card
from negtrain.evaluation.paper_tables import (IGNORE_NEGATION, NANNLI_QUANT_SUPPORT, NANNLI_SUPPORT, PRINTED, TABLE_8,
                                              TABLE_9)
from negtrain.evaluation.printed_cells import ClassF1, Mean, Share, interval, reachable, shown
from negtrain.evaluation.protocol import ignore_negation, protocol_markdown
from negtrain.prompts.protocols import get_protocol

#: (protocol, cell) -> the printed cells no run of the protocol can give, found by hand.
UNREACHABLE = {
    # ScoNe Tables 2 and 6: a condition is 200 test pairs, so a percent with one decimal is a multiple of 0.5.
    ("scone-finetuned", "Table 2 (DeBERTa), MAF-NLI + MoNLI, No Negation"),
    ("scone-finetuned", "Table 2 (DeBERTa), MAF-NLI + MED, No Negation"),
    ("scone-finetuned", "Table 2 (DeBERTa), MAF-NLI + Neg-NLI, No Negation"),
    ("scone-finetuned", "Table 2 (DeBERTa), MAF-NLI + MoNLI, Two Scoped"),
    ("scone-finetuned", "Table 2 (DeBERTa), MAF-NLI + MED, Two Scoped"),
    ("scone-finetuned", "Table 2 (DeBERTa), MAF-NLI + Neg-NLI, Two Scoped"),
    ("scone-finetuned", "Table 6 (RoBERTa), MAF-NLI + MoNLI, No Negation"),
    ("scone-finetuned", "Table 6 (RoBERTa), MAF-NLI + MED, No Negation"),
    ("scone-finetuned", "Table 6 (RoBERTa), MAF-NLI + Neg-NLI, No Negation"),
    ("scone-finetuned", "Table 6 (RoBERTa), MAF-NLI + MED, Two Scoped"),
    ("scone-finetuned", "Table 6 (RoBERTa), MAF-NLI + Neg-NLI, Two Scoped"),
    # ScoNe Table 4: Ignore-Negation is four conditions of six right, 0.667.
    ("scone-icl", "Table 4, Ignore-Negation, Overall"),
    # NaN-NLI: 0.629 is no mean of 0.692, 0.684, 0.366 (weighted 0.633, macro 0.581) nor k/258.
    ("nannli-tables", "Table 6, RoBERTa-MNLI-NegNLI, Standard: All"),
    ("nannli-tables", "Table 10, All, NaN-NLI"),
}


def _brute_reachable(printed: str, n: int, scale: int) -> bool:
    lo, hi = interval(printed)
    return any(lo <= Fraction(k * scale, n) <= hi for k in range(n + 1))


def test_reachable_by_hand_and_by_trying_every_k():
    assert not reachable("96.2", 200, 100) and reachable("96.5", 200, 100)  # 192/200 = 96.0, 193/200 = 96.5
    assert reachable("0.364", 118) and not reachable("0.364", 124)  # 43/118 = 0.3644; 45/124 = 0.363, 46/124 = 0.371
    assert reachable("0.12", 8) and reachable("0.13", 8)  # 1/8 = 0.125: either tie rule
    assert reachable("0.250", 48) and not reachable("0.629", 258)
    for n in (*range(1, 25), 118, 200, 258):
        for scale, decimals in ((1, 2), (1, 3), (100, 1)):
            for units in range(0, scale * 10**decimals + 1, 11):
                printed = shown(Fraction(units, 10**decimals), decimals)
                assert reachable(printed, n, scale) == _brute_reachable(printed, n, scale), (printed, n, scale)


def test_a_class_f1_and_a_mean_by_hand():
    # Support 2 of 3 pairs, F1 = 2·TP/(2 + predicted), TP <= predicted <= TP + 1 (one other pair):
    # TP 0: 0; TP 1: 2/3, 2/4; TP 2: 4/4, 4/5. Never 0.4 (2/5 would need two false positives) nor 0.9.
    assert all(ClassF1(2, 3).fits(x) for x in ("0.000", "0.667", "0.500", "1.000", "0.800"))
    assert not ClassF1(2, 3).fits("0.400") and not ClassF1(2, 3).fits("0.900")
    weighted = Mean("support-weighted mean", ("0.692", "0.684", "0.366"), (117, 97, 44))
    assert weighted.fits("0.633") and not weighted.fits("0.629")
    assert Share(258).arithmetic("0.629") == "0.629 is not k/258 for any k: 162/258 = 0.628, 163/258 = 0.632"


def test_the_cells_no_run_can_give_are_exactly_the_known_ones():
    failing = {(p, c.where) for p, cells in PRINTED.items() for c in cells if c.note() is not None}
    assert failing == UNREACHABLE
    for cells in PRINTED.values():
        for c in cells:
            assert c.checks or c.unchecked, c.where  # every printed cell is checked, or says why it cannot be
            for other in c.others:  # a note's "nor ..." is true
                if c.note() is not None:
                    assert not other.fits(c.printed) or other.arithmetic(c.printed).split(" is not ")[1] not in c.note()


def test_every_nli_protocol_has_its_papers_printed_cells():
    from negtrain.benchmarks.base import NliBenchmark
    from negtrain.prompts.protocols import protocols

    nli_protocols = {name for name, p in protocols().items()
                     if all(isinstance(get_benchmark(v.benchmark), NliBenchmark) for v in p.variants)}
    assert nli_protocols == set(PRINTED) == {"scone-icl", "scone-finetuned", "negnli-table7", "nannli-tables"}


def test_the_transcriptions_hold_every_cell_of_the_papers_tables():
    tables = Counter((p, c.table) for p, cells in PRINTED.items() for c in cells)
    assert tables == {("scone-finetuned", "Table 2 (DeBERTa)"): 30, ("scone-finetuned", "Table 6 (RoBERTa)"): 30,
                      ("scone-icl", "Table 4"): 13 * 7, ("negnli-table7", "Table 7"): 6 * 12,
                      ("nannli-tables", "Table 6"): 4 * 8, ("nannli-tables", "Table 8"): 9, ("nannli-tables", "Table 9"): 10,
                      ("nannli-tables", "Table 10"): 8, ("nannli-tables", "Table 13"): 13 * 3}


def _section(text: str, beside: str, protocol: str) -> str:
    """protocol.md's text from the table a note goes beside to the next heading."""
    if beside == "main":
        start = text.index("| variant |")
    else:
        title = next(t.title for t in get_protocol(protocol).tables if t.breakdown == beside)
        start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else len(text)]


@pytest.mark.parametrize("name", sorted(PRINTED))
def test_every_nli_protocol_md_explains_the_printed_numbers_it_cannot_give_beside_their_table(name, data_dir):
    text = protocol_markdown(get_protocol(name), [], "m", 20, 0)
    for cell in PRINTED[name]:
        note = cell.note()
        if note is None:
            assert f"- {cell.where}:" not in text
        else:
            assert note in _section(text, cell.beside, name), cell.where
    if name == "scone-finetuned":
        assert "- Table 2 (DeBERTa), MAF-NLI + MoNLI, No Negation: 96.2 is not k/200 for any k: 192/200 = 96.0, 193/200 = 96.5." in text


def test_the_counts_behind_the_checks_are_the_datas(data_dir):
    scone = Counter(e.subset for e in get_benchmark("scone").load("test"))
    assert set(scone.values()) == {200} and len(scone) == 6
    for source in ("negnli-rte", "negnli-snli", "negnli-mnli"):
        assert set(Counter(e.subset for e in get_benchmark(source).load("all")).values()) == {500}
    examples = get_benchmark("nannli").load("test")
    quant = [e for e in examples if e.meta["quantification"]]
    assert tuple(sum(e.label == c for e in examples) for c in F1_ORDER) == NANNLI_SUPPORT
    assert tuple(sum(e.label == c for e in quant) for c in F1_ORDER) == NANNLI_QUANT_SUPPORT
    assert len({e.group for e in examples}) == 48
    constructions = Counter(MERGED.get(e.subset, e.subset) for e in examples)
    assert {row: constructions[row] for row in TABLE_8} == {row: n for row, (_, n) in TABLE_8.items()}
    assert {op: sum(op in e.meta["operations"] for e in examples) for op in TABLE_9} == {op: n for op, (_, n) in TABLE_9.items()}
    values, _ = ignore_negation(["test"], 0, 0)
    conditions = ("no_negation", "one_not_scoped", "two_not_scoped", "two_scoped", "one_scoped", "one_scoped_one_not_scoped")
    assert tuple(values[f"accuracy/{c}"] for c in conditions) == IGNORE_NEGATION


def _matrices(support: tuple[int, ...], printed: tuple[str, ...]):
    """Every 3×3 confusion matrix (gold rows, C E N) with these row sums whose per-class F1 round to
    ``printed``: from each class's (TP, predicted) pairs that fit, completed off the diagonal."""
    total = sum(support)
    def rounds_to(f: str, tp: int, s: int, p: int) -> bool:  # 2·tp/(s + p) within f ± 0.0005, in integers
        thousandths = int(f.replace(".", ""))
        return (2 * thousandths - 1) * (s + p) <= 4000 * tp <= (2 * thousandths + 1) * (s + p)

    fits = [[(tp, p) for tp in range(s + 1) for p in range(tp, tp + total - s + 1) if s + p and rounds_to(f, tp, s, p)]
            for s, f in zip(support, printed, strict=True)]
    for (t0, p0), (t1, p1) in itertools.product(fits[0], fits[1]):
        for t2, p2 in fits[2]:
            if p0 + p1 + p2 != total:
                continue
            rest = [s - t for s, t in zip(support, (t0, t1, t2), strict=True)]
            for ce in range(rest[0] + 1):  # gold C predicted E; the rest follows from the sums
                cn, ne = rest[0] - ce, p1 - t1 - ce
                nc, en = rest[2] - ne, p2 - t2 - cn
                ec = rest[1] - en
                if min(cn, ne, nc, en, ec) >= 0 and ec + nc == p0 - t0:
                    yield [[t0, ce, cn], [ec, t1, en], [nc, ne, t2]]


def _means(matrix) -> tuple[str, str, str]:
    """(support-weighted F1, macro F1, accuracy) of a confusion matrix, at three decimals."""
    support = [sum(r) for r in matrix]
    predicted = [sum(matrix[g][p] for g in range(3)) for p in range(3)]
    f1 = [Fraction(2 * matrix[c][c], support[c] + predicted[c]) for c in range(3)]
    total = sum(support)
    return (shown(sum(f * s for f, s in zip(f1, support, strict=True)) / total, 3), shown(sum(f1) / 3, 3),
            shown(Fraction(sum(matrix[c][c] for c in range(3)), total), 3))


def test_nannli_all_f1_is_weighted_in_table_6_and_macro_in_table_10s_nan_quant():
    """From the tables' own per-class cells and supports (C 117, E 97, N 44; NaN-Quant 50, 47, 36)."""
    table6 = {c.row: c for c in PRINTED["nannli-tables"] if c.table == "Table 6" and c.column == "Standard: All"}
    binary = {c.row: c for c in PRINTED["nannli-tables"] if c.table == "Table 6" and c.column == "Binary: All"}
    for cell in [*table6.values(), *binary.values()]:
        weighted, macro = (next(m for m in (*cell.checks, *cell.others) if isinstance(m, Mean) and m.definition == d)
                           for d in ("support-weighted mean", "macro mean"))
        assert weighted.fits(cell.printed) == (cell is not table6["RoBERTa-MNLI-NegNLI"]), cell.where
        assert not macro.fits(cell.printed), cell.where
    quant = next(c for c in PRINTED["nannli-tables"] if c.table == "Table 10" and c.column == "NaN-Quant" and c.row == "All")
    assert quant.printed == "0.486" and quant.checks[0].definition == "macro mean" and quant.note() is None
    assert not Mean("w", ("0.477", "0.600", "0.379"), NANNLI_QUANT_SUPPORT).fits("0.486")
    # Every confusion matrix the printed per-class F1 allow says the same.
    allowed = list(_matrices(NANNLI_QUANT_SUPPORT, ("0.477", "0.600", "0.379")))
    assert allowed and {_means(m)[:2] for m in allowed} == {("0.494", "0.486")}
    for model, printed_all in (("RoBERTa-MNLI", "0.580"), ("CueNB-MNLI", "0.605"), ("CueNB-MNLI-NegNLI", "0.624")):
        per_class = tuple(c.printed for c in PRINTED["nannli-tables"] if c.table == "Table 6" and c.row == model
                          and c.column.startswith("Standard: ") and c.column != "Standard: All")
        assert {_means(m)[0] for m in _matrices(NANNLI_SUPPORT, per_class)} == {printed_all}, model
    negnli = list(_matrices(NANNLI_SUPPORT, ("0.692", "0.684", "0.366")))
    assert negnli and all("0.629" not in _means(m) for m in negnli)


def test_the_nannli_metric_gives_table_10s_nan_quant_all_from_predictions_the_table_allows(data_dir):
    matrix = next(_matrices(NANNLI_QUANT_SUPPORT, ("0.477", "0.600", "0.379")))
    bench = get_benchmark("nannli")
    examples = bench.load("test")
    order = [nli.NLI3.index(c) for c in F1_ORDER]  # the matrix's rows and columns: C, E, N
    left = {g: [p for p in range(3) for _ in range(matrix[g][p])] for g in range(3)}
    predicted = []
    for e in examples:  # NaN-Quant's pairs as the matrix says, the others right
        predicted.append(order[left[F1_ORDER.index(e.label)].pop()] if e.meta["quantification"] else nli.NLI3.index(e.label))
    metric = bench.metric(examples)
    metric.update(torch.arange(len(examples)), torch.tensor(predicted))
    values = {k: float(v) for k, v in metric.compute().items()}
    assert [f"{values[f'quant/f1/{c}']:.3f}" for c in F1_ORDER] == ["0.477", "0.600", "0.379"]
    assert f"{values['quant/macro_f1']:.3f}" == "0.486"
    text = protocol_markdown(get_protocol("nannli-tables"), [{"variant": "test", "metrics": values}], "m", 20, 0)
    row = next(x for x in text.split("## Table 10", 1)[1].splitlines() if x.startswith("| All |"))
    assert row.split("|")[3].strip() == "0.486"


def test_negnli_table7_refuses_a_2_way_model_as_its_note_says(data_dir, fake_run):
    note = get_protocol("negnli-table7").note
    assert "2-way model (an entailment / not_entailment head) is refused" in note and "coarsened" not in note.split("refused")[1]
    run = fake_run  # its head: entailment, not_entailment
    with pytest.raises(ConfigError, match=r"negnli-snli: .*2-way head \(entailment, not_entailment\) cannot tell neutral from contradiction"):
        plan_card(CardRequest(model=str(run), protocol="negnli-table7"))
    plan = plan_card(CardRequest(model=str(run), benchmarks="negnli-rte"))  # the note's way to score it on RTE
    assert [(e.benchmark, e.split) for e in plan.plan.evals] == [("negnli-rte", "all")]
