"""The numbers the NLI papers print in the tables negtrain's protocols lay out, each with the
protocol's definition of that cell (:mod:`negtrain.evaluation.printed_cells`), so that protocol.md
can say, beside the table, which printed numbers no run of the protocol can give, and why.

Transcribed from the papers as printed (row and column names shortened to the protocol's headers).
The counts are the protocol's own, from the data (tests/test_printed_cells.py counts them again):
ScoNe's test set has 200 pairs per condition (1,200); NegNLI 500 pairs per pair type and source
(1,500); NaN-NLI 258 pairs of 48 premises, 117 contradiction, 97 entailment, 44 neutral (161 not
entailment), NaN-Quant 133 (50, 47, 36), and Tables 8 and 9's rows as
:mod:`negtrain.benchmarks.nannli` counts them.

What the NaN-NLI checks found (the F1 behind the "All" cells): Table 6's All cells, Standard and
Binary, are the support-weighted mean of their column's per-class F1: seven of the eight fit it and
none fits the macro mean. Table 10's NaN-Quant All is the macro mean (0.486; weighted over 50, 47
and 36 pairs it would be 0.494). RoBERTa-MNLI-NegNLI's Standard All, 0.629 in Tables 6 and 10,
fits neither, nor any accuracy k/258. Table 13 is macro, as its caption says.
"""

from __future__ import annotations

from fractions import Fraction

from negtrain.evaluation.printed_cells import Cell, ClassF1, Exact, Mean, Share

_SCONE_CONDITIONS = ("No Negation", "One Not Scoped", "Two Not Scoped", "Two Scoped", "One Scoped", "One Scoped, One not Scoped")
_SCONE_PAIRS = 200  # per condition of ScoNe-NLI's test set


def _scone_finetuned(table: str, rows: dict[str, str]) -> list[Cell]:
    """ScoNe Table 2 or 6: percent, one decimal, a condition's accuracy on its 200 test pairs."""
    return [Cell(table, row, column, printed, (Share(_SCONE_PAIRS, 100),))
            for row, values in rows.items() for column, printed in zip(_SCONE_CONDITIONS, values.split(), strict=True)]


SCONE_TABLE_2 = _scone_finetuned("Table 2 (DeBERTa)", {
    "MAF-NLI": "82.0 86.0 81.5 91.0 5.0 5.0",
    "MAF-NLI + MoNLI": "96.2 87.5 99.5 8.9 100.0 100.0",
    "MAF-NLI + MED": "84.8 83.5 82.0 58.9 99.5 97.0",
    "MAF-NLI + Neg-NLI": "91.3 88.5 83.0 70.4 37.0 29.0",
    "MAF-NLI + MoNLI + ScoNe-NLI": "100.0 100.0 100.0 100.0 100.0 100.0",
})
SCONE_TABLE_6 = _scone_finetuned("Table 6 (RoBERTa)", {
    "MAF-NLI": "96.5 97.0 97.0 96.5 3.0 5.0",
    "MAF-NLI + MoNLI": "85.4 100.0 100.0 4.5 100.0 100.0",
    "MAF-NLI + MED": "85.1 92.0 89.5 44.6 85.5 81.5",
    "MAF-NLI + Neg-NLI": "93.1 97.5 93.0 73.2 20.5 17.5",
    "MAF-NLI + MoNLI + ScoNe-NLI": "100.0 100.0 100.0 100.0 100.0 100.0",
})

_TABLE_4 = {
    "Zero-shot Structured": "0.50 0.50 0.50 0.50 0.50 0.50 0.50",
    "Zero-shot Brown et al.": "0.74 0.70 0.74 0.55 0.44 0.45 0.60",
    "Zero-shot Conditional Q": "0.79 0.84 0.80 0.50 0.52 0.44 0.65",
    "Zero-shot Conditional Truth": "0.98 0.86 0.80 0.43 0.66 0.47 0.70",
    "Zero-shot Hypothesis Q": "0.69 0.90 0.70 0.51 0.62 0.42 0.64",
    "Zero-shot Reasoning": "0.90 0.88 0.94 0.72 0.52 0.46 0.73",
    "Few-shot Structured": "0.50 0.50 0.50 0.50 0.50 0.50 0.50",
    "Few-shot Brown et al.": "0.86 0.66 0.80 0.83 0.36 0.28 0.63",
    "Few-shot Conditional Q": "0.92 0.85 0.90 0.62 0.34 0.34 0.66",
    "Few-shot Conditional Truth": "0.94 0.90 0.94 0.64 0.36 0.37 0.69",
    "Few-shot Hypothesis Q": "0.98 0.96 0.94 0.83 0.51 0.40 0.77",
    "Few-shot Reasoning": "0.99 0.97 0.98 0.89 0.69 0.43 0.82",
}
#: Ignore-Negation (Table 4's last row), as the protocol computes it from the data: every pair of
#: the first four conditions right, of the last two wrong.
IGNORE_NEGATION = (1, 1, 1, 1, 0, 0)


