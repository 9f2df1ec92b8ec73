"""A protocol run: a paper's table as one command (``evaluate --model M --family F --protocol NAME``).

The protocol's variants (``negtrain/prompts/protocols.yaml``) become the eval entries of one
report-card run, so the model is loaded once; each variant's metrics.jsonl line carries
``"variant"`` and its predictions go to ``predictions/<benchmark>-<split>-<variant>.jsonl``.
``protocol.md`` lays the results out as the paper's table: one row per variant (and per named
baseline), one column per metric of the protocol's ``table``, each with its 95% interval, in the
paper's units (fraction or percent) and decimals; a column the paper's table lacks is marked
``†``. Further tables (``tables:``) follow: other metric columns over the same rows, or a
breakdown with rows of its own (TINAD's accuracy per pattern).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from negtrain.benchmarks.registry import get_benchmark
from negtrain.core.errors import ConfigError, unknown_name
from negtrain.evaluation.card_render import n_of, subset_head
from negtrain.io.atomic import write_text
from negtrain.io.records import EvalRecord
from negtrain.evaluation.nli_protocols import NLI_BREAKDOWNS, skipped_optional
from negtrain.evaluation.paper_tables import PRINTED
from negtrain.evaluation.printed_cells import notes as printed_notes
from negtrain.evaluation.tinad_figure2 import figure2_legend, figure2_table, plot_figure2
from negtrain.metrics.declared import role_of
from negtrain.metrics.uncertainty import estimate
from negtrain.models import provenance
from negtrain.prompts.protocols import Column, ExtraTable, Protocol, Variant
from negtrain.prompts.strategies import get_strategy


def eval_entries(protocol: Protocol, chat: bool) -> list[dict[str, Any]]:
    """The recipe's ``data.eval`` for a protocol run (the variants that apply with/without --chat)."""
    skipped = skipped_optional(protocol, chat)
    for v, why in skipped:  # an optional variant runs only where its files are on disk
        print(f"--protocol {protocol.name}: {v.name} skipped: {why}", flush=True)
    selected = [v for v in protocol.selected(chat) if v not in {s for s, _ in skipped}]
    if not selected:
        raise ConfigError(f"--protocol {protocol.name}: no variant applies {'with' if chat else 'without'} --chat")
    return [
        {"benchmark": v.benchmark, "split": v.split, "strategy": v.strategy, "shots": v.shots, "variant": v.name}
        | ({"min_shots": v.min_shots} if v.min_shots is not None else {})
        for v in selected
    ]


def _distinct_splits(protocol: Protocol) -> list[str]:
    return list(dict.fromkeys(v.split for v in protocol.variants))


def ignore_negation(splits: list[str], resamples: int, seed: int) -> tuple[dict[str, float], dict]:
    """ScoNe's Ignore-Negation baseline (She et al. 2023, Table 4, last row): every example is
    predicted as if its negations were absent, i.e. with the gold label of its contrast set's
    no_negation member. Scored on the protocol's split(s) with ScoNe's metric and intervals."""
    bench = get_benchmark("scone")
    examples = [e for split in splits for e in bench.load(split)]
    reference = {e.group: e.label for e in examples if e.subset == "no_negation"}
    predicted = [bench.labels.index(reference[e.group]) for e in examples]
    return _scored_baseline(bench, examples, predicted, resamples, seed)


def random_answers(splits: list[str], resamples: int, seed: int) -> tuple[dict[str, float], dict]:
    """TINAD's Random row (García-Ferrero et al. 2023, Table 4, first row): every sentence of the
    protocol's splits answered True or False uniformly at random (numpy's generator seeded with the
    bootstrap seed), scored with TINAD's metric. The paper's row is one such draw, so the numbers
    agree with it up to the draw."""
    bench = get_benchmark("tinad")
    examples = [e for split in splits for e in bench.load(split)]
    predicted = np.random.default_rng(seed).integers(0, len(bench.labels), size=len(examples)).tolist()
    return _scored_baseline(bench, examples, predicted, resamples, seed)


def _scored_baseline(bench, examples, predicted: list[int], resamples: int, seed: int) -> tuple[dict[str, float], dict]:
    metric = bench.metric(examples)
    metric.update(torch.arange(len(examples)), torch.tensor(predicted))
    values = {k: float(v) for k, v in metric.compute().items()}
    spread = estimate(metric, metric.last_outcomes, resamples, seed, bench.is_count).as_json()
    return values, spread


