"""The NLI papers' tables in protocol.md, in the papers' own layout (``breakdown:`` tables of
``negtrain/prompts/protocols.yaml``, listed in ``negtrain/evaluation/protocol.py``'s ``BREAKDOWNS``).

- ``negnli_table7``: Hossain et al. (2020), Table 7. Rows: the original ``dev`` and ``dev-neg``
  (where those variants ran) and the new pairs with negation by pair type (Tneg-H, T-Hneg,
  Tneg-Hneg, All); per benchmark (RTE, SNLI, MNLI) two columns: MB, the majority baseline, and the
  model's accuracy. MB is the record's ``majority_baseline`` (the gold labels of the pairs the
  model was scored on); for a variant that did not run, or a dev set whose metric has none, it is
  computed from the gold labels of the whole split, so the column stands without a model.
- ``nannli_table8``, ``nannli_table9``, ``nannli_table10``, ``nannli_table13``: Truong et al.
  (2022). Each row a category (a construction, an operation, a class, a negation type) with the
  model's value from the record, and ``n``, the rows of the split in that category, counted from
  the data (negtrain's column: the paper's denominators, e.g. Table 9's 118 pairs with one
  negator addition or deletion, :mod:`negtrain.benchmarks.nannli`).

Every function has the signature of a ``BREAKDOWNS`` entry: ``(protocol, table, formats, out,
scale, decimals, by_variant)`` and returns the table's markdown lines.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

from negtrain.benchmarks.files import cache_dir, data_dirs
from negtrain.benchmarks.nannli import F1_ORDER, NEGATION_TYPES, OPERATIONS, TABLE_8
from negtrain.benchmarks.negnli import PAIR_TYPES
from negtrain.benchmarks.registry import get_benchmark
from negtrain.core.errors import DataError
from negtrain.prompts.protocols import ExtraTable, Protocol, Variant

#: Table 7's benchmarks, in its column order: (header, NegNLI benchmark, the original dev set's
#: (benchmark, split) and its negation subset's; None where negtrain has no such benchmark).
_Split = tuple[str, str]
TABLE_7_BENCHMARKS: tuple[tuple[str, str, _Split | None, _Split | None], ...] = (
    ("RTE", "negnli-rte", None, None),
    ("SNLI", "negnli-snli", None, None),
    ("MNLI", "negnli-mnli", ("mnli", "validation_matched"), ("mnli", "validation_matched_neg")),
)


def files_present(variant: Variant) -> tuple[bool, str]:
    """Whether every file of the variant's split is already on disk (a data dir or the cache);
    nothing is downloaded. The reason, when not, names where it looked and how to get the file."""
    bench = get_benchmark(variant.benchmark)
    for file in bench.files(variant.split):
        places = [d / file.relpath for d in data_dirs()] + [cache_dir() / file.relpath]
        if not any(p.is_file() for p in places):
            return False, (f"{file.origin} is not on disk (looked in {', '.join(map(str, places))}); put it at "
                           f"{cache_dir() / file.relpath} (a command that reads that split online downloads it there, e.g. "
                           f"`negtrain evaluate --model M --family nli --benchmarks {variant.benchmark}`), or set NEGTRAIN_DATA_DIR "
                           f"to a folder holding {file.relpath}")
    return True, ""


def skipped_optional(protocol: Protocol, chat: bool) -> list[tuple[Variant, str]]:
    """The protocol's optional variants whose files are absent, each with why."""
    out = []
    for v in protocol.selected(chat):
        if v.optional:
            present, why = files_present(v)
            if not present:
                out.append((v, why))
    return out


def _fmt(value, scale: float, decimals: int) -> str:
    return "-" if value is None or value != value else f"{value * scale:.{decimals}f}"


def _gold_majority(benchmark: str, split: str) -> dict[str, float]:
    """``majority_baseline`` (and ``/<pair type>`` for NegNLI) from the split's gold labels."""
    bench = get_benchmark(benchmark)
    examples = bench.load(split)
    out = {"majority_baseline": max(Counter(e.label for e in examples).values()) / len(examples)} if examples else {}
    for subset in dict.fromkeys(e.subset for e in examples if e.subset):
        labels = Counter(e.label for e in examples if e.subset == subset)
        out[f"majority_baseline/{subset}"] = max(labels.values()) / sum(labels.values())
    return out


def _variant_for(protocol: Protocol, benchmark: str, split: str) -> Variant | None:
    return next((v for v in protocol.variants if (v.benchmark, v.split) == (benchmark, split)), None)