def _scone_icl() -> list[Cell]:
    """ScoNe Table 4: fractions, two decimals; Overall is the accuracy on all 1,200 pairs, so the
    mean of the row's six conditions (each 200 pairs)."""
    cells = []
    for row, values in _TABLE_4.items():
        *conditions, overall = values.split()
        cells += [Cell("Table 4", row, c, v, (Share(_SCONE_PAIRS),)) for c, v in zip(_SCONE_CONDITIONS, conditions, strict=True)]
        cells.append(Cell("Table 4", row, "Overall", overall,
                          (Share(6 * _SCONE_PAIRS), Mean("mean over the six conditions", tuple(conditions), (1,) * 6))))
    *conditions, overall = "1.00 1.00 1.00 1.00 0.00 0.00 0.66".split()
    cells += [Cell("Table 4", "Ignore-Negation", c, v, (Exact(Fraction(right), "its definition, from the data"),))
              for c, v, right in zip(_SCONE_CONDITIONS, conditions, IGNORE_NEGATION, strict=True)]
    right = sum(IGNORE_NEGATION) * _SCONE_PAIRS
    cells.append(Cell("Table 4", "Ignore-Negation", "Overall", overall,
                      (Exact(Fraction(right, 6 * _SCONE_PAIRS), f"{right}/{6 * _SCONE_PAIRS} (four of the six conditions right)"),)))
    return cells


SCONE_TABLE_4 = _scone_icl()

_NEGNLI_PAIRS = 500  # per pair type and source benchmark
#: NegNLI Table 7, the new pairs with negation: per source, MB, RoBERTa [1], XLNet [2], BERT [3].
_TABLE_7 = {
    "RTE": {"Tneg-H": "80.2 70.8 69.0 65.2", "T-Hneg": "91.0 51.4 44.2 39.2", "Tneg-Hneg": "65.6 65.4 69.6 68.4",
            "All": "78.9 62.5 60.9 57.6"},
    "SNLI": {"Tneg-H": "62.0 46.4 39.8 32.6", "T-Hneg": "41.0 63.6 67.4 58.8", "Tneg-Hneg": "69.8 45.8 47.2 41.8",
             "All": "56.5 51.9 51.5 44.4"},
    "MNLI": {"Tneg-H": "45.8 66.2 63.8 65.6", "T-Hneg": "47.6 70.4 69.8 62.4", "Tneg-Hneg": "47.0 63.6 65.4 63.6",
             "All": "39.3 66.7 66.3 63.9"},
}
_TABLE_7_DEV = {
    "RTE": {"dev": "52.7 75.8 69.9 66.1", "dev-neg": "51.2 78.1 73.2 63.4"},
    "SNLI": {"dev": "33.8 91.6 90.6 89.9", "dev-neg": "54.4 91.7 90.3 89.4"},
    "MNLI": {"dev": "35.5 87.9 86.7 83.2", "dev-neg": "50.2 88.0 86.7 83.0"},
}
_TABLE_7_COLUMNS = ("MB", "RoBERTa [1]", "XLNet [2]", "BERT [3]")