#: name -> (the row's title, what the row is, its computation on the protocol's splits)
BASELINES: dict[str, tuple[str, str, Callable]] = {
    "ignore_negation": ("Ignore-Negation", "a baseline computed from the data (its gold labels), not from the model", ignore_negation),
    "random": ("Random", "True or False drawn uniformly at random for every sentence (seeded with --evaluation.bootstrap_seed), "
               "not from the model", random_answers),
}


def _pattern_counts(bench, variants: list[Variant], out: Path | None) -> dict[tuple[int, str], dict[str | None, list[int]]]:
    """Right and scored sentences by (pattern number, name) and cell, over the variants' predictions
    files (pooled: each sentence counted once), with the metric's own definition of a right answer
    and of a sentence's pattern, so the protocol's tables and ``accuracy/pattern/<NN>`` count alike."""
    from negtrain.evaluation.predictions import scored_metric

    counts: dict[tuple[int, str], dict[str | None, list[int]]] = {}  # by subset (None: a row without one)
    for v in variants:
        path = out / "predictions" / f"{v.file_stem}.jsonl" if out is not None else None
        if path is None or not path.is_file():
            continue
        _, metric = scored_metric(bench.name, v.split, path, allow_missing=True)
        seen, right = metric.seen_right(metric.last_outcomes)
        for e, s, r, pid in zip(bench.load(v.split), seen.tolist(), right.tolist(), metric.patterns.tolist(), strict=True):
            if not s:
                continue
            cell = counts.setdefault((int(pid), e.meta["pattern"]), {}).setdefault(e.subset, [0, 0])
            cell[0] += int(r)
            cell[1] += 1
    return counts


def tinad_patterns(protocol: Protocol, table: ExtraTable, formats: dict[str, list[Variant]], out: Path | None,
                   scale: float, decimals: int, by_variant: dict | None = None) -> list[str]:
    """TINAD's Table 5 (García-Ferrero et al. 2023): accuracy per pattern, by cell (the table's
    columns name cells: input_affirmation, ...), over every split the format ran on (pooled: each
    sentence counted once). Counted from the predictions files."""
    bench = get_benchmark("tinad")
    columns = table.columns or (Column("input_affirmation", "W/o Distractor: Affirmation"),
                                Column("input_negation", "W/o Distractor: Negation"))
    lines = ["| variant | pattern | " + " | ".join(_header(c) for c in columns) + " |",
             "|---|---|" + "---|" * len(columns)]
    for fmt, variants in formats.items():
        counts = _pattern_counts(bench, variants, out)
        for (pid, name), cells in sorted(counts.items()):
            shown = []
            for c in columns:
                r, n = cells.get(c.metric, (0, 0))
                shown.append(f"{r / n * scale:.{decimals}f}" if n else "-")
            lines.append(f"| {fmt} | #{pid:02d} {name} | " + " | ".join(shown) + " |")
    return lines


#: protocol.md's Figure 2, drawn beside it (the card's own figure2.png has its splits, not the pooled rows).
PROTOCOL_FIGURE2 = "protocol-figure2.png"


def tinad_figure2(protocol: Protocol, table: ExtraTable, formats: dict[str, list[Variant]], out: Path | None,
                  scale: float, decimals: int, by_variant: dict | None = None) -> list[str]:
    """TINAD's Figure 2 (García-Ferrero et al. 2023, §6): each pattern's overall accuracy, one row
    per variant (its ``accuracy/pattern/<NN>``) and, per format, its splits pooled (from the
    predictions files, each sentence counted once: the paper's "every sentence of the dataset");
    drawn in ``protocol-figure2.png`` beside protocol.md."""
    bench = get_benchmark("tinad")
    rows: list[tuple[str, dict]] = []
    for fmt, variants in formats.items():
        rows += [(v.name, (by_variant or {})[v.name]["metrics"]) for v in variants if v.name in (by_variant or {})]
        counts = _pattern_counts(bench, variants, out)
        if counts:
            pooled: dict[int, list[int]] = {}
            for (pid, _), cells in counts.items():
                total = pooled.setdefault(pid, [0, 0])
                for r, n in cells.values():
                    total[0] += r
                    total[1] += n
            rows.append((f"{fmt}: pooled", {f"accuracy/pattern/{pid:02d}": r / n for pid, (r, n) in pooled.items() if n}))
    drawn = out is not None and bool(rows)
    if drawn:
        assert out is not None
        plot_figure2(rows, out / PROTOCOL_FIGURE2, f"TINAD Figure 2: {protocol.name}")
    units = "percent" if scale == 100.0 else "fractions"
    return [*figure2_table(rows, scale, decimals), "", figure2_legend(units, PROTOCOL_FIGURE2 if drawn else None)]