def negnli_table7(protocol: Protocol, table: ExtraTable, formats, out: Path | None, scale: float, decimals: int,
                  by_variant: dict) -> list[str]:
    """Hossain et al. (2020), Table 7, in its layout (module docstring)."""
    columns = [(name, negnli, dev, dev_neg) for name, negnli, dev, dev_neg in TABLE_7_BENCHMARKS
               if _variant_for(protocol, negnli, "all") is not None]
    header = "| Test pairs | " + " | ".join(f"{name}: MB | {name}: model" for name, *_ in columns) + " |"
    lines = [header, "|---|" + "---|---|" * len(columns)]
    gold: dict[tuple[str, str], dict[str, float]] = {}  # each split's data-only MB, read once

    def cells(key: tuple[str, str] | None, metric: str) -> list[str]:
        if key is None:
            return ["-", "-"]
        variant = _variant_for(protocol, *key)
        record = by_variant.get(variant.name) if variant is not None else None
        values = (record or {}).get("metrics") or {}
        mb = values.get(f"majority_baseline{metric}")
        if mb is None and (variant is None or not variant.optional or files_present(variant)[0]):
            try:
                mb = (gold[key] if key in gold else gold.setdefault(key, _gold_majority(*key))).get(f"majority_baseline{metric}")
            except DataError:
                mb = None
        return [_fmt(mb, scale, decimals), _fmt(values.get(f"accuracy{metric}"), scale, decimals)]

    for label, dev_neg in (("dev", False), ("dev-neg", True)):
        keys = [c[3] if dev_neg else c[2] for c in columns]
        if any(k is not None and _variant_for(protocol, *k) is not None for k in keys):
            lines.append(f"| {label} | " + " | ".join(x for k in keys for x in cells(k, "")) + " |")
    for label, metric in [*((t, f"/{t}") for t in PAIR_TYPES), ("All", "")]:
        lines.append(f"| {label} | " + " | ".join(x for c in columns for x in cells((c[1], "all"), metric)) + " |")
    lines += _partial_notes(protocol, by_variant)
    for v in protocol.variants:
        if v.optional and v.name not in by_variant:
            lines += ["", f"{v.name} ({v.benchmark} {v.split}): not run: " + (files_present(v)[1] or "not scored in this run")]
    lines += ["", "MB: the share of the most frequent gold label (each row its own majority) among the pairs "
              "the model was scored on, from the data, not the model (for a variant that did not run: every pair "
              "of its split). model: the model's accuracy on those pairs. New pairs with negation: every "
              "pair of NegNLI (the `all` split, 500 per benchmark and pair type), as the paper evaluates "
              "models trained on the original benchmarks; a model trained on NegNLI's 70% is Table 8's, "
              "scored on the `test` split."]
    return lines


def _partial_notes(protocol: Protocol, by_variant: dict) -> list[str]:
    """A line per variant that scored fewer pairs than its split has (a run limited with
    ``--trainer.limit_val_batches``): its cells are over those pairs, not the paper's set."""
    notes = []
    for v in protocol.variants:
        n = ((by_variant.get(v.name) or {}).get("metrics") or {}).get("n")
        if n is not None:
            total = len(get_benchmark(v.benchmark).load(v.split))
            if int(n) < total:
                notes.append(f"{v.name}: scored {int(n)} of the split's {total} pairs; its cells are over those pairs only.")
    return ["", *notes] if notes else []


def _nannli_counts() -> list:
    return get_benchmark("nannli").load("test")


def _rows_table(title: str, rows: list[tuple[str, str, int]], value_header: str, values: dict, scale: float,
                decimals: int, partial: list[str]) -> list[str]:
    lines = [f"| {title} | {value_header} | n † |", "|---|---|---|"]
    lines += [f"| {label} | {_fmt(values.get(metric), scale, decimals)} | {n} |" for label, metric, n in rows]
    lines += ["", "n †: the pairs of the data in that row (negtrain's column, not the paper's: the error rate's "
              "denominator when every pair is scored)."]
    return lines + partial


def _nannli_values(protocol: Protocol, by_variant: dict) -> dict:
    variant = _variant_for(protocol, "nannli", "test")
    record = by_variant.get(variant.name) if variant is not None else None
    return (record or {}).get("metrics") or {}


def nannli_table8(protocol, table, formats, out, scale, decimals, by_variant) -> list[str]:
    """Truong et al. (2022), Table 8: the error rate per construction (the file's 13 merged into the
    paper's nine; the two the paper lacks after them)."""
    counts = Counter(TABLE_8.get(e.subset, e.subset) for e in _nannli_counts())
    order = list(dict.fromkeys(TABLE_8.values())) + sorted(set(counts) - set(TABLE_8.values()))
    rows = [(c, f"error_rate/construction/{c}", counts[c]) for c in order]
    return _rows_table("Construction type", rows, "ER", _nannli_values(protocol, by_variant), scale, decimals,
                       _partial_notes(protocol, by_variant))