def _negnli_table7() -> list[Cell]:
    """NegNLI Table 7: percent, one decimal. A pair type's cell is k of its 500 pairs; All, k of
    1,500, and a model's All the mean of its three pair types (the MB of All is the majority of
    the 1,500, not a mean). The dev rows are not checked (why: ``unchecked``)."""
    cells = []
    for source, rows in _TABLE_7.items():
        parts = {col: tuple(rows[t].split()[i] for t in ("Tneg-H", "T-Hneg", "Tneg-Hneg")) for i, col in enumerate(_TABLE_7_COLUMNS)}
        for row, values in rows.items():
            for column, printed in zip(_TABLE_7_COLUMNS, values.split(), strict=True):
                checks: tuple = (Share(_NEGNLI_PAIRS * (3 if row == "All" else 1), 100),)
                if row == "All" and column != "MB":
                    checks += (Mean("mean over the three pair types", parts[column], (1, 1, 1)),)
                cells.append(Cell("Table 7", row, f"{source}: {column}", printed, checks, beside="negnli_table7"))
        for row, values in _TABLE_7_DEV[source].items():
            why = (f"negtrain has no {source} dev set" if source != "MNLI" else
                   "MNLI dev matched's 9,815 pairs: any percent with one decimal is some k/9815" if row == "dev" else
                   "the paper's dev-neg is the pairs its trained cue detector finds, a count it does not print")
            cells += [Cell("Table 7", row, f"{source}: {column}", printed, beside="negnli_table7", unchecked=why)
                      for column, printed in zip(_TABLE_7_COLUMNS, values.split(), strict=True)]
    return cells


NEGNLI_TABLE_7 = _negnli_table7()

#: NaN-NLI's gold classes: (Contradiction, Entailment, Neutral) pairs in the whole suite and in NaN-Quant.
NANNLI_SUPPORT = (117, 97, 44)
NANNLI_QUANT_SUPPORT = (50, 47, 36)
NANNLI_PAIRS, NANNLI_QUANT_PAIRS, NANNLI_PREMISES = 258, 133, 48
_MODELS = ("RoBERTa-MNLI", "RoBERTa-MNLI-NegNLI", "CueNB-MNLI", "CueNB-MNLI-NegNLI")
#: NaN-NLI Table 6, per model: Standard C, E, N, All; Binary E, Not E, All; Strict.
_TABLE_6 = {
    "RoBERTa-MNLI": "0.664 0.648 0.207 0.580 0.648 0.684 0.670 0.250",
    "RoBERTa-MNLI-NegNLI": "0.692 0.684 0.366 0.629 0.684 0.744 0.721 0.292",
    "CueNB-MNLI": "0.678 0.678 0.250 0.605 0.678 0.741 0.718 0.250",
    "CueNB-MNLI-NegNLI": "0.651 0.694 0.395 0.624 0.694 0.769 0.741 0.271",
}


def _standard_all(table: str, row: str, column: str, printed: str, per_class: tuple[str, ...], support: tuple[int, ...],
                  definition: str, beside: str) -> Cell:
    """An "All" F1 cell: the protocol's ``definition`` (weighted or macro) of the printed per-class
    cells; the note names the other mean and the accuracy too, when none fits."""
    weighted = Mean("support-weighted mean", per_class, support)
    macro = Mean("macro mean", per_class, (1,) * len(per_class))
    ours, other = (weighted, macro) if definition == "weighted" else (macro, weighted)
    return Cell(table, row, column, printed, (ours,), (other, Share(sum(support), what="accuracy, the micro F1")), beside=beside)


def _nannli_table6() -> list[Cell]:
    cells = []
    c, e, n = NANNLI_SUPPORT
    for model, values in _TABLE_6.items():
        sc, se, sn, sall, be, bne, ball, strict = values.split()
        cells += [Cell("Table 6", model, "Standard: Contradiction", sc, (ClassF1(c, NANNLI_PAIRS),)),
                  Cell("Table 6", model, "Standard: Entailment", se, (ClassF1(e, NANNLI_PAIRS),)),
                  Cell("Table 6", model, "Standard: Neutral", sn, (ClassF1(n, NANNLI_PAIRS),)),
                  _standard_all("Table 6", model, "Standard: All", sall, (sc, se, sn), NANNLI_SUPPORT, "weighted", "main"),
                  Cell("Table 6", model, "Binary: Entailment", be, (ClassF1(e, NANNLI_PAIRS),)),
                  Cell("Table 6", model, "Binary: Not Entailment", bne, (ClassF1(c + n, NANNLI_PAIRS),)),
                  _standard_all("Table 6", model, "Binary: All", ball, (be, bne), (e, c + n), "weighted", "main"),
                  Cell("Table 6", model, "Strict", strict, (Share(NANNLI_PREMISES),))]
    return cells