#: name -> a further table with its own rows (``tables: [{title, breakdown: NAME}]`` in protocols.yaml)
BREAKDOWNS: dict[str, Callable] = {"tinad_patterns": tinad_patterns, "tinad_figure2": tinad_figure2, **NLI_BREAKDOWNS}


def _cell(value: float | None, spread: dict | None, scale: float = 1.0, decimals: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    ci = (spread or {}).get("ci95")
    shown = f"{value * scale:.{decimals}f}"
    return shown + (f" [{ci[0] * scale:.{decimals}f}, {ci[1] * scale:.{decimals}f}]" if ci and ci[0] is not None else "")


def _mean_std(stats: dict | None, scale: float = 1.0, decimals: int = 2) -> str:
    """``mean ± std`` over the splits; over fewer than all of them, which (a split with nothing to
    score, e.g. no complete group in a limited run, has no value)."""
    values = (stats or {}).get("values") or []
    defined = sum(v is not None for v in values)
    if not stats or stats.get("mean") is None:
        return f"undefined (0 of {len(values)} splits)" if values else "-"
    std = stats.get("std")
    shown = f"{stats['mean'] * scale:.{decimals}f}" + (f" ± {std * scale:.{decimals}f}" if std is not None else "")
    return shown + (f" ({defined} of {len(values)} splits)" if defined < len(values) else "")


def _groups(value: float | None, values: dict) -> str:
    """A consistency's ``(k/n)``: of the n groups scored (``groups_scored``), k all right;
    ``undefined (0 complete groups)`` where none was scored. Empty without a group count."""
    n = values.get("groups_scored")
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return ""
    if int(n) == 0:
        return "undefined (0 complete groups)"
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return f"({round(value * n)}/{int(n)})"


def _header(column: Column) -> str:
    return column.header + (" †" if column.added else "")


@dataclass
class _Row:
    """One row of the protocol's tables: a variant, a baseline, or a summary over splits."""

    label: str
    values: dict
    spread: dict
    tail: str  # negtrain's bookkeeping cells (n, n_unparsed, tokens generated, examples/s)
    mean_std: bool = False

    def cells(self, columns: tuple[Column, ...], scale: float, decimals: int) -> list[str]:
        if self.mean_std:
            return [_mean_std(self.values.get(c.metric), scale, decimals) for c in columns]
        out = []
        for c in columns:
            shown = _cell(self.values.get(c.metric), self.spread.get(c.metric), scale, decimals)
            groups = _groups(self.values.get(c.metric), self.values) if role_of(c.metric) == "consistency" else ""
            out.append(groups if groups.startswith("undefined") else f"{shown} {groups}" if groups else shown)
        return out


def own_demonstrations(variant: Variant) -> tuple[str, ...]:
    """The subsets whose few-shot demonstrations in ``variant`` are negtrain's choice, not the
    paper's (the strategy's ``chosen_by_negtrain``); empty for drawn or zero shots."""
    if variant.shots != "paper" or variant.strategy is None:
        return ()
    fewshot = get_strategy(variant.benchmark, variant.strategy).fewshot
    return fewshot.chosen_by_negtrain if fewshot is not None else ()


def own_demonstrations_legend(variant: Variant) -> str:
    """protocol.md's line for a variant marked † (its demonstrations partly negtrain's)."""
    strategy = get_strategy(variant.benchmark, variant.strategy or "")
    fewshot = strategy.fewshot
    assert fewshot is not None
    own = fewshot.chosen_by_negtrain
    printed = [s for s in fewshot.demonstrations_for if s not in own]
    sets = ", ".join(f"{s} -> {fewshot.demonstrations_for[s]}" for s in own)
    return (f"† after {variant.name}: the demonstrations shown to {', '.join(own)} examples are negtrain's choice ({sets}); "
            f"the paper prints demonstrations for {', '.join(printed)} only ({strategy.source}).")


def _count(value) -> str:
    return str(int(value)) if value is not None else "-"


def protocol_markdown(protocol: Protocol, records: list[EvalRecord], model: str, resamples: int, seed: int,
                      out: Path | None = None) -> str:
    by_variant = {r.get("variant"): r for r in records}
    scale = 100.0 if protocol.units == "percent" else 1.0
    rows: list[_Row] = []
    for v in protocol.variants:
        r = by_variant.get(v.name)
        if r is None:
            continue
        m, spread = r["metrics"], r.get("uncertainty") or {}
        n, seconds = m.get("n"), r.get("eval_seconds")
        rate = f"{n / seconds:.1f}" if n and seconds else "-"
        rows.append(_Row(v.name + (" †" if own_demonstrations(v) else ""), m, spread, f"{n_of(r)} | {_count(m.get('n_unparsed'))} | {r.get('tokens_generated', '-')} | {rate}"))
    baseline_note = None
    if protocol.baseline:
        if protocol.baseline not in BASELINES:
            raise unknown_name("protocol baseline", protocol.baseline, BASELINES)
        title, what, compute = BASELINES[protocol.baseline]
        splits = _distinct_splits(protocol)
        values, spread = compute(splits, resamples, seed)
        rows.append(_Row(title, values, spread, f"{int(values.get('n', 0))} | - | - | -"))
        baseline_note = f"{title}: {what}; every example of {', '.join(splits)}."
    formats = _formats(protocol, by_variant)
    if protocol.across_splits:
        rows += split_summary_rows(protocol, formats, by_variant, out, resamples, seed)

    headers = [_header(c) for c in protocol.columns]
    lines = [f"# {protocol.name}: `{model}`", "", f"{protocol.paper}", ""]
    cut = [r for r in records if r.get("subset")]
    if cut:  # before the numbers it qualifies
        lines += [subset_head(cut), ""]
    lines.append("| variant | " + " | ".join(headers) + " | n | n_unparsed | tokens generated | examples/s |")
    lines.append("|---|" + "---|" * (len(headers) + 4))
    for row in rows:
        lines.append(f"| {row.label} | " + " | ".join(row.cells(protocol.columns, scale, protocol.decimals)) + f" | {row.tail} |")
    if baseline_note:
        lines += ["", baseline_note]
    lines += printed_notes(PRINTED.get(protocol.name, []), "main")  # the paper's cells no run can give
    for table in protocol.tables:
        decimals = protocol.decimals if table.decimals is None else table.decimals
        lines += ["", f"## {table.title}", ""]
        if table.breakdown:
            if table.breakdown not in BREAKDOWNS:
                raise unknown_name("protocol table breakdown", table.breakdown, BREAKDOWNS)
            lines += BREAKDOWNS[table.breakdown](protocol, table, formats, out, scale, decimals, by_variant)
            lines += printed_notes(PRINTED.get(protocol.name, []), table.breakdown)
            continue
        lines.append("| variant | " + " | ".join(_header(c) for c in table.columns) + " |")
        lines.append("|---|" + "---|" * len(table.columns))
        for row in rows:
            lines.append(f"| {row.label} | " + " | ".join(row.cells(table.columns, scale, decimals)) + " |")
    units = "percent (the metric's fraction times 100)" if protocol.units == "percent" else "fractions"
    lines += [
        "",
        f"Values in {units}, {protocol.decimals} decimal place(s), as the paper prints them.",
        "Brackets: the 95% percentile-bootstrap interval (contrast sets resampled whole). `-`: undefined on what was scored.",
        "n_unparsed: responses no answer rule could read, scored as wrong. n, n_unparsed, tokens generated, examples/s: "
        "negtrain's counts, not the paper's.",
    ]
    if any(c.added for c in protocol.columns) or any(c.added for t in protocol.tables for c in t.columns):
        lines.append("†: a column negtrain adds; the paper's table does not have it.")
    lines += [own_demonstrations_legend(v) for v in protocol.variants if v.name in by_variant and own_demonstrations(v)]
    if protocol.across_splits is True:
        lines.append("mean ± std: over the splits, the sample standard deviation (n - 1). pooled: every split's "
                     "predictions scored as one set.")
    elif protocol.across_splits == "pooled":
        lines.append("pooled: every split's predictions scored as one set (each example counted once).")
    if protocol.note:
        lines += ["", protocol.note]
    if protocol.not_reproduced:
        lines += ["", "## Not reproduced", "", *(f"- {what}: {why}" for what, why in protocol.not_reproduced)]
    lines += run_notes(protocol, by_variant)
    lines.append("")
    return "\n".join(lines)


def run_notes(protocol: Protocol, by_variant: dict) -> list[str]:
    """What qualifies a variant's numbers beyond the table: prompts cut to fit the model's
    context (``n_truncated``, under --truncate left) and the record's note (an explicit lower
    precision, a partial view of the benchmark)."""
    notes = []
    for v in protocol.variants:
        r = by_variant.get(v.name)
        if r is None:
            continue
        if r.get("shots_used"):
            notes.append(f"- {v.name}: {shots_used_text(r['shots_used'])}")
        cut = r["metrics"].get("n_truncated")
        if cut is not None:
            notes.append(f"- {v.name}: n_truncated {int(cut)} (prompts cut from the start to fit the model's context, --truncate left)")
        if r.get("note"):
            notes.append(f"- {v.name}: {r['note']}")
    return ["", "## Notes", "", *notes] if notes else []


def shots_used_text(used: dict) -> str:
    """A metrics line's ``shots_used`` in words: rows per number of shots, and the rule."""
    rows = used.get("rows") or {}
    counts = ", ".join(f"{k} shots for {n} row{'s' if n != 1 else ''}" for k, n in rows.items()) or "no row scored"
    return (f"{counts} (min_shots: {used.get('asked')} shots, {used.get('fewest')} where {used.get('asked')} do not fit "
            "the model's context, the last shot dropped first)")


def _formats(protocol: Protocol, by_variant: dict) -> dict[str, list[Variant]]:
    """Variants that ran, by format (a variant named ``<format>/<split>`` belongs to ``<format>``)."""
    formats: dict[str, list[Variant]] = {}
    for v in protocol.variants:
        if v.name in by_variant:
            formats.setdefault(v.name.rsplit("/", 1)[0], []).append(v)
    return formats


def split_summary_rows(protocol: Protocol, formats: dict[str, list[Variant]], by_variant: dict, out: Path | None,
                       resamples: int, seed: int) -> list[_Row]:
    """Per format (variants named ``<format>/<split>``), a row of the mean ± std over its splits
    (unless ``across_splits`` is ``pooled``) and, with the run directory ``out``, a row of the
    pooled score (the splits' predictions files scored as one set, :mod:`negtrain.evaluation.across_splits`)."""
    from negtrain.evaluation.across_splits import score_splits, summarize

    rows = []
    pad = "- | - | - | -"
    for fmt, variants in formats.items():
        bench = get_benchmark(variants[0].benchmark)
        if protocol.across_splits is True:
            summary = summarize([by_variant[v.name]["metrics"] for v in variants], bench.is_count)
            rows.append(_Row(f"{fmt}: mean ± std over {len(variants)} splits", summary, {}, pad, mean_std=True))
        if out is None:
            continue
        paths = [out / "predictions" / f"{v.file_stem}.jsonl" for v in variants]
        if not all(p.is_file() for p in paths):
            continue
        # The run's own files: a run limited to some batches (trainer.limit_val_batches) predicted
        # only those rows, and its per-split rows are scored on them; the pooled row is too, and
        # its n column says how many rows that is.
        pooled = score_splits(bench.name, [v.split for v in variants], paths, allow_missing=True,
                              bootstrap=resamples, bootstrap_seed=seed).pooled
        if pooled is None:
            continue
        spread = pooled.uncertainty.as_json() if pooled.uncertainty is not None else {}
        n, unparsed = pooled.metrics.get("n"), pooled.metrics.get("n_unparsed")
        rows.append(_Row(f"{fmt}: pooled", pooled.metrics, spread, f"{_count(n)} | {_count(unparsed)} | - | -"))
    return rows


def write_protocol(out: Path, protocol: Protocol, records: list[EvalRecord], model: str, *, resamples: int, seed: int,
                   template: str | None = None) -> None:
    """``protocol.md`` in ``out``; ``template``: the card's chat-template line, under the title, so
    every table of the card says how its prompts were wrapped."""
    title, _, rest = protocol_markdown(protocol, records, model, resamples, seed, out).partition("\n")
    record = provenance.read(out) or {}  # the card's: the dtype the model computed in
    if record.get("dtype"):
        ran = f"Computed in {record['dtype']} (trainer.precision `{record.get('precision')}`)."
        template = f"{template}\n\n{ran}" if template else ran
    write_text(out / "protocol.md", f"{title}\n\n{template}\n{rest}" if template else f"{title}\n{rest}")