def nannli_table9(protocol, table, formats, out, scale, decimals, by_variant) -> list[str]:
    """Truong et al. (2022), Table 9: the error rate per operation, over the pairs applying it once
    (the paper's denominators: 118 for Negator addition or deletion, :mod:`negtrain.benchmarks.nannli`)."""
    examples = _nannli_counts()
    rows = [(op, f"error_rate/operation/{op}", sum(op in e.meta["operations"] for e in examples)) for op in OPERATIONS.values()]
    lines = _rows_table("Operation type", rows, "ER", _nannli_values(protocol, by_variant), scale, decimals,
                        _partial_notes(protocol, by_variant))
    repeated = Counter(op for e in examples for op in e.meta.get("operations_repeated", ()))
    if repeated:
        lines.append("Pairs applying an operation twice are left out of its row, as the paper's numbers require "
                     "(0.364 = 43/118; no k/124 rounds to it): " + ", ".join(f"{op}: {k}" for op, k in repeated.items()) + ".")
    return lines


def nannli_table10(protocol, table, formats, out, scale, decimals, by_variant) -> list[str]:
    """Truong et al. (2022), Table 10: F1 per class, on the whole of NaN-NLI and on NaN-Quant; All
    is Table 6's support-weighted mean on NaN-NLI and the macro mean on NaN-Quant, as the paper's
    printed numbers are (:mod:`negtrain.evaluation.paper_tables`)."""
    examples = _nannli_counts()
    quant = [e for e in examples if e.meta["quantification"]]
    values = _nannli_values(protocol, by_variant)
    lines = ["| Class | NaN-NLI | NaN-Quant | n NaN-NLI † | n NaN-Quant † |", "|---|---|---|---|---|"]
    for label, whole, part, n, nq in [*((c.capitalize(), f"f1/{c}", f"quant/f1/{c}", sum(e.label == c for e in examples),
                                         sum(e.label == c for e in quant)) for c in F1_ORDER),
                                      ("All", "f1", "quant/macro_f1", len(examples), len(quant))]:
        lines.append(f"| {label} | {_fmt(values.get(whole), scale, decimals)} | {_fmt(values.get(part), scale, decimals)} | {n} | {nq} |")
    lines += ["", "n †: gold pairs of that class (negtrain's column, not the paper's). NaN-Quant: the pairs whose `Quantification` is set (§5.2).",
              "All: on NaN-NLI the support-weighted mean of the three F1 (`f1`, Table 6's All), on NaN-Quant their macro mean "
              "(`quant/macro_f1`): the paper's NaN-Quant 0.486 is the macro mean of its 0.477, 0.600 and 0.379 (0.4853), "
              "where the mean weighted by its 50, 47 and 36 pairs is 0.494; Table 6's All cells fit the weighted mean "
              "(e.g. RoBERTa-MNLI: (0.664·117 + 0.648·97 + 0.207·44)/258 = 0.580) and none fits the macro mean."]
    return lines


def nannli_table13(protocol, table, formats, out, scale, decimals, by_variant) -> list[str]:
    """Truong et al. (2022), Table 13: macro precision, recall and F1 by the premise's and the
    hypothesis's negation type."""
    examples = _nannli_counts()
    values = _nannli_values(protocol, by_variant)
    lines = ["| Negation type | Precision | Recall | F1 | n † |", "|---|---|---|---|---|"]
    for side, types in (("premise", NEGATION_TYPES), ("hypothesis", (*NEGATION_TYPES, "None"))):
        for t in types:
            key = f"{side}/{t}"
            n = sum(key in e.meta["negation_types"] for e in examples)
            cells = [_fmt(values.get(f"{m}/{key}"), scale, decimals) for m in ("macro_precision", "macro_recall", "macro_f1")]
            lines.append(f"| {side.capitalize()}: {t} | " + " | ".join(cells) + f" | {n} |")
    lines += ["", "n †: the pairs whose premise or hypothesis has that negation type (negtrain's column, not the paper's)."]
    return lines


#: name -> a table in the paper's layout (``tables: [{title, breakdown: NAME}]`` in protocols.yaml)
NLI_BREAKDOWNS: dict[str, Callable] = {
    "negnli_table7": negnli_table7,
    "nannli_table8": nannli_table8,
    "nannli_table9": nannli_table9,
    "nannli_table10": nannli_table10,
    "nannli_table13": nannli_table13,
}