#: NaN-NLI Tables 8 and 9 (RoBERTa-MNLI-NegNLI): row -> (error rate, the pairs in the row).
TABLE_8 = {
    "not + quantifier": ("0.559", 93), "not + focus particle": ("0.261", 23), "not + degree expression": ("0.300", 20),
    "not + affixially-negated adjective/adverb": ("0.423", 26), "not + PP": ("0.067", 15),
    "Absolute and approximate negator": ("0.333", 27), "not in verbless clause": ("0.077", 13),
    "not in coordination": ("0.000", 26), "not in implicit proposition": ("0.000", 4),
}
TABLE_9 = {
    "Indefinite quantifier change": ("0.486", 74), "Numerical quantifier change": ("0.333", 27),
    "Comparative quantifier change": ("0.650", 20), "Negator addition or deletion": ("0.364", 118),
    "Negator position change": ("0.327", 101), "Negator token change": ("0.333", 6),
    "Clause or sub-clause deletion": ("0.333", 36), "Focus particle change": ("0.375", 16),
    "Lexical change": ("0.308", 13), "Syntactic change": ("0.000", 4),
}
_TABLE_10 = {"NaN-NLI": ("0.692", "0.684", "0.366", "0.629"), "NaN-Quant": ("0.477", "0.600", "0.379", "0.486")}
_TABLE_13 = {
    "Premise: Verbal": "0.39 0.60 0.46", "Premise: Non-verbal": "0.62 0.59 0.59", "Premise: Analytic": "0.61 0.59 0.59",
    "Premise: Synthetic": "0.43 0.49 0.45", "Premise: Clausal": "0.39 0.60 0.46", "Premise: Sub-clausal": "0.62 0.59 0.59",
    "Hypothesis: Verbal": "0.65 0.57 0.58", "Hypothesis: Non-verbal": "0.63 0.59 0.57", "Hypothesis: Analytic": "0.68 0.60 0.60",
    "Hypothesis: Synthetic": "0.48 0.45 0.41", "Hypothesis: Clausal": "0.65 0.57 0.57", "Hypothesis: Sub-clausal": "0.63 0.59 0.57",
    "Hypothesis: None": "0.60 0.57 0.58",
}


def _nannli_analysis() -> list[Cell]:
    """Tables 8, 9, 10 and 13, RoBERTa-MNLI-NegNLI's breakdowns."""
    cells = [Cell("Table 8", row, "ER", er, (Share(n),), beside="nannli_table8") for row, (er, n) in TABLE_8.items()]
    cells += [Cell("Table 9", row, "ER", er, (Share(n),), beside="nannli_table9") for row, (er, n) in TABLE_9.items()]
    for column, support, total, definition in (("NaN-NLI", NANNLI_SUPPORT, NANNLI_PAIRS, "weighted"),
                                               ("NaN-Quant", NANNLI_QUANT_SUPPORT, NANNLI_QUANT_PAIRS, "macro")):
        *per_class, printed_all = _TABLE_10[column]
        cells += [Cell("Table 10", row, column, v, (ClassF1(s, total),), beside="nannli_table10")
                  for row, v, s in zip(("Contradiction", "Entailment", "Neutral"), per_class, support, strict=True)]
        cells.append(_standard_all("Table 10", "All", column, printed_all, tuple(per_class), support, definition, "nannli_table10"))
    why = ("a macro average over the classes of a subset, whose per-class counts the paper does not print; "
           "the caption says macro, as negtrain's macro_precision, macro_recall, macro_f1")
    cells += [Cell("Table 13", row, column, v, beside="nannli_table13", unchecked=why)
              for row, values in _TABLE_13.items() for column, v in zip(("Precision", "Recall", "F1"), values.split(), strict=True)]
    return cells


NANNLI_TABLES = [*_nannli_table6(), *_nannli_analysis()]

#: protocol -> the printed cells of the paper's tables it lays out.
PRINTED: dict[str, list[Cell]] = {
    "scone-finetuned": [*SCONE_TABLE_2, *SCONE_TABLE_6],
    "scone-icl": SCONE_TABLE_4,
    "negnli-table7": NEGNLI_TABLE_7,
    "nannli-tables": NANNLI_TABLES,
}
